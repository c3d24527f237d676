"""What the pages read beyond the API's objects: daily counts, host counts, marks on the time
axis, a signature's busiest hosts, an event's console log. Each is one grouped query; daily
counts and sources come from the rollups (registry/rollups), so the list reads no event; a
large signature's hosts and kernels come from its stored epidemiology sample."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import ColumnElement, case, distinct, func, select
from sqlalchemy.orm import Session

from registry.bounds import plausible
from registry.core.events import Event, Report
from registry.core.hosts import Host, HostAttributeChange
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.epidemiology.models import EpidemiologyVerdict
from registry.epidemiology.queries import top_values
from registry.pages.charts import Mark
from registry.rollups.reads import signature_daily, signature_sources
from registry.signatures.api import CURSOR_VALUES, SORTS, CursorValues, Sorts

TOP_HOSTS = 20
# The verdicts as the list sorts them, most actionable first when descending (0: not analysed).
VERDICT_RANKS = {"single-host": 4, "hardware-config": 3, "software": 2, "inconclusive": 1}


def _stored(column: Any) -> Any:
    """The last epidemiology refresh's value for the listed signature (a correlated subquery)."""
    return select(column).where(EpidemiologyVerdict.signature_id == Signature.id).scalar_subquery()


# The list page sorts by what it shows: the API's keys, and the physical hosts and verdict of
# the last refresh (a signature not yet analysed counts 0 hosts and sorts after every verdict).
PAGE_SORTS: Sorts = SORTS | {
    "hosts": lambda stats: func.coalesce(_stored(EpidemiologyVerdict.hosts), 0),
    "verdict": lambda stats: func.coalesce(
        _stored(case(VERDICT_RANKS, value=EpidemiologyVerdict.verdict, else_=0)), 0),
}
PAGE_CURSOR_VALUES: CursorValues = CURSOR_VALUES | {"hosts": CURSOR_VALUES["events"],
                                                    "verdict": CURSOR_VALUES["events"]}
ROLLOUT_KERNELS = 5  # the signature's kernels whose rollouts are marked, most crashes first

# A UTC day as 'YYYY-MM-DD' text. SQLite keeps UTC timestamps as ISO text; PostgreSQL keeps
# timestamptz, whose day depends on the session's time zone unless converted.
DAY: dict[str, Callable[[Any], ColumnElement[str]]] = {
    "sqlite": lambda column: func.substr(column, 1, 10),
    "postgresql": lambda column: func.to_char(func.timezone("UTC", column), "YYYY-MM-DD"),
}


def utc_day(session: Session, column: Any) -> ColumnElement[str]:
    return DAY[session.get_bind().dialect.name](column)


def daily_counts(
    session: Session, signature_ids: Sequence[int], since: datetime | None = None
) -> dict[int, dict[date, int]]:
    """Events per signature and UTC day (from the day of `since` on), from the rollups."""
    return signature_daily(session, signature_ids, since.date() if since is not None else None)


def merged_daily(per_signature: dict[int, dict[date, int]]) -> dict[date, int]:
    """One signature's days from its own and its merged members' counts."""
    total: dict[date, int] = {}
    for days in per_signature.values():
        for day, n in days.items():
            total[day] = total.get(day, 0) + n
    return total


# Distinct physical hosts: a VM's hypervisor node; bare metal counts as its own.
PHYSICAL_HOSTS = func.count(distinct(func.coalesce(Event.physical_host, Event.hostname)))


def physical_host_counts(session: Session, signature_ids: Sequence[int]) -> dict[int, int]:
    """Per signature: distinct physical hosts, the count the verdict weighs. The list asks only
    for signatures the last refresh has not counted (new ones, small), so it never scans a
    large signature's events."""
    if not signature_ids:
        return {}
    rows = session.execute(
        select(Event.signature_id, PHYSICAL_HOSTS)
        .where(Event.signature_id.in_(signature_ids))
        .group_by(Event.signature_id)
    )
    return {sid: int(hosts) for sid, hosts in rows}


def source_counts(
    session: Session, signature_ids: Sequence[int]
) -> dict[int, dict[str, tuple[int, int]]]:
    """Per signature and first source: (events, their repeats), from the rollups."""
    return signature_sources(session, signature_ids)


