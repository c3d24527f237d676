"""Archiving old partitions of events and reports to the dump store (PostgreSQL;
docs/partitioning.md, "Archive").

Whole partitions go: an events partition whose newest event was received before the cutoff,
with the reports partitions whose every report belongs to an event archived in the same run.
A partition that anything else still points at (a capture, a slot, a console trim, an RCA's
evidence) is skipped and reported, so no stored reference dangles. Each partition is written
as gzipped JSON Lines with a manifest, read back and checked (rows, sha256) before it is
detached (CONCURRENTLY) and dropped. The signature counters keep the archived events in a
shard of their own (ARCHIVED_SHARD) that recounts add to and never rebuild.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text

from registry.core.signatures import ARCHIVED_SHARD, COUNTER_SHARDS
from registry.partitions import PARTITIONED, Partition, in_short_transaction, next_id, partitions
from registry.storage.store import DumpStore

FORMAT = "crashreg-archive/1"
PREFIX = "archive"
KEY_TABLE = {"events": "event_keys", "reports": "report_keys"}
KEY_BATCH = 10_000
# The column a manifest's crashed_at range is read from (reports have none: NULL, no range).
CRASHED_AT = {"events": "crashed_at", "reports": "NULL"}
Progress = Callable[[str], Any]
LOWEST_ID = -(2**63)  # where the first partition (from MINVALUE) starts


@dataclass(frozen=True)
class Manifest:
    """What an archived partition holds: enough to check and load it without the registry."""

    format: str
    table: str
    partition: str
    id_range: tuple[int | None, int]
    received_at: tuple[str | None, str | None]
    crashed_at: tuple[str | None, str | None]
    rows: int
    sha256: str
    file: str
    columns: list[str]
    migration: str


@dataclass
class Plan:
    archive: list[Partition]
    skipped: dict[str, str]  # partition -> why it stays


def _lower(partition: Partition) -> int:
    return LOWEST_ID if partition.lower is None else partition.lower


def _old(table_partitions: list[Partition], upcoming: int) -> list[Partition]:
    """The partitions below the one the next id falls in (it, and those ahead, always stay)."""
    holding = next((p for p in table_partitions
                    if (p.lower is None or p.lower <= upcoming) and upcoming < p.upper), None)
    limit = upcoming if holding is None else holding.lower
    return [] if limit is None else [p for p in table_partitions if p.upper <= limit]


def _referencing(connection: Connection, table: str) -> list[tuple[str, str]]:
    """(table, column) of each single-column foreign key into `table` from outside the partitioning."""
    return [(t, c) for t, c in connection.execute(text(
        "SELECT DISTINCT c.conrelid::regclass::text, a.attname FROM pg_constraint c "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
        "WHERE c.contype = 'f' AND c.confrelid = CAST(:t AS regclass) AND c.conparentid = 0 "
        "AND array_length(c.conkey, 1) = 1"), {"t": table}).all() if t not in PARTITIONED]


def _pinned_by(connection: Connection, partition: Partition) -> str | None:
    """Why a partition must stay: the first outside row that points into it (None: nothing)."""
    lower = _lower(partition)
    bounds = {"lo": lower, "hi": partition.upper}
    for table, column in _referencing(connection, partition.table):
        if connection.execute(text(
                f"SELECT 1 FROM {table} WHERE {column} >= :lo AND {column} < :hi LIMIT 1"), bounds).first():
            return f"{table}.{column} points into it"
    if partition.table == "events" and connection.execute(text(
            "SELECT 1 FROM rcas, jsonb_array_elements(CAST(evidence AS jsonb)) AS e "
            "WHERE e->>'type' = 'event' AND (e->>'event_id')::bigint >= :lo "
            "AND (e->>'event_id')::bigint < :hi LIMIT 1"), bounds).first():
        return "an RCA's evidence names one of its events"
    return None


def plan(connection: Connection, before: datetime) -> Plan:
    """The partitions an archive at `before` takes, and the old ones it leaves (and why)."""
    found = partitions(connection)
    by_table = {t: [p for p in found if p.table == t] for t in PARTITIONED}
    old = {t: _old(by_table[t], next_id(connection, t)) for t in PARTITIONED}
    skipped: dict[str, str] = {}
    events: list[Partition] = []
    for partition in old["events"]:
        newest = connection.execute(text(f"SELECT max(received_at) FROM {partition.name}")).scalar()
        if newest is None or newest >= before:
            continue  # empty, or not old enough: not an archive's business yet
        why = _pinned_by(connection, partition)
        if why:
            skipped[partition.name] = why
        else:
            events.append(partition)
    reports = [p for p in old["reports"] if p.name not in skipped]
    while True:  # a reports partition goes with its events only; an events partition with all its reports
        taken = {p.name for p in events}
        owners = {p.name: _event_partitions(connection, p, by_table["events"]) for p in reports}
        for name, owning in owners.items():
            held_back = sorted((owning - taken) & skipped.keys())  # not those merely not due yet
            if held_back:
                skipped.setdefault(name, f"reports of events in {', '.join(held_back)}, which stay")
        reports = [p for p in reports if not owners[p.name] - taken]
        for partition in reports:  # due with its events: unless something points into it
            why = _pinned_by(connection, partition)
            if why:
                skipped[partition.name] = why
        reports = [p for p in reports if p.name not in skipped]
        going = {p.name for p in reports}
        kept_reports = [p for p in old["reports"] if p.name not in going] + [
            p for p in by_table["reports"] if p not in old["reports"]]
        held = {e for r in kept_reports for e in _event_partitions(connection, r, events)}
        if not held:
            break
        for name in held:
            skipped[name] = "some of its reports lie in a reports partition that stays"
        events = [p for p in events if p.name not in held]
    return Plan(archive=reports + events, skipped=skipped)


def _event_partitions(connection: Connection, reports: Partition, events: list[Partition]) -> set[str]:
    """The events partitions (of `events`) the reports in `reports` point into."""
    lower = _lower(reports)
    ids = connection.execute(text(
        "SELECT min(event_id), max(event_id) FROM reports WHERE id >= :lo AND id < :hi"),
        {"lo": lower, "hi": reports.upper}).one()
    if ids[0] is None:
        return set()
    return {e.name for e in events
            if (e.lower is None or e.lower <= ids[1]) and ids[0] < e.upper and connection.execute(text(
                f"SELECT 1 FROM reports WHERE id >= :lo AND id < :hi AND event_id IN "
                f"(SELECT id FROM {e.name}) LIMIT 1"), {"lo": lower, "hi": reports.upper}).first()}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _range(connection: Connection, name: str, column: str) -> tuple[str | None, str | None]:
    low, high = connection.execute(text(f"SELECT min({column}), max({column}) FROM {name}")).one()
    return (low.isoformat() if low else None, high.isoformat() if high else None)


def write(engine: Engine, store: DumpStore, partition: Partition, workdir: Path) -> Manifest:
    """The partition as gzipped JSON Lines in the store, with its manifest, read back and checked
    (read in one snapshot)."""
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            manifest = _write(connection, store, partition, workdir)
    verify(store, manifest, workdir)
    return manifest


def _write(connection: Connection, store: DumpStore, partition: Partition, workdir: Path) -> Manifest:
    file_key = f"{PREFIX}/{partition.table}/{partition.name}.jsonl.gz"
    local = workdir / f"{partition.name}.jsonl.gz"
    rows = 0
    with gzip.open(local, "wt", encoding="utf-8") as out:
        result = connection.execution_options(yield_per=5000).execute(text(
            f"SELECT row_to_json(t)::text FROM {partition.name} AS t ORDER BY id"))
        for (line,) in result:
            out.write(line + "\n")
            rows += 1
    columns = list(connection.execute(text(f"SELECT * FROM {partition.name} LIMIT 0")).keys())
    manifest = Manifest(
        format=FORMAT, table=partition.table, partition=partition.name,
        id_range=(partition.lower, partition.upper),
        received_at=_range(connection, partition.name, "received_at"),
        crashed_at=_range(connection, partition.name, CRASHED_AT[partition.table]),
        rows=rows, sha256=_sha256(local), file=file_key, columns=columns,
        migration=str(connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()),
    )
    store.put_file(file_key, local)
    manifest_path = workdir / f"{partition.name}.manifest.json"
    manifest_path.write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    store.put_file(manifest_key(partition.table, partition.name), manifest_path)
    return manifest


def manifest_key(table: str, name: str) -> str:
    return f"{PREFIX}/{table}/{name}.manifest.json"


def verify(store: DumpStore, manifest: Manifest, workdir: Path) -> None:
    """Read the stored file back: its sha256 and its row count must be the manifest's."""
    back = workdir / f"{manifest.partition}.readback.jsonl.gz"
    store.fetch_file(manifest.file, back)
    with gzip.open(back, "rt", encoding="utf-8") as lines:
        count = sum(1 for _ in lines)
    digest = _sha256(back)
    back.unlink()
    if digest != manifest.sha256 or count != manifest.rows:
        raise RuntimeError(f"{manifest.file} read back as {count} rows, sha256 {digest}: "
                           f"not the {manifest.rows} rows, {manifest.sha256} written; nothing dropped")


