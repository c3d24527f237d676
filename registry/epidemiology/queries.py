"""The database side of epidemiology: aggregate in SQL, hand plain data to the statistics.

Counts per attribute value, joint counts of two values, daily counts and uptime tails are
computed by the database (PostgreSQL or SQLite); only aggregates cross into Python.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import bindparam, distinct, func, select, text
from sqlalchemy.orm import Session

from registry.db import is_postgresql
from registry.ingest.models import Event
from registry.inventory.models import Host, HostAttributeChange
from registry.signatures.models import Signature

from .analysis import InventoryRecord, SignatureSample, states_from_inventory
from .attributes import ATTRIBUTES, HOST_ATTRIBUTES, AttributeValue
from .findings import JointCounts, Pair
from .suspects import HostSignatureCount
from .uptime import OutsideCounts

PHYSICAL = "coalesce(physical_host, hostname)"
COLUMN_SQL: dict[str, str] = {name: name for name in HOST_ATTRIBUTES} | {"physical_host": PHYSICAL}


class EventFilter:
    """A WHERE clause over `events` with its parameters: one signature (and those merged
    into it), everything else, or all events."""

    def __init__(self, sql: str, params: dict[str, Any], expanding: Sequence[str] = ()) -> None:
        self.sql, self.params, self.expanding = sql, params, tuple(expanding)

    def statement(self, sql: str) -> Any:
        statement = text(sql)
        if self.expanding:
            statement = statement.bindparams(*(bindparam(n, expanding=True) for n in self.expanding))
        return statement

    @classmethod
    def signature(cls, ids: Sequence[int]) -> EventFilter:
        return cls("signature_id IN :signature_ids", {"signature_ids": list(ids)}, ["signature_ids"])

    @classmethod
    def others(cls, ids: Sequence[int]) -> EventFilter:
        return cls(
            "(signature_id IS NULL OR signature_id NOT IN :signature_ids)",
            {"signature_ids": list(ids)},
            ["signature_ids"],
        )

    @classmethod
    def everything(cls) -> EventFilter:
        return cls("1 = 1", {})


def signature_ids(session: Session, signature_id: int) -> list[int]:
    """The signature and those merged into it: one bug's events."""
    merged = session.scalars(select(Signature.id).where(Signature.merged_into_id == signature_id))
    return [signature_id, *merged]


def _labels_source(session: Session) -> str:
    if is_postgresql(session):
        return "events CROSS JOIN LATERAL jsonb_each_text(events.labels) AS l(key, value)"
    return "events, json_each(events.labels) AS l"


def value_counts(session: Session, where: EventFilter) -> dict[AttributeValue, int]:
    """Events per attribute value (one UNION ALL query, one GROUP BY per attribute)."""
    parts = [
        f"SELECT '{name}' AS attribute, {column} AS value, count(*) AS n FROM events "
        f"WHERE {where.sql} AND {column} IS NOT NULL GROUP BY {column}"
        for name, column in COLUMN_SQL.items()
    ]
    parts.append(
        "SELECT 'labels' AS attribute, l.key || '=' || l.value AS value, count(*) AS n "
        f"FROM {_labels_source(session)} WHERE {where.sql} GROUP BY l.key || '=' || l.value"
    )
    rows = session.execute(where.statement(" UNION ALL ".join(parts)), where.params)
    return {(attribute, str(value)): int(n) for attribute, value, n in rows}


def _condition(session: Session, key: AttributeValue, param: str) -> tuple[str, dict[str, Any]]:
    attribute, value = key
    if attribute != "labels":
        return f"{COLUMN_SQL[attribute]} = :{param}", {param: value}
    label, _, label_value = value.partition("=")
    if is_postgresql(session):
        return f"labels ->> :{param}_k = :{param}", {f"{param}_k": label, param: label_value}
    return (
        f"json_extract(labels, :{param}_k) = :{param}",
        {f"{param}_k": f'$."{label}"', param: label_value},
    )


def joint_counts(session: Session, where: EventFilter) -> JointCounts:
    """Events carrying both values, for every pair of the keys asked (one scan)."""

    def joint(keys: Sequence[AttributeValue]) -> dict[Pair, float]:
        ordered = sorted(set(keys))
        pairs = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
        if not pairs:
            return {}
        conditions: dict[AttributeValue, str] = {}
        params = dict(where.params)
        for index, key in enumerate(ordered):
            sql, values = _condition(session, key, f"v{index}")
            conditions[key] = sql
            params |= values
        sums = ", ".join(
            f"sum(CASE WHEN ({conditions[a]}) AND ({conditions[b]}) THEN 1 ELSE 0 END)" for a, b in pairs
        )
        row = session.execute(where.statement(f"SELECT {sums} FROM events WHERE {where.sql}"), params).one()
        return {pair: float(n or 0) for pair, n in zip(pairs, row, strict=True)}

    return joint


