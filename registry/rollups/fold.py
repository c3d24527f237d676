"""Folding the queue of event changes into the rollups, and building them from events.

`fold` is what runs in normal operation (the scheduler's rollups job): it takes a batch of
queued changes (deleting exactly the rows it read, so a change whose transaction commits late,
with a lower id, is simply taken by a later batch), adds their deltas to the rollups, and
repeats until the queue is empty. It never reads `events`: counts survive events being archived.

`rebuild` (the migration's backfill, `crashreg rollups rebuild` for repair) computes the
rollups from `events` in one snapshot and drops the queued changes that snapshot already
holds, so changes committed meanwhile are folded on top, neither lost nor counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, text

from registry.db import Database

BATCH = 10_000
# pg_advisory_lock key: one fold or rebuild at a time (SQLite: its write lock does this).
LOCK_KEY = 0x726F6C6C7570  # "rollup"

# rpt_daily_breakdown's dimensions -> the queued change's column (regression: only when set).
DIMENSIONS: dict[str, str] = {
    "kind": "kind", "region": "region", "kernel_version": "kernel_version",
    "capture_action": "capture_action", "regression": "regression", "bios_version": "bios_version",
    "sku": "sku", "source": "first_source",
}
ONLY_WHEN_SET = frozenset({"regression"})
UNKNOWN = "unknown"

# A UTC day, as each database keeps it in a Date column.
DAY: dict[str, Callable[[str], str]] = {
    "postgresql": lambda column: f"({column} AT TIME ZONE 'UTC')::date",
    "sqlite": lambda column: f"date({column})",
}
CHANGE_COLUMNS = ("delta", "signature_id", "kind", "host_id", "region", "kernel_version", "capture_action",
                  "regression", "bios_version", "sku", "first_source", "memory_gb", "repeats")


@dataclass
class Deltas:
    """A batch of changes summed per rollup key: what to add to each rollup."""

    # (day, dimension, value) -> events, memory GB, events with memory known, repeats
    breakdown: dict[tuple[Any, str, str], list[int]] = field(default_factory=dict)
    host_daily: dict[tuple[int, Any, int], int] = field(default_factory=dict)
    sources: dict[tuple[int, str], list[int]] = field(default_factory=dict)  # events, repeats


def _add(totals: dict[Any, list[int]], key: Any, values: Sequence[int]) -> None:
    current = totals.setdefault(key, [0] * len(values))
    for index, value in enumerate(values):
        current[index] += value


def deltas(changes: Iterable[dict[str, Any]]) -> Deltas:
    """Sum queued changes (each a mapping of CHANGE_COLUMNS and `day`) per rollup key."""
    summed = Deltas()
    for change in changes:
        delta, day, memory = change["delta"], change["day"], change["memory_gb"]
        values = (delta, delta * (memory or 0), delta * (memory is not None), delta * change["repeats"])
        for dimension, column in DIMENSIONS.items():
            value = change[column]
            if value is None and dimension in ONLY_WHEN_SET:
                continue
            _add(summed.breakdown, (day, dimension, UNKNOWN if value is None else value), values)
        signature = change["signature_id"]
        if signature is None:
            continue
        key = (signature, day, change["host_id"])
        summed.host_daily[key] = summed.host_daily.get(key, 0) + delta
        _add(summed.sources, (signature, change["first_source"]), (delta, delta * change["repeats"]))
    return summed


UPSERT_BREAKDOWN = text(
    "INSERT INTO rollup_breakdown_daily (day, dimension, value, events, memory_gb, memory_known, repeats) "
    "VALUES (:day, :dimension, :value, :events, :memory_gb, :memory_known, :repeats) "
    "ON CONFLICT (day, dimension, value) DO UPDATE SET "
    "events = rollup_breakdown_daily.events + excluded.events, "
    "memory_gb = rollup_breakdown_daily.memory_gb + excluded.memory_gb, "
    "memory_known = rollup_breakdown_daily.memory_known + excluded.memory_known, "
    "repeats = rollup_breakdown_daily.repeats + excluded.repeats"
)
UPSERT_HOST_DAILY = text(
    "INSERT INTO rollup_signature_host_daily (signature_id, day, host_id, events) "
    "VALUES (:signature_id, :day, :host_id, :events) ON CONFLICT (signature_id, day, host_id) "
    "DO UPDATE SET events = rollup_signature_host_daily.events + excluded.events"
)
UPSERT_SOURCES = text(
    "INSERT INTO rollup_signature_sources (signature_id, source, events, repeats) "
    "VALUES (:signature_id, :source, :events, :repeats) ON CONFLICT (signature_id, source) "
    "DO UPDATE SET events = rollup_signature_sources.events + excluded.events, "
    "repeats = rollup_signature_sources.repeats + excluded.repeats"
)
# A signature's day from its hosts' rows: exact distinct hosts (WHERE true: SQLite's upsert
# after a SELECT needs it to parse).
RECOUNT_SIGNATURE_DAY = text(
    "INSERT INTO rollup_signature_daily (signature_id, day, events, hosts) "
    "SELECT :signature_id, :day, COALESCE(SUM(events), 0), COUNT(*) FROM rollup_signature_host_daily "
    "WHERE signature_id = :signature_id AND day = :day AND true "
    "ON CONFLICT (signature_id, day) DO UPDATE SET events = excluded.events, hosts = excluded.hosts"
)
# Rows counted down to nothing are removed: a rollup holds what is there. Only a key whose
# batch delta is not positive can reach nothing (an event's -1 is never folded before its +1);
# a key whose deltas all cancel is not written at all.
EMPTIED = {
    "breakdown": text("DELETE FROM rollup_breakdown_daily WHERE day = :day AND dimension = :dimension "
                      "AND value = :value AND events = 0"),
    "host_daily": text("DELETE FROM rollup_signature_host_daily WHERE signature_id = :signature_id "
                       "AND day = :day AND host_id = :host_id AND events = 0"),
    "sources": text("DELETE FROM rollup_signature_sources WHERE signature_id = :signature_id "
                    "AND source = :source AND events = 0"),
    "signature_daily": text("DELETE FROM rollup_signature_daily WHERE signature_id = :signature_id "
                            "AND day = :day AND events = 0"),
}


def _take_batch(connection: Connection, dialect: str, limit: int) -> list[dict[str, Any]]:
    """Delete the oldest queued changes and return them (exactly the rows deleted)."""
    returning = ", ".join((*CHANGE_COLUMNS, f"{DAY[dialect]('crashed_at')} AS day"))
    rows = connection.execute(
        text(f"DELETE FROM rollup_changes WHERE id IN (SELECT id FROM rollup_changes ORDER BY id "
             f"LIMIT :limit) RETURNING {returning}"),
        {"limit": limit},
    ).mappings()
    return [dict(row) for row in rows]


def apply(connection: Connection, summed: Deltas) -> None:
    """Add a batch's deltas to the rollups, recount the signature days it touched."""
    breakdown = [
        {"day": day, "dimension": dimension, "value": value, "events": n, "memory_gb": gb,
         "memory_known": known, "repeats": repeats}
        for (day, dimension, value), (n, gb, known, repeats) in summed.breakdown.items()
        if any((n, gb, known, repeats))
    ]
    host_daily = [{"signature_id": s, "day": d, "host_id": h, "events": n}
                  for (s, d, h), n in summed.host_daily.items() if n]
    sources = [{"signature_id": s, "source": source, "events": n, "repeats": r}
               for (s, source), (n, r) in summed.sources.items() if n or r]
    for statement, rows, emptied in ((UPSERT_BREAKDOWN, breakdown, "breakdown"),
                                     (UPSERT_HOST_DAILY, host_daily, "host_daily"),
                                     (UPSERT_SOURCES, sources, "sources")):
        if rows:
            connection.execute(statement, rows)
        shrunk = [row for row in rows if row["events"] <= 0]
        if shrunk:
            connection.execute(EMPTIED[emptied], shrunk)
    # A touched signature day is summed anew from its host rows; with a host row counted down,
    # the day itself may have gone.
    days = _by_day(host_daily)
    if days:
        connection.execute(RECOUNT_SIGNATURE_DAY, [{"signature_id": s, "day": d} for s, d in days])
    shrunk_days = [{"signature_id": s, "day": d} for (s, d), deltas_of in days.items() if min(deltas_of) < 0]
    if shrunk_days:
        connection.execute(EMPTIED["signature_daily"], shrunk_days)


