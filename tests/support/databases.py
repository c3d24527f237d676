"""The test databases: the backends to run on, PostgreSQL databases made and dropped, emptied."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from graphlib import CycleError, TopologicalSorter

import psycopg

from registry.migrate import upgrade

POSTGRES_ADMIN_URL = os.environ.get("CRASHREG_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = [b for b in os.environ.get("CRASHREG_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]


def postgres_url(database: str) -> str:
    return POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{database}"


# What a test database's name says: who made it (its process id) and a unique part.
TEST_DATABASE_NAME = re.compile(r"crashreg_(?:test|lab)_(?P<pid>\d+)_[0-9a-f]{10}")


def create_postgres_database(prefix: str = "crashreg_test") -> str:
    """A new, empty, uniquely named database; returns its URL. Caller drops it. The name holds
    the process id, so that a run killed before it dropped it can be told apart later."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_url(name)


@contextmanager
def migrated_postgres_database() -> Iterator[str]:
    """A new database at the migration head (through Alembic, the only way the schema is made),
    dropped after."""
    url = create_postgres_database()
    try:
        upgrade(url)
        yield url
    finally:
        drop_postgres_database(url)


def drop_postgres_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_abandoned_databases() -> list[str]:
    """Drop the test databases whose maker is gone (a run killed before its teardown): made on
    this machine by a process that no longer runs. Another run's live databases stay."""
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        names = [row[0] for row in conn.execute("SELECT datname FROM pg_database")]
        abandoned = [
            name for name in names
            if (made := TEST_DATABASE_NAME.fullmatch(name)) and not process_runs(int(made["pid"]))
        ]
        for name in abandoned:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return abandoned


def process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def truncate_all(url: str) -> None:
    """Empty every table and restart every used sequence: a freshly migrated database again.

    Only the tables holding rows are emptied, by DELETE in foreign-key order (children
    first): a TRUNCATE of every table costs a file swap per table, ~0.4 s a test here.
    Tables in a foreign-key cycle fall back to TRUNCATE ... CASCADE.
    """
    with psycopg.connect(url) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'alembic_version'")]
        _empty(conn, _filled(conn, tables))
        _empty(conn, _filled(conn, tables))  # what the deletes' triggers queued (rollup_changes)
        conn.execute(
            "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false) "
            "FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
        )


def _filled(conn: psycopg.Connection, tables: list[str]) -> list[str]:
    if not tables:
        return []
    return [row[0] for row in conn.execute(" UNION ALL ".join(
        f"(SELECT '{t}' WHERE EXISTS (SELECT 1 FROM \"{t}\"))" for t in tables))]


def _empty(conn: psycopg.Connection, filled: list[str]) -> None:
    """Delete the rows of `filled` in foreign-key order (children first)."""
    references: dict[str, set[str]] = {t: set() for t in filled}
    for child, parent in conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
        "WHERE contype = 'f' AND connamespace = 'public'::regnamespace"
    ):
        child, parent = child.strip('"'), parent.strip('"')
        if parent in references and child in references and child != parent:
            references[parent].add(child)  # the parent's rows go after its children's
    try:
        order = list(TopologicalSorter(references).static_order())
    except CycleError:
        conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in filled) + " CASCADE")
    else:
        for table in order:
            conn.execute(f'DELETE FROM "{table}"')
