"""A database that is down gives the contract's 503 (retryable), never a 500, and recovers."""

from __future__ import annotations

import psycopg

from registry.app import create_app
from registry.config import Settings
from registry.db import Database
from tests.support.http import auth, closed_port
from tests.support.reports import crash_report


def test_unreachable_database_is_503_with_retry_after() -> None:
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/crashreg"
    settings = Settings(database_url=url)
    # Migration heads are read from the code, not the database, so the app starts while it is down.
    app = create_app(settings, Database(url, pool_pre_ping=False))
    client = app.test_client()
    response = client.post("/api/v1/reports", json=crash_report(), headers=auth("crs_x_y"))
    assert response.status_code == 503
    assert response.json["error"]["code"] == "unavailable"
    assert int(response.headers["Retry-After"]) > 0
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json["database"].startswith("unreachable")
    assert client.get("/healthz").status_code == 200


def test_requests_recover_after_the_database_drops_every_connection(client, make_token, db_url) -> None:
    token = make_token("report")
    assert client.post("/api/v1/reports", json=crash_report(), headers=auth(token)).status_code == 201
    if db_url.startswith("postgresql"):
        # What a database restart or failover does to the pool: every server connection killed.
        with psycopg.connect(db_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
    again = client.post("/api/v1/reports", json=crash_report(), headers=auth(token))
    assert again.status_code == 201