def _by_day(host_daily: list[dict[str, Any]]) -> dict[tuple[int, Any], list[int]]:
    """The host rows' deltas per signature day."""
    days: dict[tuple[int, Any], list[int]] = {}
    for row in host_daily:
        days.setdefault((row["signature_id"], row["day"]), []).append(row["events"])
    return days


@contextmanager
def _exclusive(connection: Connection) -> Any:
    """Hold the rollups' lock for the connection's session (PostgreSQL; SQLite: its write lock)."""
    if connection.dialect.name != "postgresql":
        yield
        return
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": LOCK_KEY})
    connection.commit()
    try:
        yield
    finally:
        connection.rollback()
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": LOCK_KEY})
        connection.commit()


@dataclass
class FoldOutcome:
    changes: int = 0
    batches: int = 0
    rebuilt: bool = False


Progress = Callable[[str], None] | None


def fold(database: Database, batch: int = BATCH, progress: Progress = None) -> FoldOutcome:
    """Fold every queued change into the rollups (building them first when a backfill is due)."""
    outcome = FoldOutcome()
    dialect = database.engine.dialect.name
    with database.engine.connect() as connection, _exclusive(connection):
        due = connection.execute(text("SELECT 1 FROM rollup_backfills LIMIT 1")).first()
        connection.rollback()
        if due:
            _rebuild(connection, progress)
            outcome.rebuilt = True
        while True:
            with connection.begin():
                changes = _take_batch(connection, dialect, batch)
                if changes:
                    apply(connection, deltas(changes))
            if not changes:
                return outcome
            outcome.changes += len(changes)
            outcome.batches += 1
            if progress:
                progress(f"folded {outcome.changes} changes")


