"""The rollups as stored, and as a scan of every event would count them: what the rollup tests
compare after each kind of change."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from registry.core.events import Event
from registry.core.signatures import Signature
from registry.rollups.fold import DIMENSIONS, ONLY_WHEN_SET, UNKNOWN

Rollups = dict[str, dict[tuple[Any, ...], tuple[int, ...]]]


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
    }


STORED = {
    "breakdown": "SELECT day, dimension, value, events, memory_gb, memory_known, repeats "
                 "FROM rollup_breakdown_daily",
    "host_daily": "SELECT signature_id, day, host_id, events FROM rollup_signature_host_daily",
    "signature_daily": "SELECT signature_id, day, events, hosts FROM rollup_signature_daily",
    "sources": "SELECT signature_id, source, events, repeats FROM rollup_signature_sources",
}
KEY_LENGTH = {"breakdown": 3, "host_daily": 3, "signature_daily": 2, "sources": 2}


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


def queued(session: Session) -> int:
    return int(session.execute(text("SELECT COUNT(*) FROM rollup_changes")).scalar_one())
