"""Shared fixtures: every database test runs on SQLite and PostgreSQL, over real connections.

Each backend is migrated once per test session through Alembic (the only way the schema is
made); each test then gets a clean copy: a copied file on SQLite, truncated tables on PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import psycopg
import pytest
from werkzeug.serving import make_server

from registry.app import create_app
from registry.auth.tokens import create_token
from registry.config import Settings
from registry.db import Database
from registry.migrate import upgrade

POSTGRES_ADMIN_URL = os.environ.get("CRASHREG_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
# How often a test server's loop looks for shutdown (the stdlib default, 0.5 s, is paid by
# every test that stops one).
SERVER_POLL_S = 0.02
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


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str]:
    url = create_postgres_database()
    upgrade(url)
    yield url
    drop_postgres_database(url)


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


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A clean database at the migration head, on each backend in turn."""
    if request.param == "sqlite":
        path = tmp_path / "crashreg.db"
        shutil.copy(request.getfixturevalue("migrated_sqlite"), path)
        yield f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("migrated_postgres")
        truncate_all(url)
        yield url


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, public_url="http://crashreg.test")


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    database = Database(settings.database_url)
    yield database
    database.dispose()


@pytest.fixture
def app(settings: Settings, database: Database):  # type: ignore[no-untyped-def]
    app = create_app(settings, database)
    app.config["TESTING"] = True
    return app


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    return app.test_client()


@pytest.fixture
def make_token(database: Database) -> Callable[..., str]:
    def make(scope: str, kind: str = "human", name: str | None = None) -> str:
        with database.session() as session:
            token, _ = create_token(session, name or f"{scope}-{kind}-{uuid.uuid4().hex[:6]}", scope, kind)
        return token

    return make


@pytest.fixture
def live_server(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The app on a real HTTP socket (threaded), for clients that speak HTTP."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(SERVER_POLL_S,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
