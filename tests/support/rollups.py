"""The rollups as stored, and as a scan of every event would count them: what the rollup tests
compare after each kind of change."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from registry.core.events import Event
from registry.core.hosts import Host
from registry.core.signatures import Signature
from registry.db import Database
from registry.rollups.captures_fleet import NO_ACTION, NO_NUMBER
from registry.rollups.dialect import DURATION
from registry.rollups.fold import DIMENSIONS, ONLY_WHEN_SET, UNKNOWN, fold
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
        **scanned_fleet(session),
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
}
KEY_LENGTH = {"breakdown": 3, "host_daily": 3, "signature_daily": 2, "sources": 2, "capture_daily": 5,
              "host_days": 2, "fleet_daily": 1}


def stored(session: Session) -> Rollups:
    """The rollup tables' rows, days as 'YYYY-MM-DD' on both databases."""
    found: Rollups = {}
    for name, sql in STORED.items():
        rows = {}
        for row in session.execute(text(sql)):
            length = KEY_LENGTH[name]
            key = tuple(_day(v) if column == "day" else v
                        for column, v in zip(row._fields[:length], row[:length], strict=True))
            rows[key] = tuple(int(v) for v in row[length:])
        found[name] = rows
    return found


QUEUES = ("rollup_changes", "rollup_capture_changes", "rollup_host_changes")


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
