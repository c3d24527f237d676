"""A registry holding years of a large fleet's history, built fast and kept for the benches.

    .venv/bin/python bench/history.py --events 10000000 [--hosts 100000] [--days 730] [--rebuild]

Prints the URL of a PostgreSQL database `crashreg_history_<N>_v<GENERATOR_VERSION>` holding
`--events` crash events; a complete one (its comment says so) is reused as it is, `--rebuild`
drops and builds it again. The other benches take that URL (`--database-url`) or build it
themselves (`--history N`).

The schema is the project's own (Alembic to head); the rows are generated inside PostgreSQL
(generate_series, a chunk of events per statement, progress on stderr), each table's column list
read from the ORM's metadata so that a column the generator gives no value gets NULL (or its
default) and a new NOT NULL one stops the build naming it. Before the load each loaded table's
secondary indexes and its unique and foreign-key constraints are dropped (their definitions read
back from PostgreSQL's catalogue) and made again afterwards: loading a table and then indexing it
is several times faster than maintaining ten indexes row by row.

What it holds, over `--days` days ending at the start of the build's day:
- `--hosts` inventory hosts (8 virtual machines a physical host, 4 SKUs with their BIOS
  versions, memory sizes, a kernel rollout in the attribute history), as bench/epidemiology.py;
- max(300, N / 500) signatures of three kinds: kernel panics, live-kernel warnings and userspace
  crashes. Signature 1 is a BIOS-linked hardware bug (1/300 of the events, on one BIOS version),
  signature 2 a live-kernel warning spread over the fleet (10%); the rest follow a Lomax
  (Pareto II) law over their ranks: a few signatures of hundreds of thousands of events, a
  long tail of signatures seen once;
- events in id order along time, their host snapshots from the inventory; about 1 in 100,000
  without a signature (the engine failed: /unfingerprinted), 0.2% regressions;
- a report an event. Kernel and live-kernel reports carry a real console log (tests/corpus and
  the crash lab's logs, chosen by signature); userspace reports carry the core handler's stack and
  no console log. Logs older than retention's `log_days` are stored trimmed, with their
  `console_trims` rows, as the hourly gc leaves them; newer ones whole;
- captures for the events whose decision was full or filtered, a dump for each completed full
  one (stored within retention's `dump_days`, deleted before), each signature's three capture
  slots on its newest full captures;
- the signatures' aggregates from their events: counters, first_seen, a Jira link for every
  other signature, a resolution for a tenth of them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
from sqlalchemy import Connection, Table, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import epidemiology as fleet_bench  # noqa: E402 - bench/epidemiology.py builds the fleet

import registry.models  # noqa: E402,F401 - every table in Base.metadata
from registry.config import DumpStoreSettings, RetentionSettings  # noqa: E402
from registry.db import Base, Database  # noqa: E402
from registry.fingerprint import analyse_report  # noqa: E402
from registry.fingerprint.patterns import ALGORITHM_VERSION  # noqa: E402
from registry.migrate import upgrade  # noqa: E402
from registry.partitions import PARTITIONED, ensure_ahead  # noqa: E402
from registry.retention.trim import trim_log  # noqa: E402
from registry.rollups.fold import rebuild as rebuild_rollups  # noqa: E402
from registry.storage.store import open_store  # noqa: E402

GENERATOR_VERSION = 1
CHUNK = 250_000  # events a statement
LOADED = ("events", "reports", "console_trims", "captures", "dumps", "capture_slots")
LIVE_TITLES = ("WARNING", "INFO:")
DUMP_STORE = Path("/tmp/crashreg-history-dumps")
LOG_SOURCES = (ROOT / "tests/corpus/syzkaller-linux", ROOT / "tests/support/data/golden/lab")

# The kind of signature s by s % 20 (5% kernel panics, 25% live-kernel warnings, 70% userspace:
# a fleet's cores outnumber its panics); signature 1 is a panic, signature 2 a warning.
KIND_SQL = ("CASE WHEN {s} = 1 OR ({s} > 2 AND {s} % 20 = 19) THEN 'kernel' WHEN {s} = 2 OR {s} % 20 >= 14 "
            "THEN 'live' ELSE 'user' END")

# Event n's signature: 1 (n % 300 = 0), 2 (n % 10 = 5), else 3 + a Lomax rank (scale 10, shape
# 0.8) from a multiplicative hash of n, wrapped into the signatures there are. NULL: unfingerprinted.
SIGNATURE_OF_SQL = """CASE WHEN n % 100000 = 77 THEN NULL WHEN n % 300 = 0 THEN 1 WHEN n % 10 = 5 THEN 2
  ELSE 3 + (floor(10 * (power(((n * 2654435761) % 1000003 + 1)::float8 / 1000004, -1.25) - 1))::bigint
            % (:signatures - 2)) END"""

GENERATED_SQL = f"""
SELECT n, sig, kind, crashed_at, h.*,
       CASE WHEN kind = 'kernel' THEN CASE WHEN n % 50 = 1 THEN 'full'
                                           WHEN n % 10 IN (2, 6, 9) THEN 'filtered' ELSE 'skip' END
            WHEN kind = 'user' THEN CASE WHEN n % 100 = 3 THEN 'full' WHEN n % 10 = 4 THEN 'filtered'
                                    ELSE 'skip' END
            ELSE 'skip' END AS action,
       CASE kind WHEN 'kernel' THEN CASE WHEN n % 20 = 0 THEN 'dpu' ELSE 'crash_kernel' END
                 WHEN 'live' THEN 'live_kernel' ELSE 'userspace' END AS source
