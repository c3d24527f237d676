"""Shared fixtures: every database test runs on SQLite and PostgreSQL, over real connections.

Each backend is migrated once per test session through Alembic (the only way the schema is
made); each test then gets a clean copy: a copied file on SQLite, truncated tables on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from werkzeug.serving import make_server

from registry.app import create_app
from registry.auth.tokens import create_token
from registry.config import DumpStoreSettings, Settings, SymbolSettings
from registry.db import Database
from registry.migrate import upgrade
from tests.support.databases import (
    BACKENDS,
    drop_abandoned_databases,
    migrated_postgres_database,
    truncate_all,
)
from tests.support.http import SERVER_POLL_S

# fixtures shared beyond one folder
pytest_plugins = ["tests.support.agents", "tests.support.cores", "tests.support.grafana"]
LAB = Path(__file__).resolve().parent / "lab"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Once a run (not in each xdist worker): drop the databases a killed run left behind."""
    if "postgresql" in BACKENDS and not hasattr(session.config, "workerinput"):
        with contextlib.suppress(psycopg.OperationalError):  # down: its tests say so themselves
            drop_abandoned_databases()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first: the lab's, then those with a test marked slow. Under `make test`
    (`-n 2 --dist loadfile --no-loadscope-reorder`) each then starts early on a worker and
    overlaps the rest of the suite, and the many short files at the end keep both workers busy
    to the finish, instead of one worker running a long file alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        return 0 if LAB in Path(item.path).resolve().parents else 1 if item.path in slow else 2

    items.sort(key=rank)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str]:
    with migrated_postgres_database() as url:
        yield url


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
def settings(db_url: str, tmp_path: Path) -> Settings:
    """The test's registry; its dump store and symbol cache directories of the test's own."""
    return Settings(database_url=db_url, public_url="http://crashreg.test",
                    dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")),
                    symbols=SymbolSettings(cache_dir=str(tmp_path / "symbols")))


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

