"""Folding the queues of changes into the rollups, and building them from the database.

`fold` is what runs in normal operation (the scheduler's rollups job): for each queue (event
changes, capture changes, host changes) it takes a batch (deleting exactly the rows it read, so
a change whose transaction commits late, with a lower id, is simply taken by a later batch),
adds their deltas to the rollups, and repeats until the queue is empty. It never reads
`events`: counts survive events being archived.

`rebuild` (a migration's backfill, `crashreg rollups rebuild` for repair) computes a group of
rollups from the database in one snapshot, after folding the queued changes that snapshot
holds: those are counted by the build in the groups built and folded into the others, so
changes committed meanwhile are folded on top, neither lost nor counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, text

from registry.db import Database

from . import captures_fleet as others
from . import kernels
from .deltas import add_deltas
from .dialect import DAY

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

CHANGE_COLUMNS = ("delta", "signature_id", "kind", "host_id", "region", "kernel_version", "capture_action",
                  "regression", "bios_version", "sku", "first_source", "memory_gb", "repeats")


@dataclass
class Deltas:
    """A batch of changes summed per rollup key: what to add to each rollup."""

    # (day, dimension, value) -> events, memory GB, events with memory known, repeats
    breakdown: dict[tuple[Any, str, str], list[int]] = field(default_factory=dict)
    host_daily: dict[tuple[int, Any, int], int] = field(default_factory=dict)
    sources: dict[tuple[int, str], list[int]] = field(default_factory=dict)  # events, repeats
    # the fleet: (host, day) -> crashes and first sightings; day -> retirements
    host_marks: dict[tuple[int, Any], int] = field(default_factory=dict)
    retired: dict[Any, int] = field(default_factory=dict)
    captures: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)  # key -> CAPTURE_COUNTS
    kernel_hosts: set[int] = field(default_factory=set)  # hosts whose kernel intervals to compute again
    changes: int = 0  # how many queued changes were summed


def _add(totals: dict[Any, list[int]], key: Any, values: Sequence[int]) -> None:
    current = totals.setdefault(key, [0] * len(values))
    for index, value in enumerate(values):
        current[index] += value


def deltas(changes: Iterable[dict[str, Any]], summed: Deltas | None = None) -> Deltas:
    """Sum queued event changes (each a mapping of CHANGE_COLUMNS and `day`) per rollup key."""
    summed = summed or Deltas()
    for change in changes:
        delta, day, memory = change["delta"], change["day"], change["memory_gb"]
        marked = (change["host_id"], day)
        summed.host_marks[marked] = summed.host_marks.get(marked, 0) + delta
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


def _events_returning(dialect: str) -> str:
    return ", ".join((*CHANGE_COLUMNS, f"{DAY[dialect]('crashed_at')} AS day"))


def _add_captures(changes: list[dict[str, Any]], summed: Deltas) -> None:
    others.capture_deltas(changes, summed.captures)


def _add_hosts(changes: list[dict[str, Any]], summed: Deltas) -> None:
    """A host came, went, was retired or moved its first sighting: its fleet marks, and its
    kernel intervals computed again (they run from its first sighting to its retirement)."""
    others.host_deltas(changes, summed.host_marks, summed.retired)
    summed.kernel_hosts.update(change["host_id"] for change in changes)


def _add_kernel_hosts(changes: list[dict[str, Any]], summed: Deltas) -> None:
    summed.kernel_hosts.update(change["host_id"] for change in changes)


# queue -> (what a batch returns, how its rows add to the deltas)
QUEUES: dict[str, tuple[Callable[[str], str], Callable[[list[dict[str, Any]], Deltas], Any]]] = {
    "rollup_changes": (_events_returning, deltas),
    "rollup_capture_changes": (others.capture_returning, _add_captures),
    "rollup_host_changes": (others.host_returning, _add_hosts),
    "rollup_kernel_hosts": (lambda _dialect: "host_id", _add_kernel_hosts),
}
# queue -> the groups of rollups (`rollup_backfills.rollups`) its changes add to (a host's first
# day in the fleet moving moves its kernel intervals' start)
FEEDS = {"rollup_changes": {"events", "fleet", "kernels"}, "rollup_capture_changes": {"captures"},
         "rollup_host_changes": {"fleet", "kernels"}, "rollup_kernel_hosts": {"kernels"}}
# group -> the groups computed from its rollups, built again with it
BUILT_WITH = {"fleet": {"kernels"}}


def _take_batch(connection: Connection, queue: str, limit: int) -> Deltas | None:
    """Delete the `limit` oldest queued changes of `queue` and return their deltas (exactly
    the rows deleted); None when it was empty."""
    returning, add = QUEUES[queue]
    rows = [dict(row) for row in connection.execute(
        text(f"DELETE FROM {queue} WHERE id IN (SELECT id FROM {queue} ORDER BY id LIMIT :limit) "
             f"RETURNING {returning(connection.dialect.name)}"),
        {"limit": limit},
    ).mappings()]
    if not rows:
        return None
    summed = Deltas()
    add(rows, summed)
    summed.changes = len(rows)
    return summed


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
        add_deltas(connection, statement, EMPTIED[emptied], rows, ("events",))
    others.apply_captures(connection, summed.captures)
    moved = others.apply_fleet(connection, summed.host_marks, summed.retired)
    if summed.kernel_hosts or moved:
        kernels.recount_hosts(connection, summed.kernel_hosts | moved)
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
    with database.engine.connect() as connection, _exclusive(connection):
        due = set(connection.execute(text("SELECT rollups FROM rollup_backfills")).scalars())
        connection.rollback()
        if due:
            _rebuild(connection, due, progress)
            outcome.rebuilt = True
        for queue in QUEUES:
            while True:
                with connection.begin():
                    summed = _take_batch(connection, queue, batch)
                    if summed:
                        apply(connection, summed)
                if not summed:
                    break
                outcome.changes += summed.changes
                outcome.batches += 1
                if progress:
                    progress(f"folded {outcome.changes} changes")
        return outcome


def rebuild(database: Database, progress: Progress = None) -> None:
    """Compute every rollup from the database (repair; erases what archived events left in them)."""
    with database.engine.connect() as connection, _exclusive(connection):
        _rebuild(connection, GROUPS, progress)


def _events_statements(dialect: str) -> dict[str, str]:
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


# The kernels' tables are emptied and every host queued: the rebuild then folds them as the
# rollups job does (one computation of a host's intervals, registry.rollups.kernels).
KERNEL_STATEMENTS = {"rollup_kernel_intervals": "", "rollup_kernel_daily": "", "rollup_kernel_gaps": "",
                     "rollup_kernel_hosts": "INSERT INTO rollup_kernel_hosts (host_id) SELECT id FROM hosts"}


def _build_statements(dialect: str) -> dict[str, dict[str, str]]:
    """Per group of rollups (what `rollup_backfills.rollups` names), its tables' builds."""
    return {"events": _events_statements(dialect), **others.build_statements(dialect),
            "kernels": KERNEL_STATEMENTS}