FROM (
  SELECT n, sig, {KIND_SQL.format(s="coalesce(sig, 3)")} AS kind,
         :end - make_interval(secs => (:events - n) * :span / :events + n * 7 % 3600) AS crashed_at,
         CASE WHEN sig = 1 THEN 1 + 8 * (4 * ((n / 300) % (:hosts / 32)) + 2) + (n / 300) % 8
              ELSE 1 + (n / 10 * 7919 + n % 10 * 977) % :hosts END AS host_id
  FROM (SELECT n, {SIGNATURE_OF_SQL} AS sig FROM generate_series(CAST(:lo AS bigint), :hi - 1) AS n) AS s
) AS g JOIN hosts h ON h.id = g.host_id
"""

EVENT_VALUES = {
    "id": "g.n",
    "host_id": "g.id",
    "boot_key": "'boot-' || g.n",
    "boot_id": "'boot-' || g.n",
    "signature_id": "g.sig",
    "fingerprint": "CASE WHEN g.sig IS NOT NULL THEN md5('sig' || g.sig) END",
    "algorithm_version": f"CASE WHEN g.sig IS NOT NULL THEN {ALGORITHM_VERSION} END",
    "title": "CASE WHEN g.sig IS NOT NULL THEN 'history signature ' || g.sig END",
    "crashed_at": "g.crashed_at",
    "received_at": "g.crashed_at + interval '90 seconds'",
    "uptime_s": "CASE WHEN g.sig = 1 THEN g.n % 200000 ELSE g.n * 7 % 10000000 END",
    "program_version": "CASE WHEN g.kind = 'user' THEN 'v' || (g.sig % 7) END",
    "process_started_at":
        "CASE WHEN g.kind = 'user' THEN g.crashed_at - make_interval(secs => g.n % 86400) END",
    "process_uptime_s": "CASE WHEN g.kind = 'user' THEN g.n % 86400 END",
    "repeats": "CASE WHEN g.kind = 'live' THEN g.n % 7 ELSE 0 END",
    "first_source": "g.source",
    "sources": "jsonb_build_array(g.source)",
    "capture_action": "g.action",
    "capture_reason": "'history'",
    "capture_dump_level": "CASE g.action WHEN 'full' THEN 0 WHEN 'filtered' THEN 31 END",
    "regression": "CASE WHEN g.n % 500 = 7 THEN 'regressed' END",
    "fingerprint_error":
        "CASE WHEN g.sig IS NULL THEN 'RecursionError: maximum recursion depth exceeded' END",
}

# Reports of the events in [lo, hi): payload as the contract's report (its console log apart).
# The pool log of an event's report: its signature's, of its kind.
LOG_OF_SQL = """l.kind = CASE WHEN e.first_source = 'live_kernel' THEN 'live' ELSE 'kernel' END
  AND l.i = coalesce(e.signature_id, 0) * 7919 % CASE WHEN e.first_source = 'live_kernel' THEN :live_logs
                                                     ELSE :kernel_logs END"""
REPORT_SOURCE_SQL = """events e
  LEFT JOIN history_logs l ON e.first_source <> 'userspace' AND LOG_OF
  WHERE e.id >= :lo AND e.id < :hi""".replace("LOG_OF", LOG_OF_SQL)
REPORT_VALUES = {
    "id": "e.id",
    "report_id": "'h-' || md5(e.id::text)",
    "event_id": "e.id",
    "source": "e.first_source",
    "received_at": "e.received_at",
    "payload_sha256": "md5(e.id::text) || md5(e.boot_key)",
    "payload": """jsonb_build_object('report_id', 'h-' || md5(e.id::text), 'source', e.first_source,
        'crashed_at', e.crashed_at, 'boot_id', e.boot_id, 'uptime_s', e.uptime_s,
        'host', jsonb_build_object('hostname', e.hostname, 'physical_host', e.physical_host,
                                   'region', e.region, 'kernel_version', e.kernel_version,
                                   'memory_gb', e.memory_gb, 'labels', e.labels))
      || CASE WHEN e.first_source = 'userspace' THEN jsonb_build_object('stack', jsonb_build_object(
           'process', jsonb_build_object('name', 'svc' || e.signature_id % 50, 'version', e.program_version),
           'signal', 'SIGSEGV',
           'frames', jsonb_build_array(jsonb_build_object('function', 'handle_' || e.signature_id),
                                       jsonb_build_object('function', 'dispatch'),
                                       jsonb_build_object('function', 'main')))) ELSE '{}' END""",
    "console_log": "CASE WHEN e.received_at < :log_cut THEN l.kept ELSE l.whole END",
    "answer": """jsonb_build_object('event_id', e.id, 'signature_id', e.signature_id,
        'capture', jsonb_build_object('action', e.capture_action, 'reason', e.capture_reason))""",
}
TRIM_SOURCE_SQL = """reports r JOIN events e ON e.id = r.event_id
  JOIN history_logs l ON LOG_OF
  WHERE r.id >= :lo AND r.id < :hi AND r.console_log IS NOT NULL
    AND e.received_at < :log_cut""".replace("LOG_OF", LOG_OF_SQL)
TRIM_VALUES = {
    "report_id": "r.id", "event_id": "e.id", "trimmed_at": "e.received_at + :log_age",
    "first_line": "l.first_line", "total_lines": "l.total_lines",
    "whole_bytes": "l.whole_bytes", "kept_bytes": "l.kept_bytes",
}
CAPTURE_SOURCE_SQL = "events e WHERE e.id >= :lo AND e.id < :hi AND e.capture_action <> 'skip'"
CAPTURE_VALUES = {
    "event_id": "e.id",
    "signature_id": "e.signature_id",
    "method": "CASE WHEN e.first_source = 'userspace' THEN 'core' ELSE 'makedumpfile' END",
    "status": "CASE WHEN e.id % 11 = 4 THEN 'failed' ELSE 'completed' END",
    "dump_level": "e.capture_dump_level",
    "bytes": "e.memory_gb::bigint * CASE WHEN e.capture_action = 'full' THEN 850000000 ELSE 40000000 END",
    "duration_s": "e.memory_gb * CASE WHEN e.capture_action = 'full' THEN 0.9 ELSE 0.08 END + e.id % 60",
    "downtime_s": "e.memory_gb * CASE WHEN e.capture_action = 'full' THEN 0.9 ELSE 0.08 END + e.id % 60 + 90",
    "capture_key": "'cap-' || e.id",
    "created_at": "e.received_at",
    "updated_at": "e.received_at + interval '20 minutes'",
}
DUMP_SOURCE_SQL = """captures c WHERE c.id >= :lo AND c.id < :hi AND c.status = 'completed'
  AND c.dump_level = 0"""
DUMP_VALUES = {
    "capture_id": "c.id", "store": ":store", "key": "'history/' || c.id || '.vmcore'",
    "state": "CASE WHEN c.created_at < :dump_cut THEN 'deleted' ELSE 'stored' END",
    "encoding": "'identity'", "bytes": "c.bytes", "raw_bytes": "c.bytes", "part_size": "16777216",
    "created_at": "c.created_at", "stored_at": "c.updated_at",
    "deleted_at": "CASE WHEN c.created_at < :dump_cut THEN c.created_at + :dump_age END",
}

AGGREGATES_SQL = (
    # each signature's three capture slots: its newest completed full captures
    """INSERT INTO capture_slots (signature_id, slot, event_id, state, since)
       SELECT signature_id, n, event_id, 'completed', updated_at FROM (
         SELECT signature_id, event_id, updated_at,
                row_number() OVER (PARTITION BY signature_id ORDER BY id DESC) AS n
         FROM captures WHERE dump_level = 0 AND status = 'completed' AND signature_id IS NOT NULL) AS newest
       WHERE n <= 3""",
    """INSERT INTO signature_counters (signature_id, shard, events, last_seen)
       SELECT signature_id, 0, count(*), max(crashed_at) FROM events WHERE signature_id IS NOT NULL
       GROUP BY signature_id""",
    """UPDATE signatures s
          SET first_seen = f.first_seen, created_at = f.first_seen, updated_at = f.first_seen,
              status = CASE WHEN s.id % 10 = 0 AND s.id > 2 THEN 'resolved' WHEN s.id % 10 = 1 AND s.id > 2
                            THEN 'triaged' ELSE 'new' END,
              resolved_at = CASE WHEN s.id % 10 = 0 AND s.id > 2 THEN f.first_seen + interval '30 days' END,
              resolution = CASE WHEN s.id % 10 = 0 AND s.id > 2 THEN 'fixed' END
       FROM (SELECT signature_id, min(crashed_at) AS first_seen FROM events GROUP BY signature_id) AS f
       WHERE f.signature_id = s.id""",
    """INSERT INTO jira_links (signature_id, issue_key, url, status_category, created_at)
       SELECT id, 'CRASH-' || id, 'https://jira.example/browse/CRASH-' || id,
              CASE WHEN status = 'resolved' THEN 'done' ELSE 'indeterminate' END, first_seen
       FROM signatures WHERE id % 2 = 0""",
)

SIGNATURES_SQL = f"""
INSERT INTO signatures (id, fingerprint, algorithm_version, title, kind, function, frames, labels, status,
                        first_seen, created_at, updated_at, fix_versions, capture_policy, extra_full_captures)
