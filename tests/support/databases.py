"""The test databases: the backends to run on, PostgreSQL databases made and dropped, emptied."""

from __future__ import annotations

import os
import uuid
from graphlib import CycleError, TopologicalSorter

import psycopg

POSTGRES_ADMIN_URL = os.environ.get("CRASHREG_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = [b for b in os.environ.get("CRASHREG_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]


def postgres_url(database: str) -> str:
    return POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{database}"


def create_postgres_database(prefix: str = "crashreg_test") -> str:
    """A new, empty, uniquely named database; returns its URL. Caller drops it."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_url(name)


def drop_postgres_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
        filled = [row[0] for row in conn.execute(" UNION ALL ".join(
            f"(SELECT '{t}' WHERE EXISTS (SELECT 1 FROM \"{t}\"))" for t in tables))] if tables else []
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
        conn.execute(
            "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false) "
            "FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
        )
