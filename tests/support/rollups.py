"""The rollups as stored, and as a scan of every event would count them: what the rollup tests
compare after each kind of change."""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from registry.core.events import Event
from registry.core.hosts import Host, HostAttributeChange
from registry.core.signatures import Signature
from registry.db import Database
from registry.rollups.captures_fleet import NO_ACTION, NO_NUMBER
from registry.rollups.dialect import DURATION
from registry.rollups.fold import DIMENSIONS, ONLY_WHEN_SET, UNKNOWN, fold
from registry.rollups.kernels import HostHistory, KernelDeltas, kernel_intervals
from tests.support.golden import golden
from tests.support.signatures import report

Rollups = dict[str, dict[tuple[Any, ...], tuple[int, ...]]]
GPF, WARNING, KASAN, KBUG = (golden(f"kinds/{name}") for name in ("gpf", "warning", "kasan", "kernel-bug"))


def _day(value: Any) -> str:
    return value.date().isoformat() if hasattr(value, "date") else str(value)[:10]


def scanned(session: Session) -> Rollups:
    """Every rollup computed in Python from every event (the slow, obvious way)."""
    breakdown: dict[tuple[Any, ...], list[int]] = {}
    host_daily: Counter[tuple[Any, ...]] = Counter()
    sources: dict[tuple[Any, ...], list[int]] = {}
    rows = session.execute(
        select(Event, Signature.kind).outerjoin(Signature, Signature.id == Event.signature_id))
    for event, kind in rows:
        day = _day(event.crashed_at)
        values = {"kind": kind} | {d: getattr(event, c) for d, c in DIMENSIONS.items() if d != "kind"}
        for dimension, value in values.items():
            if value is None and dimension in ONLY_WHEN_SET:
                continue
            total = breakdown.setdefault((day, dimension, UNKNOWN if value is None else value), [0, 0, 0, 0])
            memory = event.memory_gb
            for index, add in enumerate((1, memory or 0, memory is not None, event.repeats)):
                total[index] += add
        if event.signature_id is not None:
            host_daily[(event.signature_id, day, event.host_id)] += 1
            total = sources.setdefault((event.signature_id, event.first_source), [0, 0])
            total[0] += 1
            total[1] += event.repeats
    signature_daily: dict[tuple[Any, ...], list[int]] = {}
    for (signature_id, day, _), n in host_daily.items():
        total = signature_daily.setdefault((signature_id, day), [0, 0])
        total[0] += n
        total[1] += 1
    return {
        "breakdown": {key: tuple(v) for key, v in breakdown.items()},
        "host_daily": {key: (n,) for key, n in host_daily.items()},
        "signature_daily": {key: tuple(v) for key, v in signature_daily.items()},
        "sources": {key: tuple(v) for key, v in sources.items()},
        "capture_daily": scanned_captures(session),
        **(fleet := scanned_fleet(session)),
        **scanned_kernels(session, fleet["host_days"]),
    }


def scanned_captures(session: Session) -> dict[tuple[Any, ...], tuple[int, ...]]:
    """Captures per crash day, decision, status, memory and duration (PostgreSQL: its bucket,
    as the database computes it), from every capture and its event."""
    duration = DURATION[session.get_bind().dialect.name]("c.duration_s")
    totals: dict[tuple[Any, ...], list[int]] = {}
    for crashed_at, action, memory, status, size, downtime, bucket in session.execute(text(
            f"SELECT e.crashed_at, e.capture_action, e.memory_gb, c.status, c.bytes, c.downtime_s, "
            f"{duration} FROM captures c JOIN events e ON e.id = c.event_id")):
        key = (_day(crashed_at), NO_ACTION if action is None else action, status,
               NO_NUMBER if memory is None else memory, NO_NUMBER if bucket is None else float(bucket))
        total = totals.setdefault(key, [0] * 5)
        for index, add in enumerate((1, size or 0, size is not None, round((downtime or 0) * 1_000_000),
                                     downtime is not None)):
            total[index] += add
    return {key: tuple(v) for key, v in totals.items()}


def scanned_fleet(session: Session) -> Rollups:
    """Each host's marks (its crashes per day, its first sighting), the day it joined (the
    earliest) and the day it retired, from every host and event."""
    marks: Counter[tuple[Any, ...]] = Counter()
    for host_id, crashed_at in session.execute(select(Event.host_id, Event.crashed_at)):
        marks[(host_id, _day(crashed_at))] += 1
    fleet: dict[tuple[Any, ...], list[int]] = {}
    hosts = session.execute(select(Host.id, Host.first_seen, Host.retired_at)).all()
    for host_id, first_seen, _ in hosts:
        marks[(host_id, _day(first_seen))] += 1
    for host_id, _, retired_at in hosts:
        joined = min(day for host, day in marks if host == host_id)
        fleet.setdefault((joined,), [0, 0])[0] += 1
        if retired_at is not None:
            fleet.setdefault((_day(retired_at),), [0, 0])[1] += 1
    return {"host_days": {key: (n,) for key, n in marks.items()},
            "fleet_daily": {key: tuple(v) for key, v in fleet.items()}}


