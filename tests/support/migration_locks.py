"""Which migrations would lock a large table for long on PostgreSQL (docs/upgrading.md).

Each migration after a baseline is run on its own (`alembic upgrade <revision>`) on a real
PostgreSQL database, and judged two ways:
- rewrites: the relfilenode of every large table and of its indexes, before and after. A new
  one means the table (or index) was copied under an ACCESS EXCLUSIVE lock: a type change, a
  volatile default, a SET TABLESPACE, a VACUUM FULL or CLUSTER;
- statements: what it sent (every statement of the run is captured), matched against the forms
  that hold a lock across a whole scan or build of the table (LOCKING_FORMS).
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
        (rf"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+{NAME}",
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


def statement_findings(revision: str, statements: list[str]) -> list[Finding]:
    found, validated = [], set()
    for statement in statements:
        text = " ".join(statement.split())
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


def files_on_disk(database_url: str) -> dict[str, int]:
    """relfilenode of each large table and of each of its indexes, by name."""
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(
            "SELECT c.relname, c.relfilenode FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
            "AND (c.relname = ANY(%(tables)s) OR c.oid IN (SELECT indexrelid FROM pg_index i "
            "JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = ANY(%(tables)s)))",
            {"tables": sorted(LARGE_TABLES)},
        ).fetchall()
    return {name: int(node) for name, node in rows}


def rewrite_findings(revision: str, before: dict[str, int], after: dict[str, int]) -> list[Finding]:
    return [
        Finding(revision, name, "rewritten (a new relfilenode): a copy made under an ACCESS EXCLUSIVE lock")
        for name, node in sorted(before.items()) if name in after and after[name] != node
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
        findings += statement_findings(revision, statements)
        findings += rewrite_findings(revision, before, files_on_disk(database_url))
    return findings