SELECT n, md5('sig' || n), {ALGORITHM_VERSION}, 'history signature ' || n,
       CASE k WHEN 'user' THEN 'userspace' WHEN 'live' THEN 'warning' ELSE 'kernel' END,
       'handle_' || n, '[]', '[]', 'new', :end, :end, :end, '[]', 'auto', 0
FROM (SELECT n, {KIND_SQL.format(s="n")} AS k FROM generate_series(1, :signatures) AS n) AS g ORDER BY n
"""


@dataclass(frozen=True)
class History:
    """The shape of one generated registry."""

    events: int
    hosts: int = 100_000
    days: int = 730

    @property
    def signatures(self) -> int:
        return max(300, self.events // 500)

    @property
    def name(self) -> str:
        return f"crashreg_history_{self.events}_v{GENERATOR_VERSION}"

    @property
    def comment(self) -> str:
        return f"crashreg bench history: events={self.events} hosts={self.hosts} days={self.days} complete"


def database_url(name: str) -> str:
    return fleet_bench.POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"


def store_location() -> str:
    """The dump store the generated dumps are in (a local directory; the objects are not written)."""
    return open_store(DumpStoreSettings(url=str(DUMP_STORE)), "http://bench").uri("").rstrip("/")


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def insert_sql(table: Table, values: dict[str, str], source: str) -> str:
    """INSERT ... SELECT over `table`'s columns: those `values` names from their expressions,
    the others left to their defaults; a NOT NULL column without a value or a server default
    stops the build (the schema grew a column this generator must learn)."""
    missing = [column.name for column in table.columns if column.name not in values
               and not column.nullable and column.server_default is None and not column.primary_key]
    if missing:
        raise SystemExit(f"bench/history.py: no generated value for {table.name}.{', '.join(missing)}")
    unknown = set(values) - set(table.columns.keys())
    if unknown:
        raise SystemExit(f"bench/history.py: {table.name} has no column {', '.join(sorted(unknown))}")
    names = [column.name for column in table.columns if column.name in values]
    return (f"INSERT INTO {table.name} ({', '.join(names)}) "
            f"SELECT {', '.join(values[name] for name in names)} FROM {source}")


def event_values() -> dict[str, str]:
    """Events' values: the generated ones and the host's snapshot, every column hosts and events share."""
    events, hosts = Base.metadata.tables["events"], Base.metadata.tables["hosts"]
    shared = {c.name: f"g.{c.name}" for c in events.columns if c.name in hosts.columns and c.name != "id"}
    return shared | EVENT_VALUES


def pool_logs() -> Iterator[tuple[str, str, str, int, int]]:
    """The real console logs with a crash: (kind, whole, as retention trims it, first kept line,
    lines). Warnings and INFO reports (lockdep, hung tasks, stalls) are the live-kernel kind: the
    machine goes on; the rest are panics."""
    for folder in LOG_SOURCES:
        for path in sorted(folder.glob("*")):
            if not path.is_file():
                continue
            log = path.read_text(errors="replace").replace("\x00", "")
            crash = analyse_report(log, None)
            if crash is None:
                continue
            kind = "live" if crash.title.startswith(LIVE_TITLES) else "kernel"
            trimmed = trim_log(log)
            kept = trimmed.text if trimmed else log
            yield kind, log, kept, trimmed.first_line if trimmed else 1, log.count("\n") + 1


@dataclass(frozen=True)
class Dropped:
    """A table's secondary indexes and unique/foreign-key constraints, as PostgreSQL defines them."""

    table: str
    indexes: list[tuple[str, str]]
    constraints: list[tuple[str, str]]