Marks = dict[tuple[Any, ...], tuple[int, ...]]


def scanned_intervals(session: Session, marks: Marks) -> dict[int, list[Any]]:
    """Every host's kernel intervals from its row, its kernel changes and its marks (days)."""
    first_days: dict[int, date] = {}
    for host_id, day in marks:
        first_days[host_id] = min(date.fromisoformat(day), first_days.get(host_id, date.max))
    changes: dict[int, list[Any]] = {}
    change = HostAttributeChange
    for host_id, old, at in session.execute(
            select(change.host_id, change.old_value, change.changed_at)
            .where(change.attribute == "kernel_version").order_by(change.changed_at, change.id)):
        changes.setdefault(host_id, []).append((old, at))
    return {
        host.id: kernel_intervals(HostHistory(
            host.first_seen, host.retired_at, host.kernel_version, first_days.get(host.id),
            changes.get(host.id, ())))
        for host in session.scalars(select(Host))
    }


def scanned_kernels(session: Session, marks: Marks) -> Rollups:
    """The kernels' daily sums and gaps from every host's intervals computed afresh."""
    summed = KernelDeltas()
    for intervals in scanned_intervals(session, marks).values():
        summed.add(intervals, 1)
    return {
        "kernel_daily": {(day.isoformat(), kernel): tuple(counts)
                         for (day, kernel), counts in summed.daily.items() if any(counts)},
        "kernel_gaps": {(kernel, ended.isoformat(), resumed.isoformat()): (n,)
                        for (kernel, ended, resumed), n in summed.gaps.items() if n},
    }


STORED = {
    "breakdown": "SELECT day, dimension, value, events, memory_gb, memory_known, repeats "
                 "FROM rollup_breakdown_daily",
    "host_daily": "SELECT signature_id, day, host_id, events FROM rollup_signature_host_daily",
    "signature_daily": "SELECT signature_id, day, events, hosts FROM rollup_signature_daily",
    "sources": "SELECT signature_id, source, events, repeats FROM rollup_signature_sources",
    "capture_daily": "SELECT day, capture_action, status, memory_gb, duration_s, captures, bytes, "
                     "bytes_known, downtime_us, downtime_known FROM rollup_capture_daily",
    "host_days": "SELECT host_id, day, marks FROM rollup_host_days",
    "fleet_daily": "SELECT day, joined, retired FROM rollup_fleet_daily",
    "kernel_daily": "SELECT day, kernel_version, starts, ends, start_us, end_us FROM rollup_kernel_daily",
    "kernel_gaps": "SELECT kernel_version, ended_day, resumed_day, gaps FROM rollup_kernel_gaps",
}
KEY_LENGTH = {"breakdown": 3, "host_daily": 3, "signature_daily": 2, "sources": 2, "capture_daily": 5,
              "host_days": 2, "fleet_daily": 1, "kernel_daily": 2, "kernel_gaps": 3}


def stored(session: Session) -> Rollups:
    """The rollup tables' rows, days as 'YYYY-MM-DD' on both databases."""
    found: Rollups = {}
    for name, sql in STORED.items():
        rows = {}
        for row in session.execute(text(sql)):
            length = KEY_LENGTH[name]
            key = tuple(_day(v) if column.endswith("day") else v
                        for column, v in zip(row._fields[:length], row[:length], strict=True))
            rows[key] = tuple(int(v) for v in row[length:])
        found[name] = rows
    return found


QUEUES = ("rollup_changes", "rollup_capture_changes", "rollup_host_changes", "rollup_kernel_hosts")


def queued(session: Session, queues: tuple[str, ...] = QUEUES) -> int:
    """Changes not folded yet (in every queue unless named)."""
    return sum(int(session.execute(text(f"SELECT COUNT(*) FROM {queue}")).scalar_one()) for queue in queues)


def assert_exact(database: Database) -> None:
    """Fold what is queued, then the rollups are the scan's counts, and nothing is left queued."""
    fold(database, batch=3)  # small batches: a batch's end falls inside one event's changes
    with database.session() as session:
        assert queued(session) == 0
        assert stored(session) == scanned(session)


def ingest_some(client: Any, token: str) -> dict[str, Any]:
    answers = {
        "gpf": report(client, token, GPF, hostname="node-a", region="eu-1", memory_gb=2048),
        "gpf2": report(client, token, GPF, hostname="node-b", region="us-2"),
        "warning": report(client, token, WARNING, hostname="node-a", kernel_version="6.1.1"),
        "kasan": report(client, token, KASAN, hostname="node-c", sku="gpu-x"),
        "kasan2": report(client, token, KASAN, hostname="node-c"),
        "kbug": report(client, token, KBUG, hostname="node-d"),
    }
    return answers
