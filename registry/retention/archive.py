"""Archiving old partitions of events and reports to the dump store (PostgreSQL;
docs/partitioning.md, "Archive").

Whole partitions go: an events partition whose newest event was received before the cutoff,
with the reports partitions whose every report belongs to an event archived in the same run.
The rows of other tables that are only history of a partition's rows (DEPENDENTS: its reports'
console trims, the capture slots its events held once the capture window is over, its events'
finished captures with their dumps' rows, downloads and pins) go with it, into files of their
own beside its file. A partition that anything else still points at (a capture still in use, a
slot that still counts, an RCA's evidence) is skipped and reported, so no stored reference
dangles. What history figures count of the rows it takes (deleted dumps, trimmed console logs)
it tallies as it deletes them (TALLIES), so those figures stay as they were. Each partition is
written as gzipped JSON Lines with a manifest, read back and checked (rows, sha256) before it is
detached (CONCURRENTLY) and dropped. The signature counters keep the archived events in a shard
of their own (ARCHIVED_SHARD) that recounts add to and never rebuild. The natural keys of the
archived rows stay (event_keys, report_keys): a resend of an archived report is recognised
(registry.ingest.service.archived_answer).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from registry.core.signatures import ARCHIVED_SHARD, COUNTER_SHARDS
from registry.partitions import PARTITIONED, Partition, in_short_transaction, next_id, partitions
from registry.storage.store import DumpStore

FORMAT = "crashreg-archive/1"
PREFIX = "archive"
KEY_BATCH = 10_000
# The columns a manifest's received_at and crashed_at ranges are read from (NULL: no range).
RECEIVED_AT = {"events": "received_at", "reports": "received_at"}
CRASHED_AT = {"events": "crashed_at"}


@dataclass(frozen=True)
class Dependent:
    """Rows of `table` whose `column` points into a partition of a partitioned table (or, for a
    dependent's `children`, at its parent's single-column key) and that are only history of its
    rows: written to the archive with the partition (their own file and manifest, the
    partition's name under archive/<table>/), deleted before its detach (children first) and
    put back if it stays (parents first). `counts`: why such a row is still in use, and the
    condition that says so (`:since`, the start of the capture window); then it pins the
    partition instead. `noun`: how a reason names the row (none: the reason alone)."""

    table: str
    column: str
    key: tuple[str, ...]  # the row's primary key
    counts: Mapping[str, str] = field(default_factory=dict)
    noun: str | None = None
    children: tuple[Dependent, ...] = ()


# Console trims go with their report (whose log they describe); its event goes in the same run
# (plan), so a trim never pins an events partition. A capture slot or a no-signature slot whose
# holder is archived is the slot's last holder, long over: the slot is free either way (a slot
# never used and one aged out of the window are claimed alike, registry.capture.decide).
SLOT_COUNTS = {"a slot that still counts": "since >= :since"}
# A capture is finished when nothing can change it or needs its dump any more: it is no longer
# under way, no triage of its dump is running, its dump is not in the store (never uploaded, or
# deleted by retention: the row then is history) and no standing pin holds it. Then it, its
# dump's row, the dump's download records and its pins are history of its event and go with it
# (an RCA citing it keeps the partition: RCA_CITES). Until then it pins the event's partition.
CAPTURE_COUNTS = {
    "under way": "status = 'started'",
    "its dump being triaged": "processing_state IN ('pending', 'processing')",
    "its dump in the store": "EXISTS (SELECT 1 FROM dumps d WHERE d.capture_id = captures.id "
                             "AND d.state <> 'deleted')",
    "pinned": "EXISTS (SELECT 1 FROM dump_pins p WHERE p.capture_id = captures.id AND p.unpinned_at IS NULL)",
}
CAPTURES = Dependent("captures", "event_id", ("id",), CAPTURE_COUNTS, "capture", (
    Dependent("dumps", "capture_id", ("id",), children=(Dependent("dump_downloads", "dump_id", ("id",)),)),
    Dependent("dump_pins", "capture_id", ("id",)),
))
DEPENDENTS = {
    "reports": (Dependent("console_trims", "report_id", ("report_id",)),),
    "events": (Dependent("capture_slots", "event_id", ("signature_id", "slot"), SLOT_COUNTS),
               Dependent("no_signature_slots", "event_id", ("budget", "slot"), SLOT_COUNTS),
               CAPTURES),
}


@dataclass(frozen=True)
class Tally:
    """What the archive took of a dependent's rows that history figures count (the dump store's
    deleted dumps, the trimmed console logs: registry.retention.metrics, rpt_dumps, migration
    0049): how many (`rows`) and their bytes (the sum of `size`) of the rows `counted` picks,
    in `table` by their `key` (when retention deleted or trimmed them: one gc run's time, so a
    tally has a row a run, and a panel's time range counts it exactly). Added in the transaction
    that deletes the rows, taken off by the rows a put-back puts back: the figures add it, and
    stay as they were."""

    table: str
    key: str
    counted: str
    rows: str
    size: str

    def _grouped(self, source: str) -> str:
        return (f"SELECT {self.key} AS key, count(*) AS n, sum({self.size}) AS b FROM {source} "
                f"WHERE {self.counted} GROUP BY 1")

    def added(self, source: str) -> str:
        """A CTE adding `source`'s counted rows (the rows a statement deleted)."""
        t, rows = self.table, self.rows
        return (f", tallied AS (INSERT INTO {t} ({self.key}, {rows}, bytes) {self._grouped(source)} "
                f"ON CONFLICT ({self.key}) DO UPDATE SET {rows} = {t}.{rows} + EXCLUDED.{rows}, "
                f"bytes = {t}.bytes + EXCLUDED.bytes)")

    def taken(self, source: str) -> str:
        """A CTE taking off `source`'s counted rows (the rows a statement put back): only what a
        deletion added, so a key the tally has not is left alone."""
        return (f", tallied AS (UPDATE {self.table} AS s SET {self.rows} = s.{self.rows} - g.n, "
                f"bytes = s.bytes - g.b FROM ({self._grouped(source)}) AS g WHERE s.{self.key} = g.key)")


TALLIES = {
    "dumps": Tally("archived_dumps", "deleted_at", "state = 'deleted'", "dumps", "bytes"),
    "console_trims": Tally("archived_console_trims", "trimmed_at", "kept_bytes < whole_bytes", "logs",
                           "whole_bytes - kept_bytes"),
}
# What points into a partitioned table and goes with the other one's partitions: not a pin.
GOES_WITH = {"events": {("console_trims", "event_id")}, "reports": set()}
# What an RCA's evidence names that keeps an events partition (registry.rca.checks reads both).
RCA_CITES = {
    "one of its events": "e->>'type' = 'event' AND (e->>'event_id')::bigint >= :lo "
                         "AND (e->>'event_id')::bigint < :hi",
    "a capture of one of its events": "e->>'type' = 'capture' AND (e->>'capture_id')::bigint IN "
                                      "(SELECT id FROM captures WHERE event_id >= :lo AND event_id < :hi)",
}
# The captures' rollup counts history (migration 0049: its trigger queues nothing while this is
# on): the archive's delete of captures, and their putting back, are not changes of it.
QUIET = "SET LOCAL crashreg.archiving = 'on'"
DEFAULT_CAPTURE_WINDOW = timedelta(days=7)  # Settings.capture_window_days
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
    # For a partition: the manifests of its dependents' files (DEPENDENTS), [] when it has none.
    dependents: list[str] = field(default_factory=list)


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


def _within(child: Dependent, parent: Dependent, where: str) -> str:
    """The condition that picks a child's rows of the parent rows `where` picks."""
    return f"{child.column} IN (SELECT {parent.key[0]} FROM {parent.table} WHERE {where})"


def _tree(table: str) -> list[tuple[Dependent, str]]:
    """The dependents of a partitioned table's partitions, each parent before its children,
    with the condition that picks a partition's rows of it (`:lo`, `:hi`: the partition's ids)."""
    found: list[tuple[Dependent, str]] = []

    def visit(dependent: Dependent, where: str) -> None:
        found.append((dependent, where))
        for child in dependent.children:
            visit(child, _within(child, dependent, where))

    for dependent in DEPENDENTS[table]:
        visit(dependent, f"{dependent.column} >= :lo AND {dependent.column} < :hi")
    return found


def _in_use(connection: Connection, dependent: Dependent, where: str, bounds: dict[str, Any]) -> str | None:
    """Why a partition's rows of a dependent (those `where` picks) must stay: the first that
    still counts, a row of another table pointing at one of them, or the same of a child's."""
    reasons = list(dependent.counts)
    if reasons:
        which = " ".join(f"WHEN {dependent.counts[r]} THEN {n}" for n, r in enumerate(reasons))
        found = connection.execute(text(
            f"SELECT CASE {which} END, {', '.join(dependent.key)} FROM {dependent.table} WHERE {where} AND ("
            f"{' OR '.join(f'({c})' for c in dependent.counts.values())}) LIMIT 1"), bounds).first()
        if found:
            why, key = reasons[found[0]], ", ".join(map(str, found[1:]))
            return why if dependent.noun is None else f"{dependent.noun} {key}: {why}"
    children = {(c.table, c.column) for c in dependent.children}
    for table, column in _referencing(connection, dependent.table):
        if (table, column) not in children and connection.execute(text(
                f"SELECT 1 FROM {table} WHERE {column} IN (SELECT {dependent.key[0]} FROM {dependent.table} "
                f"WHERE {where}) LIMIT 1"), bounds).first():
            return f"{table}.{column} points at one of its {dependent.table}"
    for child in dependent.children:
        if why := _in_use(connection, child, _within(child, dependent, where), bounds):
            return why
    return None


def _pinned_by(connection: Connection, partition: Partition, since: datetime) -> str | None:
    """Why a partition must stay: the first outside row that points into it and does not go with
    it (None: nothing). `since`: the start of the capture window (a slot since then counts)."""
    bounds = {"lo": _lower(partition), "hi": partition.upper, "since": since}
    dependents = {(d.table, d.column): d for d in DEPENDENTS[partition.table]}
    for table, column in _referencing(connection, partition.table):
        if (table, column) in GOES_WITH[partition.table]:
            continue
        where = f"{column} >= :lo AND {column} < :hi"
        dependent = dependents.get((table, column))
        if dependent is not None:
            if why := _in_use(connection, dependent, where, bounds):
                return f"{table}.{column} points into it ({why})"
        elif connection.execute(text(f"SELECT 1 FROM {table} WHERE {where} LIMIT 1"), bounds).first():
            return f"{table}.{column} points into it"
    if partition.table == "events":
        for what, cited in RCA_CITES.items():
            if connection.execute(text(f"SELECT 1 FROM rcas, jsonb_array_elements(CAST(evidence AS jsonb)) "
                                       f"AS e WHERE {cited} LIMIT 1"), bounds).first():
                return f"an RCA's evidence names {what}"
    return None


def plan(connection: Connection, before: datetime,
         capture_window: timedelta = DEFAULT_CAPTURE_WINDOW) -> Plan:
    """The partitions an archive at `before` takes, and the old ones it leaves (and why). A slot
    pointing into a partition pins it while it may still count: since the capture window began."""
    since = connection.execute(text("SELECT now() - :window"), {"window": capture_window}).scalar_one()
    found = partitions(connection)
    by_table = {t: [p for p in found if p.table == t] for t in PARTITIONED}
    old = {t: _old(by_table[t], next_id(connection, t)) for t in PARTITIONED}
    skipped: dict[str, str] = {}
    events: list[Partition] = []
    for partition in old["events"]:
        newest = connection.execute(text(f"SELECT max(received_at) FROM {partition.name}")).scalar()
        if newest is None or newest >= before:
            continue  # empty, or not old enough: not an archive's business yet
        why = _pinned_by(connection, partition, since)
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
            why = _pinned_by(connection, partition, since)
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


def _range(connection: Connection, name: str, column: str | None) -> tuple[str | None, str | None]:
    if column is None:  # a dependent's rows: no range of their own to read
        return None, None
    low, high = connection.execute(text(f"SELECT min({column}), max({column}) FROM {name}")).one()
    return (low.isoformat() if low else None, high.isoformat() if high else None)


def write(engine: Engine, store: DumpStore, partition: Partition, workdir: Path) -> Manifest:
    """The partition as gzipped JSON Lines in the store, with its manifest, and beside it its
    dependents' rows (DEPENDENTS), each read back and checked (read in one snapshot)."""
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            dependents = [_write(connection, store, partition, workdir, d.table, f"{d.table} WHERE {where}",
                                 ", ".join(d.key)) for d, where in _tree(partition.table)]
            manifest = _write(connection, store, partition, workdir, partition.table, partition.name, "id",
                              [manifest_key(d.table, d.partition) for d in dependents])
    for written in (*dependents, manifest):
        verify(store, written, workdir)
    return manifest


def _write(connection: Connection, store: DumpStore, partition: Partition, workdir: Path, table: str,
           source: str, order: str, dependents: list[str] | None = None) -> Manifest:
    """The rows of `source` (a partition, or a dependent table and the condition that picks the
    partition's rows of it) stored under archive/<table>/<partition>, with their manifest."""
    file_key = f"{PREFIX}/{table}/{partition.name}.jsonl.gz"
    local = workdir / f"{table}.{partition.name}.jsonl.gz"
    bounds = {"lo": _lower(partition), "hi": partition.upper}
    rows = 0
    with gzip.open(local, "wt", encoding="utf-8") as out:
        result = connection.execution_options(yield_per=5000).execute(text(
            f"SELECT row_to_json(t)::text FROM (SELECT * FROM {source}) AS t ORDER BY {order}"), bounds)
        for (line,) in result:
            out.write(line + "\n")
            rows += 1
    columns = list(connection.execute(text(f"SELECT * FROM {table} LIMIT 0")).keys())
    name = partition.name if table == partition.table else table
    manifest = Manifest(
        format=FORMAT, table=table, partition=partition.name,
        id_range=(partition.lower, partition.upper),
        received_at=_range(connection, name, RECEIVED_AT.get(table)),
        crashed_at=_range(connection, name, CRASHED_AT.get(table)),
        rows=rows, sha256=_sha256(local), file=file_key, columns=columns,
        migration=str(connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()),
        dependents=dependents or [],
    )
    store.put_file(file_key, local)
    manifest_path = workdir / f"{table}.{partition.name}.manifest.json"
    manifest_path.write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    store.put_file(manifest_key(table, partition.name), manifest_path)
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


def _fetched(store: DumpStore, key: str, workdir: Path) -> Manifest:
    local = workdir / key.replace("/", ".")
    store.fetch_file(key, local)
    return Manifest(**json.loads(local.read_text()))


def _lines(store: DumpStore, manifest: Manifest, workdir: Path) -> Iterator[list[str]]:
    """The rows of an archived file (checked against its manifest), KEY_BATCH at a time."""
    verify(store, manifest, workdir)
    local = workdir / f"{manifest.table}.{manifest.partition}.rows.jsonl.gz"
    store.fetch_file(manifest.file, local)
    with gzip.open(local, "rt", encoding="utf-8") as lines:
        batch: list[str] = []
        for line in lines:
            batch.append(line.rstrip("\n"))
            if len(batch) == KEY_BATCH:
                yield batch
                batch = []
        if batch:
            yield batch
    local.unlink()


def _delete_dependents(connection: Connection, store: DumpStore, partition: Partition,
                       dependents: list[Manifest], workdir: Path, progress: Progress) -> None:
    """Delete, in one short transaction, the dependents' rows as they were archived, children
    before their parents, adding what history figures count of them to their TALLIES; a row
    changed since it was written, or a parent that gained a child since, stops the run with
    nothing deleted."""
    archived = {manifest.table: manifest for manifest in dependents}

    def delete(c: Connection) -> None:
        c.exec_driver_sql(QUIET)
        for dependent, where in reversed(_tree(partition.table)):
            manifest = archived[dependent.table]
            same_key = " AND ".join(f"CAST(t.{k} AS text) = CAST(a.line AS jsonb)->>'{k}'"
                                    for k in dependent.key)
            childless = "".join(f" AND NOT EXISTS (SELECT 1 FROM {child.table} WHERE "
                                f"{child.table}.{child.column} = t.{dependent.key[0]})"
                                for child in dependent.children)
            tallied = TALLIES[dependent.table].added("gone") if dependent.table in TALLIES else ""
            deleted = sum(c.execute(text(
                f"WITH gone AS (DELETE FROM {dependent.table} AS t USING unnest(CAST(:lines AS text[])) AS "
                f"a(line) WHERE {where} AND {same_key} AND to_jsonb(t) = CAST(a.line AS jsonb){childless} "
                f"RETURNING t.*){tallied} SELECT count(*) FROM gone"),
                {"lines": batch, "lo": _lower(partition), "hi": partition.upper}).scalar_one()
                for batch in _lines(store, manifest, workdir))
            if deleted != manifest.rows:
                raise RuntimeError(f"{manifest.table}: {manifest.rows - deleted} of the {manifest.rows} rows "
                                   f"archived with {partition.name} changed since they were written: nothing "
                                   f"dropped; run the archive again")
            progress(f"{partition.name}: {deleted} rows of {manifest.table} archived with it, deleted")
    in_short_transaction(connection, delete, progress)


def _put_back(connection: Connection, store: DumpStore, manifest: Manifest, workdir: Path) -> None:
    """The archived dependents of a partition that stays, back where they were, parents before
    their children, in one transaction (a row there already, or a slot taken since by another
    event, is left as it is: put back twice, a row is there once); their TALLIES lose exactly
    the rows put back."""
    archived = {d.table: d for d in (_fetched(store, key, workdir) for key in manifest.dependents)}

    def load(c: Connection) -> None:
        c.exec_driver_sql(QUIET)
        for dependent, _ in _tree(manifest.table):
            if dependent.table in archived:  # an archive written before it went with its partition has none
                for batch in _lines(store, archived[dependent.table], workdir):
                    _load_back(c, dependent.table, batch)
    in_short_transaction(connection, load)


def drop(connection: Connection, partition: Partition, progress: Progress, store: DumpStore | None = None,
         manifest: Manifest | None = None, workdir: Path | None = None) -> None:
    """Delete its archived dependents (`manifest`'s), detach (CONCURRENTLY: reads and writes go
    on), then in one transaction move the counts and drop the table. `connection`: autocommit.
    A run stopped half way is finished: a detach left pending is finalized, a table already
    detached is not detached again (its dependents went before its detach). A detach refused
    (a row pointing into the partition written meanwhile: a trim, a capture) puts the
    dependents back. The natural keys of its rows stay."""
    pending = connection.execute(text(
        "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = CAST(:name AS regclass)"),
        {"name": partition.name}).scalar()
    if pending is not None:
        dependents = []
        if not pending and manifest is not None and store is not None and workdir is not None:
            dependents = [_fetched(store, key, workdir) for key in manifest.dependents]
            _delete_dependents(connection, store, partition, dependents, workdir, progress)
        how = "FINALIZE" if pending else "CONCURRENTLY"
        try:
            connection.execute(text(f"ALTER TABLE {partition.table} DETACH PARTITION {partition.name} {how}"))
        except IntegrityError:
            if dependents:
                assert manifest is not None and store is not None and workdir is not None
                _put_back(connection, store, manifest, workdir)
                progress(f"{partition.name}: its detach was refused; its archived rows of "
                         f"{', '.join(d.table for d in dependents)} are back")
            raise

    def counts_and_table(c: Connection) -> None:
        if partition.table == "events":
            _move_counts(c, partition.name)
        c.execute(text(f"DROP TABLE {partition.name}"))

    in_short_transaction(connection, counts_and_table, progress)


def _detached(connection: Connection) -> list[str]:
    """Partitions' tables no longer attached: an archive stopped between detach and drop."""
    return list(connection.execute(text(
        "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' "
        "AND c.relnamespace = 'public'::regnamespace AND c.relname ~ '^(events|reports)_p[0-9]{4,}$' "
        "AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid) ORDER BY c.relname DESC"
    )).scalars())  # reports_ before events_: their rows pointed at the events


def _finish(connection: Connection, store: DumpStore, workdir: Path, progress: Progress) -> list[Partition]:
    """Finish the partitions an earlier run detached, once their archive checks out; a detached
    table with no archive is not ours and is left alone. A partition an earlier run wrote but
    left attached (stopped, or its detach refused) gets its archived dependents back, if they
    were deleted: it is planned and written afresh."""
    finished = []
    for name in _detached(connection):
        table = name.rsplit("_p", 1)[0]
        key = manifest_key(table, name)
        if store.head(key) is None:
            progress(f"{name}: a detached table with no archive in the store: left alone")
            continue
        manifest = _fetched(store, key, workdir)
        verify(store, manifest, workdir)
        partition = Partition(table, name, manifest.id_range[0], manifest.id_range[1])
        drop(connection, partition, progress)
        progress(f"{name}: archived earlier, detached; now dropped")
        finished.append(partition)
    for partition in partitions(connection):
        key = manifest_key(partition.table, partition.name)
        if DEPENDENTS[partition.table] and store.head(key) is not None:
            _put_back(connection, store, _fetched(store, key, workdir), workdir)
    return finished


def archive(engine: Engine, store: DumpStore, before: datetime, dry_run: bool = False,
            progress: Progress = lambda line: None,
            capture_window: timedelta = DEFAULT_CAPTURE_WINDOW) -> Plan:
    """Archive the partitions `plan` picks (nothing but the plan when `dry_run`)."""
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        if dry_run:
            return plan(connection, before, capture_window)
        with tempfile.TemporaryDirectory(prefix="crashreg-archive-") as workdir:
            finished = _finish(connection, store, Path(workdir), progress)  # before the plan: they hold keys
            chosen = plan(connection, before, capture_window)
            for partition in chosen.archive:  # reports first: their rows point at the events
                manifest = write(engine, store, partition, Path(workdir))
                where = store.uri(manifest.file)
                progress(f"{partition.name}: {manifest.rows} rows written to {where}, verified")
                drop(connection, partition, progress, store, manifest, Path(workdir))
                progress(f"{partition.name}: detached and dropped")
    return Plan(archive=finished + chosen.archive, skipped=chosen.skipped)


def restore(engine: Engine, store: DumpStore, manifest_key_: str, table: str) -> int:
    """Load an archived partition into the side table `table` (the columns of its parent, no
    keys, triggers or references: for reading), and its dependents' rows into
    `<table>_<their table>` (old_reports_console_trims); its row count. ValueError: no such
    manifest, or a table exists."""
    if store.head(manifest_key_) is None:
        raise ValueError(f"no archive manifest at {store.uri(manifest_key_)}")
    with tempfile.TemporaryDirectory(prefix="crashreg-restore-") as workdir:
        manifest = _fetched(store, manifest_key_, Path(workdir))
        loaded = [(manifest, table)] + [(dependent, f"{table}_{dependent.table}") for dependent in
                                        (_fetched(store, key, Path(workdir)) for key in manifest.dependents)]
        with engine.connect() as connection:
            for _, name in loaded:
                if connection.execute(text("SELECT to_regclass(:t)"), {"t": name}).scalar() is not None:
                    raise ValueError(f"table {name} exists: restore into a new one")
        with engine.begin() as connection:
            for archived, name in loaded:
                connection.execute(text(f"CREATE TABLE {name} (LIKE {archived.table} INCLUDING DEFAULTS)"))
                for batch in _lines(store, archived, Path(workdir)):
                    _load(connection, name, archived.table, batch)
        return manifest.rows


def _rows(parent: str) -> str:
    """The rows of a batch of archived lines (`:lines`) as rows of `parent`."""
    return (f"SELECT r.* FROM unnest(CAST(:lines AS text[])) AS a(line), "
            f"json_populate_record(NULL::{parent}, CAST(a.line AS json)) AS r")


def _load(connection: Connection, table: str, parent: str, batch: list[str]) -> None:
    connection.execute(text(f"INSERT INTO {table} {_rows(parent)}"), {"lines": batch})


def _load_back(connection: Connection, table: str, batch: list[str]) -> None:
    """Put a batch back into its table; its tally (if any) loses the rows that went in."""
    tally = TALLIES.get(table)
    tallied = tally.taken("back") if tally else ""
    connection.execute(text(f"WITH back AS (INSERT INTO {table} {_rows(table)} ON CONFLICT DO NOTHING "
                            f"RETURNING *){tallied} SELECT count(*) FROM back"), {"lines": batch})
    if tally:  # a key whose rows are all back is no longer the archive's
        connection.execute(text(f"DELETE FROM {tally.table} WHERE {tally.rows} = 0"))