def top_hosts(
    session: Session, signature_ids: Sequence[int], limit: int = TOP_HOSTS
) -> tuple[list[dict[str, Any]], int]:
    """The hosts with most events, and how many hosts (hostnames) there are in all. A large
    signature's counts per host come from its stored epidemiology sample and the events since
    (then only the top hosts' own events are read); a small one's from one grouped read (the
    total a window count over the groups)."""
    columns = (
        Event.hostname,
        func.max(Event.physical_host),
        func.count(),
        func.max(plausible(Event.crashed_at)),
        func.max(Event.kernel_version),
        func.max(Event.region),
        func.max(Event.sku),
    )
    keys = ("hostname", "physical_host", "events", "last_crash", "kernel_version", "region", "sku")
    counted = top_values(session, signature_ids, "hostname", limit)
    if counted is not None:
        names = [name for name, _ in counted[0]]
        rows = session.execute(
            select(*columns)
            .where(
                Event.signature_id.in_(signature_ids),
                Event.hostname.in_(names),
                Event.host_id.in_(select(Host.id).where(Host.hostname.in_(names))),  # the hosts' index
            )
            .group_by(Event.hostname)
        ).all()
        found = {row[0]: dict(zip(keys, row, strict=True)) for row in rows}
        return [found[name] for name in names if name in found], counted[1]
    rows = session.execute(
        select(*columns, func.count().over())
        .where(Event.signature_id.in_(signature_ids))
        .group_by(Event.hostname)
        .order_by(func.count().desc(), Event.hostname)
        .limit(limit)
    ).all()
    return [dict(zip(keys, row[:-1], strict=True)) for row in rows], (int(rows[0][-1]) if rows else 0)


def marks(session: Session, signature_ids: Sequence[int], first_seen: datetime,
          kernel_rollouts: bool = True) -> list[Mark]:
    """The signature's first sighting, the days it regressed, and (`kernel_rollouts`: a kernel
    bug's, not a program's) when the kernels it crashed on most were first rolled out in the
    fleet (from the inventory's attribute history)."""
    found = [Mark(first_seen.date(), "first-seen", f"first sighting, {first_seen:%H:%M} UTC")]
    day = utc_day(session, Event.crashed_at)
    regressed = session.execute(
        select(day, func.count())
        .where(Event.signature_id.in_(signature_ids), Event.regression == "regressed")
        .group_by(day)
    )
    found += [
        Mark(date.fromisoformat(d), "regression", f"regressed: {n} crashes after the fix")
        for d, n in regressed
    ]
    if not kernel_rollouts:
        return found
    counted = top_values(session, signature_ids, "kernel_version", ROLLOUT_KERNELS)
    kernels = (
        [kernel for kernel, _ in counted[0]]
        if counted is not None
        else session.scalars(
            select(Event.kernel_version)
            .where(Event.signature_id.in_(signature_ids), Event.kernel_version.is_not(None))
            .group_by(Event.kernel_version)
            .order_by(func.count().desc(), Event.kernel_version)
            .limit(ROLLOUT_KERNELS)
        ).all()
    )
    if kernels:
        rollouts = session.execute(
            select(HostAttributeChange.new_value, func.min(HostAttributeChange.changed_at))
            .where(
                HostAttributeChange.attribute == "kernel_version", HostAttributeChange.new_value.in_(kernels)
            )
            .group_by(HostAttributeChange.new_value)
        )
        found += [Mark(at.date(), "kernel-rollout", f"kernel {kernel} rolled out") for kernel, at in rollouts]
    return found


def latest_events(session: Session, signature_ids: Sequence[int], limit: int) -> list[Event]:
    """Newest crashes first (by when they crashed, not when they were reported)."""
    return list(
        session.scalars(
            select(Event)
            .where(Event.signature_id.in_(signature_ids))
            .order_by(Event.crashed_at.desc(), Event.id.desc())
            .limit(limit)
        )
    )


def stored_verdicts(session: Session, signature_ids: Sequence[int]) -> dict[int, EpidemiologyVerdict]:
    """The last refresh's verdicts (the list shows these; a signature's page computes its own)."""
    rows = session.scalars(
        select(EpidemiologyVerdict).where(EpidemiologyVerdict.signature_id.in_(signature_ids))
    )
    return {row.signature_id: row for row in rows}


def console_log(session: Session, event_id: int) -> tuple[str, str] | None:
    """The first stored console log of an event's reports, with the source that sent it."""
    row = session.execute(
        select(Report.source, Report.console_log)
        .where(Report.event_id == event_id, Report.console_log.is_not(None))
        .order_by(Report.received_at, Report.id)
        .limit(1)
    ).one_or_none()
    return (row.source, row.console_log) if row else None


def jira_urls(session: Session, signature_ids: Sequence[int]) -> dict[int, str]:
    rows = session.execute(
        select(JiraLink.signature_id, JiraLink.url).where(
            JiraLink.signature_id.in_(signature_ids), JiraLink.url.is_not(None)
        )
    )
    return {sid: url for sid, url in rows}
