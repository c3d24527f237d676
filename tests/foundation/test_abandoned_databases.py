"""A killed test run's PostgreSQL databases are dropped by the next run (tests/conftest.py's
pytest_sessionstart); another run's, still going, are not."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.support.databases import (
    BACKENDS,
    POSTGRES_ADMIN_URL,
    create_postgres_database,
    drop_abandoned_databases,
    drop_postgres_database,
    postgres_url,
)

pytestmark = pytest.mark.skipif("postgresql" not in BACKENDS, reason="PostgreSQL databases only")


def database_names() -> set[str]:
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}


def test_a_gone_runs_databases_are_dropped_and_a_live_runs_kept() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    abandoned = f"crashreg_lab_{gone.stdout.strip()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{abandoned}"')
    live = create_postgres_database()
    other = f"crashreg_{uuid.uuid4().hex[:10]}"  # not a test database's name: never touched
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{other}"')
    try:
        assert abandoned in drop_abandoned_databases()
        names = database_names()
        assert abandoned not in names
        assert live.rsplit("/", 1)[1] in names and other in names
    finally:
        for url in (postgres_url(abandoned), live, postgres_url(other)):
            drop_postgres_database(url)