def _move_counts(connection: Connection, name: str) -> None:
    """The archived events leave their counter shards for ARCHIVED_SHARD: every count stays,
    and a recount (which rebuilds the other shards from events) adds them."""
    connection.execute(text(
        f"UPDATE signature_counters c SET events = c.events - a.n FROM ("
        f"SELECT signature_id, id % {COUNTER_SHARDS} AS shard, count(*) AS n FROM {name} "
        f"WHERE signature_id IS NOT NULL GROUP BY 1, 2) a "
        f"WHERE c.signature_id = a.signature_id AND c.shard = a.shard"))
    connection.execute(text(
        f"INSERT INTO signature_counters (signature_id, shard, events, last_seen) "
        f"SELECT signature_id, {ARCHIVED_SHARD}, count(*), max(crashed_at) FROM {name} "
        f"WHERE signature_id IS NOT NULL GROUP BY 1 "
        f"ON CONFLICT (signature_id, shard) DO UPDATE "
        f"SET events = signature_counters.events + EXCLUDED.events, "
        f"last_seen = greatest(signature_counters.last_seen, EXCLUDED.last_seen)"))


def drop(connection: Connection, partition: Partition, progress: Progress) -> None:
    """Detach (CONCURRENTLY: reads and writes go on), then in one transaction move the counts
    and drop the table; then the natural keys of its rows, in batches. `connection`: autocommit.
    A run stopped half way is finished: a detach left pending is finalized, a table already
    detached is not detached again."""
    pending = connection.execute(text(
        "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = CAST(:name AS regclass)"),
        {"name": partition.name}).scalar()
    if pending is not None:
        how = "FINALIZE" if pending else "CONCURRENTLY"
        connection.execute(text(f"ALTER TABLE {partition.table} DETACH PARTITION {partition.name} {how}"))

    def counts_and_table(c: Connection) -> None:
        if partition.table == "events":
            _move_counts(c, partition.name)
        c.execute(text(f"DROP TABLE {partition.name}"))

    in_short_transaction(connection, counts_and_table, progress)
    key_table, column = KEY_TABLE[partition.table], "event_id" if partition.table == "events" else "id"
    lower = _lower(partition)
    while connection.execute(text(
            f"DELETE FROM {key_table} WHERE ctid IN (SELECT ctid FROM {key_table} "
            f"WHERE {column} >= :lo AND {column} < :hi LIMIT {KEY_BATCH})"),
            {"lo": lower, "hi": partition.upper}).rowcount:
        progress(f"{partition.name}: natural keys removed (batch of up to {KEY_BATCH})")


