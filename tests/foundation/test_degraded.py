"""A database that is down gives the contract's 503 (retryable), never a 500, and recovers."""

from __future__ import annotations

from contextlib import ExitStack

import psycopg
import pytest

import registry.db
from registry.app import create_app
from registry.config import Settings
from registry.db import Database
from testkit.reports import crash_report
from tests.support.http import auth, closed_port


def test_unreachable_database_is_503_with_retry_after() -> None:
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/crashreg"
    settings = Settings(database_url=url)
    # Migration heads are read from the code, not the database, so the app starts while it is down.
    app = create_app(settings, Database(url))
    client = app.test_client()
    response = client.post("/api/v1/reports", json=crash_report(), headers=auth("crs_x_y"))
    assert response.status_code == 503
    assert response.json["error"]["code"] == "unavailable"
    assert int(response.headers["Retry-After"]) > 0
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json["database"].startswith("unreachable")
    assert client.get("/healthz").status_code == 200


def drop_every_connection(db_url: str) -> None:
    """What a database restart or failover does to the pool: every server connection killed."""
    with psycopg.connect(db_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1


# "idle": the pool pings a connection that sat idle and replaces it; "busy": a connection used
# a moment ago fails its first statement, and ingest retries its transaction on a new one.
IDLE_PING = {"idle": 0.0, "busy": float("inf")}


@pytest.mark.parametrize("pool", IDLE_PING)
def test_reports_are_stored_after_the_database_drops_every_connection(
    client, make_token, db_url, monkeypatch, pool
) -> None:
    token = make_token("report")
    assert client.post("/api/v1/reports", json=crash_report(), headers=auth(token)).status_code == 201
    if db_url.startswith("postgresql"):
        monkeypatch.setattr(registry.db, "PING_AFTER_IDLE_S", IDLE_PING[pool])
        drop_every_connection(db_url)
    again = client.post("/api/v1/reports", json=crash_report(), headers=auth(token))
    assert again.status_code == 201
    assert again.json["duplicate"] is False


def test_reads_after_the_database_drops_every_connection(client, make_token, db_url, monkeypatch) -> None:
    token = make_token("read")
    assert client.get("/api/v1/signatures", headers=auth(token)).status_code == 200
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no server to restart")
    monkeypatch.setattr(registry.db, "PING_AFTER_IDLE_S", 0.0)
    drop_every_connection(db_url)
    assert client.get("/api/v1/signatures", headers=auth(token)).status_code == 200  # idle: pinged
    monkeypatch.setattr(registry.db, "PING_AFTER_IDLE_S", float("inf"))
    drop_every_connection(db_url)
    busy = client.get("/api/v1/signatures", headers=auth(token))
    assert busy.status_code == 503 and int(busy.headers["Retry-After"]) > 0  # retryable, not a 500
    assert client.get("/api/v1/signatures", headers=auth(token)).status_code == 200  # pool replaced


def backend_pid(database: registry.db.Database) -> int:
    with database.autocommit() as connection:
        return int(connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def test_the_kept_autocommit_connection_is_reused_replaced_and_closed(database, db_url, monkeypatch) -> None:
    """Ingest's connection kept in autocommit mode: the next use gets the same server
    connection; one that sat idle and lost its server is pinged and replaced; dispose closes it."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite keeps no autocommit connection")
    first = backend_pid(database)
    assert backend_pid(database) == first
    monkeypatch.setattr(registry.db, "PING_AFTER_IDLE_S", 0.0)
    drop_every_connection(db_url)
    assert backend_pid(database) != first
    with database.autocommit() as connection:
        kept = connection.connection.driver_connection
    database.dispose()
    assert kept.closed


def test_kept_autocommit_connections_plan_generically_the_pool_as_by_default(database, db_url) -> None:
    """Ingest's statements are key lookups planned once (a report's foreign key check into the
    partitioned events was planned afresh each time); a connection beyond the ones kept goes
    back to the pool, for sessions, planning as PostgreSQL's default does."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite keeps no autocommit connection")
    kept = database._autocommit_kept
    with ExitStack() as stack:
        connections = [stack.enter_context(database.autocommit()) for _ in range(kept + 1)]
        modes = {c.exec_driver_sql("SHOW plan_cache_mode").scalar_one() for c in connections}
        returned = connections[0].connection.driver_connection  # the last given back: beyond the kept
    assert modes == {"force_generic_plan"}
    assert returned.execute("SHOW plan_cache_mode").fetchone() == ("auto",)
    with database.autocommit() as connection:
        assert connection.exec_driver_sql("SHOW plan_cache_mode").scalar_one() == "force_generic_plan"
