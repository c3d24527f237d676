"""PostgreSQL's partitions of the tables that grow without bound, `events` and `reports`: ranges
of `id` of a fixed width, kept ahead of the ids the sequences hand out (docs/partitioning.md).

Ids are handed out in arrival order, so each partition holds a span of arrival time. An insert
whose id falls past the last partition fails, so `ensure_ahead` keeps AHEAD empty partitions
above the next id (the scheduler's `partitions` job, `crashreg db partitions --ensure`, and the
migration that partitions the tables). A new partition is made as a table of its own and then
attached, which locks the parent SHARE UPDATE EXCLUSIVE (reads and writes go on) instead of the
ACCESS EXCLUSIVE that CREATE TABLE ... PARTITION OF takes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from registry.db import LOCK_NOT_AVAILABLE

PARTITIONED = ("events", "reports")
AHEAD = 2  # empty partitions kept above each table's next id
# The partitions' names: the table's, then the partition's lower bound in widths.
PARTITION_NAME = re.compile(r"(?:events|reports)_p\d{4,}")
# Tables the partitioning migration makes besides the partitions: the natural keys.
KEY_TABLES = ("event_keys", "report_keys")
RANGE = re.compile(r"FOR VALUES FROM \((MINVALUE|-?\d+)\) TO \((-?\d+)\)")
# A maintenance step's locks: wait this long at most (the writers queued behind a waiting lock
# wait with it), then give the lock up and try again after RETRY_PAUSE_S. Shorter than
# PostgreSQL's deadlock_timeout (1 s): a writer caught in a lock cycle with the step (holding
# reports, waiting for events) never waits long enough to be the deadlock's victim; the step is.
LOCK_TIMEOUT = "500ms"
LOCK_TRIES = 30
RETRY_PAUSE_S = 0.5
DEADLOCK = "40P01"

T = TypeVar("T")


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    lower: int | None  # None: MINVALUE (the table the rows were in before it was partitioned)
    upper: int


def is_partitioning_table(name: str) -> bool:
    """A partition or a key table: a table of the partitioning, with no model of its own."""
    return name in KEY_TABLES or PARTITION_NAME.fullmatch(name) is not None


def partition_name(table: str, lower: int, width: int) -> str:
    return f"{table}_p{lower // width:04d}"


def partitions(connection: Connection) -> list[Partition]:
    """Every partition of the partitioned tables, in id order per table ([] on SQLite, or on
    PostgreSQL before the tables are partitioned)."""
    if connection.dialect.name != "postgresql":
        return []
    rows = connection.execute(text(
        "SELECT parent.relname, child.relname, pg_get_expr(child.relpartbound, child.oid) "
        "FROM pg_inherits i JOIN pg_class parent ON parent.oid = i.inhparent "
        "JOIN pg_class child ON child.oid = i.inhrelid "
        "WHERE parent.relname = ANY(:tables) AND parent.relnamespace = 'public'::regnamespace "
        "AND parent.relkind = 'p'"
    ), {"tables": list(PARTITIONED)}).all()
    found = []
    for table, name, bound in rows:
        match = RANGE.search(bound)
        if match is None:  # a DEFAULT partition is never made here
            continue
        lower = None if match[1] == "MINVALUE" else int(match[1])
        found.append(Partition(table, name, lower, int(match[2])))
    return sorted(found, key=lambda p: (p.table, p.lower if p.lower is not None else -(2**63)))


def next_id(connection: Connection, table: str) -> int:
    """The id the table's sequence hands out next."""
    return int(connection.execute(text(
        f"SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END "
        f"FROM {sequence_of(connection, table)}"
    )).scalar_one())


def sequence_of(connection: Connection, table: str) -> str:
    return str(connection.execute(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table}).scalar_one())


def ahead_of(table_partitions: list[Partition], upcoming: int) -> int:
    """How many of a table's partitions lie wholly above its next id (empty, ready)."""
    return sum(1 for p in table_partitions if p.lower is not None and p.lower > upcoming)


def missing_ranges(
    table_partitions: list[Partition], upcoming: int, width: int, ahead: int = AHEAD
) -> list[tuple[int, int]]:
    """The [lower, upper) ranges `width` ids wide to add, from the top of the last partition
    on, so that the next id `upcoming` has a partition and `ahead` more lie above it."""
    have = ahead_of(table_partitions, upcoming)
    lower, ranges = table_partitions[-1].upper, []
    while lower <= upcoming or have < ahead:
        ranges.append((lower, lower + width))
        have += lower > upcoming
        lower += width
    return ranges


def width_of(table_partitions: list[Partition], first: int | None = None) -> int:
    """The newest fixed-width partition's width; `first` when there is none yet (the
    migration's first partitions ahead)."""
    fixed = [p for p in table_partitions if p.lower is not None]
    if not fixed:
        if first is None:
            raise ValueError(f"{table_partitions[0].table} has no partition of a fixed width to follow")
        return first
    return fixed[-1].upper - (fixed[-1].lower or 0)


