"""A table reporters write, locked by an operator's statement (an ALTER TABLE, LOCK TABLE, VACUUM
FULL, a migration): their requests wait CRASHREG_INGEST_LOCK_WAIT_S at most, then answer the
retryable 503 naming the lock, with nothing stored; the same request once the lock is gone is
stored once. Other connections (pages, jobs, the CLI) still wait as long as a lock is held."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from flask.testing import FlaskClient
from sqlalchemy import text

from registry.app import create_app
from registry.config import Settings
from registry.db import Database
from testkit.reports import crash_report
from tests.support.capture import storm_report
from tests.support.http import auth

LOCK_WAIT_S = 0.2
# The holder of a lock ends its transaction by itself after this: code that waits without bound
# then fails the test instead of hanging it.
HOLDER_GIVES_UP = "30s"
# What a report of a new bug writes (PostgreSQL locks one table; SQLite the whole database).
REPORT_TABLES = ("events", "reports", "hosts", "signatures", "signature_counters", "capture_slots")


@pytest.fixture
def bounded(settings: Settings) -> Iterator[FlaskClient]:
    """The registry as gunicorn serves it (create_app makes its database), lock waits bounded short."""
    app = create_app(replace(settings, ingest_lock_wait_s=LOCK_WAIT_S))
    yield app.test_client()
    app.extensions["crashreg.db"].dispose()


@contextmanager
def locked(db_url: str, table: str) -> Iterator[None]:
    """`table` locked as an operator's statement locks it, until the block ends: on PostgreSQL
    ACCESS EXCLUSIVE (what ALTER TABLE and VACUUM FULL take), on SQLite the database's write lock."""
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url) as holder:
            holder.execute(f"SET idle_in_transaction_session_timeout = '{HOLDER_GIVES_UP}'")
            holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            yield
        return
    holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        holder.execute(f"PRAGMA busy_timeout = {int(HOLDER_GIVES_UP[:-1]) * 1000}")
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.close()


def counts(database: Database, tables: tuple[str, ...]) -> dict[str, int]:
    with database.session() as session:
        return {
            table: session.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() for table in tables
        }


def assert_refused_for_the_lock(response: Any) -> None:
    assert response.status_code == 503, response.json
    assert int(response.headers["Retry-After"]) > 0
    assert response.json["error"]["code"] == "unavailable"
    assert "locked" in response.json["error"]["message"]


@pytest.mark.parametrize("table", REPORT_TABLES)
def test_a_report_of_a_new_bug_waits_no_longer_than_the_bound(
    bounded, make_token, database, db_url, table
) -> None:
    """A new bug's report takes every step of a transaction (PostgreSQL: the read in autocommit,
    then `store`'s transaction); it rolls back whole."""
    if db_url.startswith("sqlite") and table != REPORT_TABLES[0]:
        pytest.skip("SQLite locks the database, not a table: one case says it")
    token, report = make_token("report"), crash_report()
    with locked(db_url, table):
        assert_refused_for_the_lock(bounded.post("/api/v1/reports", json=report, headers=auth(token)))
    assert counts(database, REPORT_TABLES) == dict.fromkeys(REPORT_TABLES, 0)
    stored = bounded.post("/api/v1/reports", json=report, headers=auth(token))
    assert stored.status_code == 201 and stored.json["duplicate"] is False
    assert counts(database, ("events", "reports")) == {"events": 1, "reports": 1}


def test_the_storm_s_one_statement_waits_no_longer_than_the_bound(
    bounded, make_token, database, db_url
) -> None:
    """A known bug's report with every capture slot held: on PostgreSQL the one statement on the
    connection ingest keeps in autocommit mode, planned on the worker's last read of the bug."""
    token = make_token("report")
    for _ in range(5):  # K = 3 full captures, then skips: the worker has read the bug
        answer = bounded.post("/api/v1/reports", json=storm_report("locked_tables"), headers=auth(token))
        assert answer.status_code == 201
    assert answer.json["capture"]["action"] == "skip"
    before, report = counts(database, REPORT_TABLES), storm_report("locked_tables")
    with locked(db_url, "events"):
        assert_refused_for_the_lock(bounded.post("/api/v1/reports", json=report, headers=auth(token)))
    assert counts(database, REPORT_TABLES) == before
    stored = bounded.post("/api/v1/reports", json=report, headers=auth(token))
    assert (stored.status_code, stored.json["capture"]["action"]) == (201, "skip")
    again = bounded.post("/api/v1/reports", json=report, headers=auth(token))
    assert (again.status_code, again.json["duplicate"]) == (200, True)
    assert counts(database, ("events", "reports")) == {"events": 6, "reports": 6}


# A reporter's writes after its report (agents/: the capture's record and status, the cores a
# core handler removed, a dump upload's start): (method, path, body, the table it writes).
CAPTURE_WRITES = {
    "record a capture": (
        "post",
        "/api/v1/events/{event}/captures",
        {"method": "makedumpfile", "status": "started", "capture_key": "kdump-2"},
        "captures",
    ),
    "its status": ("patch", "/api/v1/captures/{capture}", {"status": "completed"}, "captures"),
    "cores removed": (
        "post",
        "/api/v1/captures/removed",
        {"capture_keys": ["kdump-1"], "reason": "directory cap"},
        "captures",
    ),
    "upload start": ("post", "/api/v1/captures/{capture}/upload", {"bytes": 4096}, "dumps"),
}


@pytest.mark.parametrize("write", CAPTURE_WRITES)
def test_a_reporter_s_capture_writes_wait_no_longer_than_the_bound(
    bounded, make_token, db_url, write
) -> None:
    token = make_token("report")
    event = bounded.post("/api/v1/reports", json=crash_report(), headers=auth(token)).json["event_id"]
    capture = bounded.post(
        f"/api/v1/events/{event}/captures",
        headers=auth(token),
        json={"method": "makedumpfile", "status": "started", "capture_key": "kdump-1"},
    ).json["id"]
    method, path, body, table = CAPTURE_WRITES[write]
    send = getattr(bounded, method)
    url = path.format(event=event, capture=capture)
    with locked(db_url, table):
        assert_refused_for_the_lock(send(url, json=body, headers=auth(token)))
    assert send(url, json=body, headers=auth(token)).status_code in (200, 201)


# What a connection's lock wait reads as: (a reporter's, any other's) with LOCK_WAIT_S.
LOCK_WAITS = {
    "postgresql": ("SHOW lock_timeout", ("200ms", "0")),
    "sqlite": ("PRAGMA busy_timeout", (200, 30000)),
}


def test_only_reporters_connections_give_up_waiting(bounded, database) -> None:
    """The app's other sessions (pages, its jobs' reads) and a Database made without the bound
    (the CLI's, migrations', the partitions and archive jobs') wait as long as a lock is held."""
    served = bounded.application.extensions["crashreg.db"]
    show, (reporters, others) = LOCK_WAITS[database.engine.dialect.name]

    def wait_of(sessions: Any) -> Any:
        with sessions as session:
            return session.execute(text(show)).scalar_one()

    assert wait_of(served.session(bounded=True)) == wait_of(served.lookup(bounded=True)) == reporters
    assert wait_of(served.session()) == wait_of(served.lookup()) == wait_of(database.session()) == others
    if database.engine.dialect.name == "postgresql":  # ingest's connection kept in autocommit mode
        with served.autocommit() as connection:
            assert connection.exec_driver_sql(show).scalar_one() == reporters