GROUPS = frozenset(_build_statements("sqlite"))


def _rebuild(connection: Connection, groups: Collection[str], progress: Progress) -> None:
    """In one snapshot (PostgreSQL: REPEATABLE READ; SQLite: its write lock): the queued
    changes that snapshot holds taken (folded, BATCH at a time, where they feed a rollup not
    built here; dropped where the build counts them anyway), then each group's tables built
    from the database, then what the builds queued folded (the kernels' hosts)."""
    groups = set(groups).union(*(BUILT_WITH.get(group, set()) for group in groups))
    if connection.dialect.name == "postgresql":
        connection.execution_options(isolation_level="REPEATABLE READ")
    try:
        with connection.begin():
            for queue in QUEUES:
                if FEEDS[queue] <= set(groups):
                    if progress:
                        progress(f"dropping the changes queued in {queue} (the build counts them)")
                    connection.execute(text(f"DELETE FROM {queue}"))
                    continue
                while summed := _take_batch(connection, queue, BATCH):
                    apply(connection, summed)
            built = _build_statements(connection.dialect.name)
            statements = {table: sql for group in sorted(groups) for table, sql in built[group].items()}
            for table in statements:
                connection.execute(text(f"DELETE FROM {table}"))
            for table, sql in statements.items():
                if not sql:
                    continue  # emptied only
                if progress:
                    progress(f"building {table}")
                connection.execute(text(sql))
            for queue in QUEUES:
                while summed := _take_batch(connection, queue, BATCH):
                    apply(connection, summed)
            connection.execute(text("DELETE FROM rollup_backfills WHERE rollups IN :groups").bindparams(
                bindparam("groups", expanding=True)), {"groups": sorted(groups)})
    finally:
        if connection.dialect.name == "postgresql":
            connection.execution_options(isolation_level="READ COMMITTED")
