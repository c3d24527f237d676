"""The kernels' rollup (migration 0048) on a seeded random inventory: hosts arriving, retiring
and deleted, kernel changes recorded out of order, back-dated before a host came, tied, from an
unknown kernel, rolled back, corrected and deleted, crashes back-filled before a first sighting.

- Upgraded from 0047 on a registry with that history, the back-fill gives every host the
  intervals the view it replaces (`rpt_kernel_intervals`) computed, and the panel's host-days
  and hosts over any range are those intervals cut to it, computed here in Python.
- Kept by the fold through every further change, the rollup equals one computed afresh.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, text, update
from sqlalchemy.orm import Session

from dashboards import build_dashboards
from registry.core.hosts import Host, HostAttributeChange
from registry.db import Database
from registry.migrate import upgrade
from registry.rollups.fold import fold
from registry.rollups.models import HostDays, KernelInterval
from testkit.grafana_sql import TimeRange, expand_target
from testkit.reports import crash_report
from tests.support.databases import BACKENDS, create_postgres_database, drop_postgres_database
from tests.support.fleet import iso
from tests.support.http import auth
from tests.support.rollups import assert_exact, scanned_fleet, scanned_intervals

BEFORE = "0047_rpt_kernel_intervals"
KERNELS = ("6.1.0-10", "6.1.0-20", "6.8.0-50", None)
START = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=60)
Row = tuple[str, str, datetime, datetime | None]  # hostname, kernel, valid from, valid to


def moment(rng: random.Random, first: float, last: float) -> datetime:
    """A time between START + `first` and START + `last` days; a sixth at midnight exactly."""
    days = rng.uniform(first, last)
    return START + timedelta(days=int(days) if rng.random() < 1 / 6 else days)


def plant(session: Session, rng: random.Random, hosts: int, prefix: str) -> None:
    """Hosts with a history of kernel changes (and a BIOS one, which must not count)."""
    for n in range(hosts):
        first_seen = moment(rng, 0, 58)
        host = Host(
            hostname=f"{prefix}{n:02d}",
            first_seen=first_seen,
            kernel_version=rng.choice(KERNELS),
            retired_at=moment(rng, 20, 59.9) if rng.random() < 0.2 else None,
        )
        session.add(host)
        session.flush()
        changes = [(rng.choice(KERNELS), moment(rng, -5, 59.9)) for _ in range(rng.randint(0, 5))]
        if changes and rng.random() < 0.3:
            changes.append((rng.choice(KERNELS), changes[0][1]))  # a tie: the id orders them
        for old, at in changes:
            session.add(
                HostAttributeChange(
                    host_id=host.id, attribute="kernel_version", old_value=old, new_value="?", changed_at=at
                )
            )
        session.add(
            HostAttributeChange(
                host_id=host.id,
                attribute="bios_version",
                old_value="1.0",
                new_value="2.0",
                changed_at=moment(rng, 0, 59),
            )
        )


def stamp(value: Any) -> datetime | None:
    """A timestamp read by plain SQL: aware on PostgreSQL, text on SQLite."""
    if value is None or isinstance(value, datetime):
        return value and value.astimezone(UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def rows(session: Session, sql: str) -> list[Row]:
    return sorted(
        (name, kernel, stamp(start), stamp(end)) for name, kernel, start, end in session.execute(text(sql))
    )


def panel(session: Session, window: TimeRange) -> dict[str, tuple[int, float]]:
    """The panel's hosts and host-days per kernel (the registry's own connection)."""
    dialect = session.get_bind().dialect.name
    board = next(b for b in build_dashboards(dialect, "x") if b["uid"] == "crashreg-epidemiology")
    target = next(p for p in board["panels"] if p["title"].startswith("Crash rate by kernel"))["targets"][0]
    return {
        kernel: (int(hosts), float(days))
        for kernel, _, hosts, days, _ in session.execute(text(expand_target(target, {}, window)))
        if int(hosts)
    }


def cut(intervals: list[Row], start: datetime, end: datetime) -> dict[str, tuple[int, float]]:
    """Per kernel: distinct hosts and host-days of the intervals inside [start, end)."""
    hosts: dict[str, set[str]] = {}
    seconds: dict[str, float] = {}
    for name, kernel, valid_from, valid_to in intervals:
        overlap = (min(end, valid_to or end) - max(start, valid_from)).total_seconds()
        if overlap > 0:
            hosts.setdefault(kernel, set()).add(name)
            seconds[kernel] = seconds.get(kernel, 0.0) + overlap
    return {kernel: (len(hosts[kernel]), seconds[kernel] / 86400) for kernel in hosts}


def assert_panel_cuts(session: Session, intervals: list[Row]) -> None:
    """Ranges of whole days (the panel counts those whose start lies in the range), and ranges
    reaching past now (today counted up to now)."""
    for first, last in ((0, 60), (10, 40), (25, 26), (-10, 3), (33, 34)):
        window = TimeRange(START + timedelta(days=first, hours=-1), START + timedelta(days=last, hours=-1))
        got, want = (
            panel(session, window),
            cut(intervals, START + timedelta(days=first), START + timedelta(days=last)),
        )
        assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}, (first, last)
        for kernel, (_, days) in want.items():
            assert got[kernel][1] == pytest.approx(days, abs=1e-6), (first, last, kernel)
    now = datetime.now(UTC)
    got = panel(session, TimeRange(now - timedelta(days=3), now + timedelta(days=1)))
    want = cut(intervals, now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2), now)
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
    for kernel, (hosts, days) in want.items():  # the read's now is a little later than this one
        assert got[kernel][1] == pytest.approx(days, abs=hosts * 5 / 86400)


@pytest.fixture(params=BACKENDS)
def before_kernel_rollup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'registry.db'}" if request.param == "sqlite" else create_postgres_database()
    upgrade(url, BEFORE)
    yield url
    if request.param == "postgresql":
        drop_postgres_database(url)


def test_the_upgrade_back_fills_the_intervals_the_view_computed(before_kernel_rollup: str) -> None:
    url, rng = before_kernel_rollup, random.Random(48)
    database = Database(url)
    with database.session() as session:
        plant(session, rng, 60, "h")
        # as the fleet's rollup had it: each host's first sighting and, for some, a crash back-filled
        # days before it (what the view reads for them)
        session.execute(text("DELETE FROM rollup_host_changes"))
        for host_id, first_seen in session.execute(select(Host.id, Host.first_seen)).all():
            days = {first_seen.date()} | (
                {first_seen.date() - timedelta(days=3)} if rng.random() < 0.3 else set()
            )
            session.add_all(HostDays(host_id=host_id, day=day, marks=1) for day in days)
    with database.session() as session:
        viewed = rows(
            session, "SELECT hostname, kernel_version, valid_from, valid_to FROM rpt_kernel_intervals"
        )
    assert len({row[0] for row in viewed}) > 40 and len(viewed) > 100  # a history worth the name
    database.dispose()

    upgrade(url)
    database = Database(url)
    assert fold(database).rebuilt
    with database.session() as session:
        kept = rows(
            session,
            "SELECT h.hostname, k.kernel_version, k.valid_from, k.valid_to "
            "FROM rollup_kernel_intervals k JOIN hosts h ON h.id = k.host_id",
        )
        assert kept == viewed
        assert_panel_cuts(session, viewed)
    database.dispose()


def test_the_rollup_follows_every_change(database: Database, client: Any, make_token: Any) -> None:
    rng = random.Random(480)
    with database.session() as session:
        plant(session, rng, 40, "h")
    assert_exact(database)
    reporter = make_token("report")
    for round_ in range(4):
        with database.session() as session:
            ids = list(session.scalars(select(Host.id).order_by(Host.id)))
            changes = list(
                session.scalars(
                    select(HostAttributeChange.id).where(HostAttributeChange.attribute == "kernel_version")
                )
            )
            for host_id in rng.sample(ids, 6):  # back-dated into days already folded
                session.add(
                    HostAttributeChange(
                        host_id=host_id,
                        attribute="kernel_version",
                        old_value=rng.choice(KERNELS),
                        changed_at=moment(rng, 0, 59),
                    )
                )
            session.execute(
                delete(HostAttributeChange).where(HostAttributeChange.id.in_(rng.sample(changes, 3)))
            )
            session.execute(
                update(HostAttributeChange)
                .where(HostAttributeChange.id == rng.choice(changes))
                .values(changed_at=moment(rng, 0, 59))
            )
            for host_id in rng.sample(ids, 4):
                retired = moment(rng, 10, 59.9) if rng.random() < 0.7 else None
                session.execute(update(Host).where(Host.id == host_id).values(retired_at=retired))
            session.execute(
                update(Host)
                .where(Host.id == rng.choice(ids))
                .values(first_seen=moment(rng, 0, 50), kernel_version=rng.choice(KERNELS))
            )
            session.execute(delete(Host).where(Host.id == rng.choice(ids)))
            plant(session, rng, 2, f"new{round_}-")
            backfilled = session.scalar(select(Host.hostname).where(Host.id == rng.choice(ids[1:])))
        # a crash back-filled before its host's first sighting moves its start (through the fleet)
        report = crash_report(
            crashed_at=iso(START - timedelta(days=rng.randint(1, 9))), host={"hostname": backfilled}
        )
        assert client.post("/api/v1/reports", json=report, headers=auth(reporter)).status_code == 201
        assert_exact(database)
        with database.session() as session:
            marks = scanned_fleet(session)["host_days"]
            expected = {
                host: intervals for host, intervals in scanned_intervals(session, marks).items() if intervals
            }
            kept: dict[int, list[Any]] = {}
            for row in session.scalars(select(KernelInterval).order_by(KernelInterval.valid_from)):
                kept.setdefault(row.host_id, []).append((row.kernel_version, row.valid_from, row.valid_to))
            assert kept == expected