def _detached(connection: Connection) -> list[str]:
    """Partitions' tables no longer attached: an archive stopped between detach and drop."""
    return list(connection.execute(text(
        "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' "
        "AND c.relnamespace = 'public'::regnamespace AND c.relname ~ '^(events|reports)_p[0-9]{4,}$' "
        "AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid) ORDER BY c.relname DESC"
    )).scalars())  # reports_ before events_: their rows pointed at the events


def _finish(connection: Connection, store: DumpStore, workdir: Path, progress: Progress) -> list[Partition]:
    """Finish the partitions an earlier run detached, once their archive checks out; a detached
    table with no archive is not ours and is left alone."""
    finished = []
    for name in _detached(connection):
        table = name.rsplit("_p", 1)[0]
        key = manifest_key(table, name)
        if store.head(key) is None:
            progress(f"{name}: a detached table with no archive in the store: left alone")
            continue
        store.fetch_file(key, workdir / f"{name}.manifest.json")
        manifest = Manifest(**json.loads((workdir / f"{name}.manifest.json").read_text()))
        verify(store, manifest, workdir)
        partition = Partition(table, name, manifest.id_range[0], manifest.id_range[1])
        drop(connection, partition, progress)
        progress(f"{name}: archived earlier, detached; now dropped")
        finished.append(partition)
    return finished