def _day_sql(session: Session) -> str:
    if is_postgresql(session):
        return "date(timezone('UTC', crashed_at))"
    return "date(crashed_at)"


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def signature_sample(session: Session, ids: Sequence[int]) -> SignatureSample:
    where = EventFilter.signature(ids)
    day = _day_sql(session)
    daily = {
        _as_date(d): int(n)
        for d, n in session.execute(
            where.statement(f"SELECT {day}, count(*) FROM events WHERE {where.sql} GROUP BY {day}"),
            where.params,
        )
    }
    per_host = session.execute(
        where.statement(
            f"SELECT count(*), max(n) FROM (SELECT {PHYSICAL} AS p, count(*) AS n FROM events "
            f"WHERE {where.sql} GROUP BY {PHYSICAL}) AS per_host"
        ),
        where.params,
    ).one()
    uptimes = session.scalars(
        where.statement(f"SELECT uptime_s FROM events WHERE {where.sql} AND uptime_s IS NOT NULL"),
        where.params,
    ).all()
    return SignatureSample(
        events=sum(daily.values()),
        counts=value_counts(session, where),
        hosts=int(per_host[0] or 0),
        top_host_events=int(per_host[1] or 0),
        daily=daily,
        joint=joint_counts(session, where),
        uptimes_s=[float(u) for u in uptimes],
    )


def uptime_outside(session: Session, where: EventFilter) -> OutsideCounts:
    def count(lowest: float, highest: float) -> tuple[int, int, int]:
        row = session.execute(
            where.statement(
                "SELECT sum(CASE WHEN uptime_s < :lowest THEN 1 ELSE 0 END), "
                "sum(CASE WHEN uptime_s > :highest THEN 1 ELSE 0 END), count(uptime_s) "
                f"FROM events WHERE {where.sql}"
            ),
            where.params | {"lowest": lowest, "highest": highest},
        ).one()
        return int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)

    return count


def observation_window(session: Session) -> tuple[date, date] | None:
    first, last = session.execute(select(func.min(Event.crashed_at), func.max(Event.crashed_at))).one()
    if first is None:
        return None
    return first.date(), last.date()


def inventory_records(session: Session) -> list[InventoryRecord]:
    """Hosts reported through the inventory, with their attribute history."""
    columns = [getattr(Host, name) for name in HOST_ATTRIBUTES if name != "hostname"]
    hosts = session.execute(
        select(Host.id, Host.hostname, Host.first_seen, Host.retired_at, Host.labels, *columns).where(
            Host.in_inventory.is_(True)
        )
    ).all()
    changes: dict[int, list[tuple[datetime, str, str | None]]] = defaultdict(list)
    tracked = [name for name in ATTRIBUTES if name != "hostname"]
    for host_id, attribute, old_value, changed_at in session.execute(
        select(
            HostAttributeChange.host_id,
            HostAttributeChange.attribute,
            HostAttributeChange.old_value,
            HostAttributeChange.changed_at,
        ).where(HostAttributeChange.attribute.in_(tracked))
    ):
        changes[host_id].append((changed_at, attribute, old_value))
    names = [name for name in HOST_ATTRIBUTES if name != "hostname"]
    return [
        InventoryRecord(
            hostname=row.hostname,
            first_seen=row.first_seen,
            current={"hostname": row.hostname, "labels": row.labels or {}}
            | {name: getattr(row, name) for name in names},
            changes=changes.get(row.id, ()),
            retired_at=row.retired_at,
        )
        for row in hosts
    ]


def fleet_states(session: Session) -> list:
    return states_from_inventory(inventory_records(session))


def hosts_per_physical(session: Session) -> dict[str, int]:
    """Hosts (VMs or bare metal) carried by each physical host: every host the registry
    knows, from the inventory or from crash reports."""
    physical = func.coalesce(Host.physical_host, Host.hostname)
    return {
        p: int(n)
        for p, n in session.execute(
            select(physical, func.count()).where(Host.retired_at.is_(None)).group_by(physical)
        )
    }


def host_signature_counts(session: Session) -> list[HostSignatureCount]:
    """Per physical host and signature: events, distinct hosts, first and last crash."""
    physical = func.coalesce(Event.physical_host, Event.hostname)
    rows = session.execute(
        select(
            physical,
            Event.signature_id,
            func.count(),
            func.count(distinct(Event.hostname)),
            func.min(Event.crashed_at),
            func.max(Event.crashed_at),
        )
        .where(Event.signature_id.is_not(None))
        .group_by(physical, Event.signature_id)
    )
    return [
        HostSignatureCount(p, str(signature), int(n), int(hosts), first, last)
        for p, signature, n, hosts, first, last in rows
    ]