# A table's unique and foreign-key constraints (a partitioned table's own, not the ones
# PostgreSQL clones per partition), then its secondary indexes (those of the constraints are
# gone with them): (name, definition), and how each is dropped.
SECONDARY = (
    ("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
     "WHERE conrelid = CAST(:t AS regclass) AND contype IN ('u', 'f') AND conparentid = 0 "
     "ORDER BY contype DESC, conname",
     'ALTER TABLE {table} DROP CONSTRAINT "{name}"'),
    ("SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
     "WHERE x.indrelid = CAST(:t AS regclass) AND NOT x.indisprimary ORDER BY i.relname",
     'DROP INDEX "{name}"'),
)


def drop_secondary(connection: Connection, table: str) -> Dropped:
    found = []
    for query, drop in SECONDARY:
        rows = [(name, definition) for name, definition in connection.execute(text(query), {"t": table})]
        for name, _ in rows:
            connection.execute(text(drop.format(table=table, name=name)))
        found.append(rows)
    constraints, indexes = found
    return Dropped(table, indexes, constraints)


def restore_secondary(connection: Connection, dropped: Dropped) -> None:
    for name, definition in dropped.indexes:
        started = time.perf_counter()
        # a partitioned table's index is defined ON ONLY the parent: made again, it covers the partitions
        connection.execute(text(definition.replace(" ON ONLY ", " ON ", 1)))
        say(f"  index {name} in {time.perf_counter() - started:.0f}s")
    for name, definition in sorted(dropped.constraints, key=lambda c: c[1].startswith("FOREIGN")):
        started = time.perf_counter()
        connection.execute(text(f'ALTER TABLE {dropped.table} ADD CONSTRAINT "{name}" {definition}'))
        say(f"  constraint {name} in {time.perf_counter() - started:.0f}s")