def archive(engine: Engine, store: DumpStore, before: datetime, dry_run: bool = False,
            progress: Progress = lambda line: None) -> Plan:
    """Archive the partitions `plan` picks (nothing but the plan when `dry_run`)."""
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        if dry_run:
            return plan(connection, before)
        with tempfile.TemporaryDirectory(prefix="crashreg-archive-") as workdir:
            finished = _finish(connection, store, Path(workdir), progress)  # before the plan: their keys
            chosen = plan(connection, before)
            for partition in chosen.archive:  # reports first: their keys point at the events
                manifest = write(engine, store, partition, Path(workdir))
                where = store.uri(manifest.file)
                progress(f"{partition.name}: {manifest.rows} rows written to {where}, verified")
                drop(connection, partition, progress)
                progress(f"{partition.name}: detached and dropped")
    return Plan(archive=finished + chosen.archive, skipped=chosen.skipped)


def restore(engine: Engine, store: DumpStore, manifest_key_: str, table: str) -> int:
    """Load an archived partition into the side table `table` (the columns of its parent, no
    keys, triggers or references: for reading); its row count. ValueError: no such manifest,
    or the table exists."""
    if store.head(manifest_key_) is None:
        raise ValueError(f"no archive manifest at {store.uri(manifest_key_)}")
    with engine.connect() as connection:
        if connection.execute(text("SELECT to_regclass(:t)"), {"t": table}).scalar() is not None:
            raise ValueError(f"table {table} exists: restore into a new one")
    with tempfile.TemporaryDirectory(prefix="crashreg-restore-") as workdir:
        manifest_path = Path(workdir) / "manifest.json"
        store.fetch_file(manifest_key_, manifest_path)
        manifest = Manifest(**json.loads(manifest_path.read_text()))
        verify(store, manifest, Path(workdir))
        local = Path(workdir) / "rows.jsonl.gz"
        store.fetch_file(manifest.file, local)
        with engine.begin() as connection:
            connection.execute(text(f"CREATE TABLE {table} (LIKE {manifest.table} INCLUDING DEFAULTS)"))
            with gzip.open(local, "rt", encoding="utf-8") as lines:
                batch: list[dict[str, str]] = []
                for line in lines:
                    batch.append({"row": line})
                    if len(batch) == KEY_BATCH:
                        _load(connection, table, manifest.table, batch)
                        batch = []
                _load(connection, table, manifest.table, batch)
        return manifest.rows


def _load(connection: Connection, table: str, parent: str, batch: list[dict[str, str]]) -> None:
    if batch:
        connection.execute(text(
            f"INSERT INTO {table} SELECT * FROM json_populate_record(NULL::{parent}, CAST(:row AS json))"),
            batch)