def attach_partition(connection: Connection, table: str, lower: int, upper: int, width: int) -> str:
    """A new empty partition [lower, upper) of `table`: made as a table of its own (its
    columns, defaults and NOT NULLs) with the parent's indexes named `<partition>_<index>` (as
    the first partition's are), then attached, which takes those indexes and clones the
    parent's keys and triggers."""
    name = partition_name(table, lower, width)
    connection.execute(text(
        f"CREATE TABLE IF NOT EXISTS {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING STORAGE "
        f"INCLUDING COMPRESSION, CONSTRAINT {name}_bounds CHECK (id >= {lower} AND id < {upper}))"
    ))
    for index, definition in connection.execute(text(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = CAST(:t AS regclass) AND NOT x.indisprimary"), {"t": table}).all():
        own = f"INDEX IF NOT EXISTS {name}_{index} ON public.{name} "
        connection.execute(text(definition.replace(f"INDEX {index} ON ONLY public.{table} ", own, 1)))
    connection.execute(text(
        f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ({lower}) TO ({upper})"))
    connection.execute(text(f"ALTER TABLE {name} DROP CONSTRAINT {name}_bounds"))
    return name


def in_short_transaction(connection: Connection, step: Callable[[Connection], T],
                         progress: Callable[[str], Any] = lambda line: None) -> T:
    """Run `step` in a transaction of its own on an autocommit connection, its locks waited
    for LOCK_TIMEOUT at most: on a timeout it rolls back (the writers queued behind it go on)
    and is tried again, LOCK_TRIES times."""
    for attempt in range(1, LOCK_TRIES + 1):
        connection.exec_driver_sql("BEGIN")
        try:
            connection.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            result = step(connection)
        except DBAPIError as error:
            connection.exec_driver_sql("ROLLBACK")
            retried = getattr(error.orig, "sqlstate", None) in (LOCK_NOT_AVAILABLE, DEADLOCK)
            if not retried or attempt == LOCK_TRIES:
                raise
            progress(f"a lock was not free within {LOCK_TIMEOUT} (try {attempt}): trying again")
            time.sleep(RETRY_PAUSE_S)
            continue
        except BaseException:
            connection.exec_driver_sql("ROLLBACK")
            raise
        connection.exec_driver_sql("COMMIT")
        return result
    raise AssertionError("unreachable")


def ensure_ahead(
    connection: Connection,
    ahead: int = AHEAD,
    progress: Callable[[str], Any] = lambda line: None,
    first_width: int | None = None,
) -> list[str]:
    """Add the partitions missing for AHEAD empty ones above each table's next id; their names.
    `connection` is in autocommit mode: each partition is attached in a short transaction.
    `first_width`: the width of a table's first fixed-width partitions (the migration's)."""
    made = []
    for table in PARTITIONED:
        mine = [p for p in partitions(connection) if p.table == table]
        if not mine:
            continue
        width = width_of(mine, first_width)
        for lower, upper in missing_ranges(mine, next_id(connection, table), width, ahead):
            attach = partial(attach_partition, table=table, lower=lower, upper=upper, width=width)
            made.append(in_short_transaction(connection, attach, progress))
            progress(f"{table}: partition {made[-1]} for ids [{lower}, {upper})")
    return made


# What PostgreSQL says of a row whose id lies past the last partition (check_violation).
NO_PARTITION = "no partition of relation"


def is_missing_partition(error: DBAPIError) -> bool:
    """Did `error` refuse a row because no partition takes its id (the partitions job has not
    run for a while)?"""
    return getattr(error.orig, "sqlstate", None) == "23514" and NO_PARTITION in str(error.orig)


@dataclass(frozen=True)
class Room:
    """A partitioned table's room above its next id: empty partitions (`ahead`), and the ids its
    partitions still take (`ids_left`; 0 or less: the next insert has no partition)."""

    ahead: int
    ids_left: int


def room(connection: Connection, found: list[Partition] | None = None) -> dict[str, Room]:
    """Per partitioned table ({} when not partitioned), from one read of the partitions
    (`found`, when the caller has read them) and each sequence."""
    found = partitions(connection) if found is None else found
    rooms = {}
    for table in PARTITIONED:
        mine = [p for p in found if p.table == table]
        if mine:
            upcoming = next_id(connection, table)
            rooms[table] = Room(ahead_of(mine, upcoming), max(p.upper for p in mine) - upcoming)
    return rooms


def partitions_ahead(connection: Connection) -> dict[str, int]:
    """Per partitioned table, its empty partitions above the next id ({} when not partitioned)."""
    return {table: r.ahead for table, r in room(connection).items()}


def maintain(engine: Engine, progress: Callable[[str], Any] = lambda line: None) -> list[str]:
    """`ensure_ahead` on its own autocommit connection (nothing on SQLite or unpartitioned)."""
    if engine.dialect.name != "postgresql":
        return []
    with engine.connect() as connection:
        return ensure_ahead(connection.execution_options(isolation_level="AUTOCOMMIT"), AHEAD, progress)


def partition_metrics(session: Session) -> Iterable[Metric]:
    """crashreg_partitions_ahead{table}: empty partitions above the next id (alert below 1:
    the partitions job is not keeping up; docs/partitioning.md); crashreg_partition_ids_left{table}:
    the ids the partitions still take (0 or less: the next report waits for ingest to make one)."""
    ahead = GaugeMetricFamily(
        "crashreg_partitions_ahead",
        "Empty partitions of a partitioned table above its next id (kept at 2 by the partitions job)",
        labels=["table"],
    )
    left = GaugeMetricFamily(
        "crashreg_partition_ids_left",
        "Ids a partitioned table's partitions still take above its next id (<= 0: none left)",
        labels=["table"],
    )
    for table, r in room(session.connection()).items():
        ahead.add_metric([table], r.ahead)
        left.add_metric([table], r.ids_left)
    return [ahead, left]