def chunked(connection: Connection, label: str, sql: str, upto: int, params: dict[str, object]) -> None:
    """Run `sql` over [lo, hi) id ranges up to `upto`, a line of progress each; then ANALYZE the
    table it filled, for the loads that join it (without statistics the planner takes a fresh
    table for empty and scans all of it for every range)."""
    started, rows = time.perf_counter(), 0
    for lo in range(1, upto + 1, CHUNK):
        rows += connection.execute(text(sql), params | {"lo": lo, "hi": min(lo + CHUNK, upto + 1)}).rowcount
        done = min(lo + CHUNK - 1, upto)
        elapsed = time.perf_counter() - started
        rate = rows / max(elapsed, 1e-9)
        say(f"{label}: {done}/{upto} ids, {rows} rows, {elapsed:.0f}s ({rate:,.0f} rows/s)")
    connection.execute(text(f"ANALYZE {sql.split()[2]}"))


def load(url: str, history: History) -> None:
    tables = Base.metadata.tables
    retention = RetentionSettings()
    log_age, dump_age = timedelta(days=retention.log_days), timedelta(days=retention.dump_days)
    database = Database(url)
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        end = connection.scalar(text("SELECT date_trunc('day', now())"))
        params: dict[str, object] = {
            "events": history.events, "hosts": history.hosts, "signatures": history.signatures,
            "end": end, "span": history.days * 86400,
            "log_cut": end - log_age, "log_age": log_age, "dump_cut": end - dump_age, "dump_age": dump_age,
            "store": store_location(),
        }
        say(f"hosts ({history.hosts}), their kernel rollout, {history.signatures} signatures")
        connection.execute(text(fleet_bench.HOSTS_SQL), {"hosts": history.hosts})
        connection.execute(text("UPDATE hosts SET memory_gb = (ARRAY[256, 512, 1024, 2048])[1 + id % 4], "
                                "first_seen = :end - make_interval(secs => :span)"), params)
        connection.execute(text(fleet_bench.CHANGES_SQL))
        connection.execute(text(SIGNATURES_SQL), params)
        connection.execute(text(
            "CREATE TEMP TABLE history_logs (kind text, i int, whole text, kept text, first_line int, "
            "total_lines int, whole_bytes bigint, kept_bytes bigint, PRIMARY KEY (kind, i))"))
        counts = {"live": 0, "kernel": 0}
        for kind, whole, kept, first_line, total_lines in pool_logs():
            connection.execute(text("INSERT INTO history_logs VALUES (:kind, :i, :w, :k, :f, :t, :wb, :kb)"),
                               {"kind": kind, "i": counts[kind], "w": whole, "k": kept, "f": first_line,
                                "t": total_lines, "wb": len(whole.encode()), "kb": len(kept.encode())})
            counts[kind] += 1
        params |= {"live_logs": counts["live"], "kernel_logs": counts["kernel"]}
        say(f"real console logs in the pool: {counts['live']} warnings, {counts['kernel']} panics")
        # the ids loaded have their partitions (the migration made two above id 1 only)
        for table in PARTITIONED:
            connection.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), :n)"),
                               {"n": history.events})
        ensure_ahead(connection, progress=say)
        dropped = [drop_secondary(connection, table) for table in LOADED]
        chunked(connection, "events", insert_sql(tables["events"], event_values(), f"({GENERATED_SQL}) AS g"),
                history.events, params)
        chunked(connection, "reports", insert_sql(tables["reports"], REPORT_VALUES, REPORT_SOURCE_SQL),
                history.events, params)
        trims = insert_sql(tables["console_trims"], TRIM_VALUES, TRIM_SOURCE_SQL)
        chunked(connection, "console trims", trims, history.events, params)
        chunked(connection, "captures", insert_sql(tables["captures"], CAPTURE_VALUES, CAPTURE_SOURCE_SQL),
                history.events, params)
        captures = connection.scalar(text("SELECT coalesce(max(id), 0) FROM captures"))
        dumps = insert_sql(tables["dumps"], DUMP_VALUES, DUMP_SOURCE_SQL)
        chunked(connection, "dumps", dumps, captures, params)
        for table in ("events", "reports", "signatures"):
            connection.execute(text(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"))
        for entry in dropped:
            say(f"indexes and constraints of {entry.table}")
            restore_secondary(connection, entry)
        say("aggregates: capture slots, counters, first seen, statuses, Jira links")
        for statement in AGGREGATES_SQL:
            connection.execute(text(statement), params)
        say("VACUUM ANALYZE")
        connection.execute(text("VACUUM ANALYZE"))
    database.dispose()


def ensure(history: History, rebuild: bool = False) -> str:
    """The URL of `history`'s database, built unless a complete one is there."""
    url = database_url(history.name)
    with psycopg.connect(fleet_bench.POSTGRES_ADMIN, autocommit=True) as admin:
        comment = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (history.name,)).fetchone()
        if comment is not None and comment[0] == history.comment and not rebuild:
            say(f"reusing {history.name}")
            upgrade(url)  # a no-op when it is current; else the benches measure the schema of now
            rollups_built(url)
            return url
        admin.execute(f'DROP DATABASE IF EXISTS "{history.name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{history.name}"')
    started = time.perf_counter()
    say(f"building {history.name}: {history.events} events, {history.hosts} hosts, {history.days} days")
    upgrade(url)
    load(url, history)
    seconds = time.perf_counter() - started
    with psycopg.connect(fleet_bench.POSTGRES_ADMIN, autocommit=True) as admin:
        admin.execute(f"COMMENT ON DATABASE \"{history.name}\" IS '{history.comment}'")
        size = admin.execute("SELECT pg_size_pretty(pg_database_size(%s))", (history.name,)).fetchone()[0]
    say(f"built {history.name} in {seconds:.0f}s ({history.events / seconds:,.0f} events/s), {size}")
    rollups_built(url)
    return url


def rollups_built(url: str) -> None:
    """The rollups built from the loaded events once, as after migration 0033 on a registry
    that has events (the load's triggers queued a change per event): a registry the scheduler
    runs on has its queue folded, and the pages and panels read the rollups, not a scan of
    the queue's 10 M dead rows (a plain VACUUM leaves the table its 1.3 GB)."""
    database = Database(url)
    with database.session() as session:
        due = session.scalar(text("SELECT NOT EXISTS (SELECT 1 FROM rollup_signature_daily) "
                                  "AND EXISTS (SELECT 1 FROM rollup_changes)"))
    if due:
        started = time.perf_counter()
        say("rollups: built from the events (the load queued a change per event)")
        rebuild_rollups(database)
        with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM FULL ANALYZE rollup_changes"))  # a few rows: rewritten small
        say(f"rollups built in {time.perf_counter() - started:.0f}s")
    database.dispose()


def history_arguments(parser: argparse.ArgumentParser) -> None:
    """The options by which a bench measures a generated registry rather than building its own."""
    parser.add_argument("--database-url", help="measure this registry (one bench/history.py built)")
    parser.add_argument("--history", type=int, metavar="N",
                        help="measure bench/history.py's registry of N events (built if missing)")


def history_url(args: argparse.Namespace) -> str | None:
    """The registry `--database-url` or `--history` names, None when neither is given."""
    if args.history:
        return ensure(History(args.history))
    return args.database_url


def drop_role(url: str, role: str) -> None:
    """Drop a role a bench made on a kept registry (its grants there first)."""
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=730)
    parser.add_argument("--rebuild", action="store_true", help="drop and build it even if it is there")
    args = parser.parse_args()
    print(ensure(History(args.events, args.hosts, args.days), args.rebuild))
    return 0


if __name__ == "__main__":
    sys.exit(main())