def rebuild(database: Database, progress: Progress = None) -> None:
    """Compute the rollups from events (repair; erases what archived events left in them)."""
    with database.engine.connect() as connection, _exclusive(connection):
        _rebuild(connection, progress)


def _rebuild_statements(dialect: str) -> dict[str, str]:
    day = DAY[dialect]("e.crashed_at")
    columns = ", ".join(f"{'s.kind' if d == 'kind' else 'e.' + c} AS {d}" for d, c in DIMENSIONS.items())
    selects = " UNION ALL ".join(
        f"SELECT day, '{d}', COALESCE({d}, '{UNKNOWN}'), COUNT(*), COALESCE(SUM(memory_gb), 0), "
        f"COUNT(memory_gb), SUM(repeats) FROM e "
        f"{'WHERE ' + d + ' IS NOT NULL ' if d in ONLY_WHEN_SET else ''}GROUP BY day, 3"
        for d in DIMENSIONS
    )
    return {
        "rollup_breakdown_daily": (
            f"WITH e AS (SELECT {day} AS day, {columns}, e.memory_gb, e.repeats FROM events e "
            f"LEFT JOIN signatures s ON s.id = e.signature_id) "
            f"INSERT INTO rollup_breakdown_daily (day, dimension, value, events, memory_gb, memory_known, "
            f"repeats) {selects}"
        ),
        "rollup_signature_host_daily": (
            f"INSERT INTO rollup_signature_host_daily (signature_id, day, host_id, events) "
            f"SELECT e.signature_id, {day}, e.host_id, COUNT(*) FROM events e "
            f"WHERE e.signature_id IS NOT NULL GROUP BY 1, 2, 3"
        ),
        "rollup_signature_daily": (
            "INSERT INTO rollup_signature_daily (signature_id, day, events, hosts) "
            "SELECT signature_id, day, SUM(events), COUNT(*) FROM rollup_signature_host_daily GROUP BY 1, 2"
        ),
        "rollup_signature_sources": (
            "INSERT INTO rollup_signature_sources (signature_id, source, events, repeats) "
            "SELECT signature_id, first_source, COUNT(*), SUM(repeats) FROM events "
            "WHERE signature_id IS NOT NULL GROUP BY 1, 2"
        ),
    }


def _rebuild(connection: Connection, progress: Progress) -> None:
    """In one snapshot (PostgreSQL: REPEATABLE READ; SQLite: its write lock): rollups from
    events, and the queued changes that snapshot already holds dropped."""
    if connection.dialect.name == "postgresql":
        connection.execution_options(isolation_level="REPEATABLE READ")
    try:
        with connection.begin():
            statements = _rebuild_statements(connection.dialect.name)
            for table in statements:
                connection.execute(text(f"DELETE FROM {table}"))
            for table, sql in statements.items():
                if progress:
                    progress(f"building {table} from events")
                connection.execute(text(sql))
            connection.execute(text("DELETE FROM rollup_changes"))
            connection.execute(text("DELETE FROM rollup_backfills"))
    finally:
        if connection.dialect.name == "postgresql":
            connection.execution_options(isolation_level="READ COMMITTED")
