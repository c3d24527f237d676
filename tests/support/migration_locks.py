"""Which migrations would lock a large table for long on PostgreSQL (docs/upgrading.md).

Each migration after a baseline is run on its own (`alembic upgrade <revision>`) on a real
PostgreSQL database, and judged two ways:
- rewrites: the relfilenode of every large table and of its indexes, before and after. A new
  one means the table (or index) was copied under an ACCESS EXCLUSIVE lock: a type change, a
  volatile default, a SET TABLESPACE, a VACUUM FULL or CLUSTER;
- statements: what it sent (every statement of the run is captured), matched against the forms
  that hold a lock across a whole scan or build of the table (LOCKING_FORMS);
- new indexes: an index on the rows a large table held before (the table found by its oid, so
  a table renamed to be a partition is still followed) that no CREATE INDEX CONCURRENTLY made:
  built under a lock (a CREATE INDEX ... ON ONLY on a plain table, or an ATTACH PARTITION that
  found no matching index and built one). `CREATE INDEX ... ON ONLY` is not a finding by its
  form: on a partitioned table it builds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import event
from sqlalchemy.engine import Engine

from registry.partitions import PARTITION_NAME

# The migrations from here on are checked (older ones ran on every registry already).
BASELINE = "0028_capture_removed"
# Tables that grow with the fleet's history, or that every report touches: a long lock on any of
# them stalls ingest (reporters wait on a crashing host) or the pages.
LARGE_TABLES = frozenset({
    "events", "reports", "captures", "capture_slots", "dumps", "dump_downloads", "dump_pins",
    "console_trims", "hosts", "host_attribute_changes", "signatures", "signature_aliases",
    "signature_counters", "jira_webhook_receipts", "outbox", "epidemiology_samples",
    "epidemiology_sample_groups",
})
NAME = r'(?:ONLY\s+)?(?:"?public"?\.)?"?(?P<table>\w+)"?'
# (a statement's form, what is wrong with it): forms that hold a lock while every row is read.
LOCKING_FORMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), problem) for pattern, problem in (
        (rf"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(?!ONLY\s){NAME}",
         "a non-concurrent index build blocks every write for the whole build: CREATE INDEX CONCURRENTLY "
         "in an autocommit_block"),
        (rf"^REINDEX\s+(?:\(.*?\)\s+)?(?:TABLE|INDEX)\s+(?!CONCURRENTLY){NAME}",
         "a non-concurrent REINDEX blocks writes: REINDEX ... CONCURRENTLY in an autocommit_block"),
        (rf"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{NAME}\s.*\bADD\s+(?:CONSTRAINT\s+\S+\s+)?"
         r"(?:CHECK|FOREIGN\s+KEY)\b(?!.*\bNOT\s+VALID\b)",
         "a constraint added valid reads every row under an ACCESS EXCLUSIVE lock: add it NOT VALID, "
         "then VALIDATE CONSTRAINT (which lets writes go on)"),
        (rf"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{NAME}\s.*\bADD\s+(?:CONSTRAINT\s+\S+\s+)?"
         r"(?:PRIMARY\s+KEY|UNIQUE)\b(?!.*\bUSING\s+INDEX\b)",
         "a key added by building its index under an ACCESS EXCLUSIVE lock: build a unique index "
         "CONCURRENTLY, then ADD CONSTRAINT ... USING INDEX"),
        (rf"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{NAME}\s.*\bSET\s+NOT\s+NULL\b",
         "SET NOT NULL reads every row under an ACCESS EXCLUSIVE lock unless a validated "
         "CHECK (column IS NOT NULL) is there first: add it NOT VALID and VALIDATE it in this migration"),
        (rf"^(?:VACUUM\s+(?:\(.*?FULL.*?\)|FULL)|CLUSTER|LOCK\s+TABLE)\s+(?:\S+\s+)*?{NAME}",
         "rewrites or locks the whole table"),
    )
)
VALIDATED = re.compile(rf"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{NAME}\s.*\bVALIDATE\s+CONSTRAINT\b",
                       re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Finding:
    revision: str
    table: str
    problem: str

    def line(self) -> str:
        return f"{self.revision}: {self.table}: {self.problem}"


def alembic_config(script_location: Path, database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def revisions_after(script_location: Path, baseline: str) -> list[str]:
    """Every revision that is not the baseline nor one of its ancestors, oldest first."""
    scripts = ScriptDirectory.from_config(alembic_config(script_location, "sqlite://"))
    before = {script.revision for script in scripts.iterate_revisions(baseline, "base")}
    ordered = [script.revision for script in scripts.walk_revisions()]  # newest first
    return [revision for revision in reversed(ordered) if revision not in before]


BOUNDED = re.compile(r"^SET\s+LOCAL\s+lock_timeout\b", re.IGNORECASE)
ENDED = re.compile(r"^(?:COMMIT|ROLLBACK)\b", re.IGNORECASE)
LOCK_TABLE = re.compile(r"^LOCK\s+TABLE\b", re.IGNORECASE)


def statement_findings(revision: str, statements: list[str]) -> list[Finding]:
    """A LOCK TABLE in a transaction that bounded its lock waits (SET LOCAL lock_timeout) is no
    finding by its form: what the transaction then does under it is judged (statements, rewrites
    and index builds) as everything else is."""
    found, validated, bounded = [], set(), False
    for statement in statements:
        text = " ".join(statement.split())
        bounded = (bounded or BOUNDED.match(text) is not None) and ENDED.match(text) is None
        if bounded and LOCK_TABLE.match(text):
            continue
        if (match := VALIDATED.match(text)) is not None:
            validated.add(match["table"])
        for form, problem in LOCKING_FORMS:
            match = form.match(text)
            if match is None or match["table"] not in LARGE_TABLES:
                continue
            if "SET NOT NULL" in problem and match["table"] in validated:
                continue
            found.append(Finding(revision, match["table"], problem))
    return found


@dataclass(frozen=True)
class OnDisk:
    """A relation's name and relfilenode, and for an index its table's oid."""

    name: str
    node: int
    table: int | None


def files_on_disk(database_url: str, tables: frozenset[int] = frozenset()) -> dict[int, OnDisk]:
    """Each large table (by name, or by oid among `tables`), each partition of the partitioned
    ones (years of history fill them) and each of their indexes, by oid."""
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(
            "WITH large AS (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND (relname = ANY(%(names)s) OR oid = ANY(%(oids)s) "
            "OR (relkind = 'r' AND relname ~ %(partitions)s))) "
            "SELECT c.oid, c.relname, c.relfilenode, i.indrelid FROM pg_class c "
            "LEFT JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.oid IN (SELECT oid FROM large) OR i.indrelid IN (SELECT oid FROM large)",
            {"names": sorted(LARGE_TABLES), "oids": sorted(tables),
             "partitions": f"^{PARTITION_NAME.pattern}$"},
        ).fetchall()
    return {int(oid): OnDisk(name, int(node), table and int(table)) for oid, name, node, table in rows}


REWRITTEN = "rewritten (a new relfilenode): a copy made under an ACCESS EXCLUSIVE lock"


def rewrite_findings(revision: str, before: dict[int, OnDisk], after: dict[int, OnDisk]) -> list[Finding]:
    return [
        Finding(revision, was.name, REWRITTEN)
        for oid, was in sorted(before.items(), key=lambda item: item[1].name)
        if oid in after and after[oid].node != was.node
    ]


CONCURRENT_INDEX = re.compile(
    r"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?(?P<index>\w+)",
    re.IGNORECASE,
)

RENAMED_INDEX = re.compile(r"^ALTER\s+INDEX\s+(?P<old>\w+)\s+RENAME\s+TO\s+(?P<new>\w+)", re.IGNORECASE)


def new_index_findings(revision: str, before: dict[int, OnDisk], after: dict[int, OnDisk],
                       statements: list[str]) -> list[Finding]:
    """Indexes new on a table that was there before, that no concurrent build made. A
    partitioned table's own index has no storage (relfilenode 0) and is built on no rows: the
    indexes of its partitions are (each judged here as the partition's)."""
    concurrent = set()
    for statement in (" ".join(text.split()) for text in statements):
        if match := CONCURRENT_INDEX.match(statement):
            concurrent.add(match["index"])
        elif (renamed := RENAMED_INDEX.match(statement)) and renamed["old"] in concurrent:
            concurrent.add(renamed["new"])
    tables = {oid for oid, was in before.items() if was.table is None}
    return [
        Finding(revision, before[now.table].name, f"index {now.name} built on its rows under a lock")
        for oid, now in sorted(after.items(), key=lambda item: item[1].name)
        if oid not in before and now.table in tables and now.name not in concurrent and now.node != 0
    ]


@contextmanager
def captured_statements() -> Iterator[list[str]]:
    """Every statement any engine of this process sends while inside."""
    statements: list[str] = []

    def capture(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", capture)
    try:
        yield statements
    finally:
        event.remove(Engine, "before_cursor_execute", capture)


def lock_findings(script_location: Path, database_url: str, baseline: str = BASELINE) -> list[Finding]:
    """Upgrade a database at `baseline` one migration at a time; what each would lock for long."""
    config = alembic_config(script_location, database_url)
    findings: list[Finding] = []
    for revision in revisions_after(script_location, baseline):
        before = files_on_disk(database_url)
        with captured_statements() as statements:
            command.upgrade(config, revision)
        tables = frozenset(oid for oid, was in before.items() if was.table is None)
        after = files_on_disk(database_url, tables)
        findings += statement_findings(revision, statements)
        findings += rewrite_findings(revision, before, after)
        findings += new_index_findings(revision, before, after, statements)
    return findings
