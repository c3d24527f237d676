"""Fixtures for the Grafana tests: the emulator, settings pointing at it (and at a throwaway
read-only role on PostgreSQL), SQL run the way Grafana's data source reaches the database, and
an alert rule in Grafana's shape."""

from __future__ import annotations

import copy
import dataclasses
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from sqlalchemy.engine import make_url

from registry.cli import main
from registry.config import GrafanaSettings, Settings
from registry.db import Database
from sync.grafana.role import ensure_readonly_role
from sync.grafana.rollups import reporting_copy_path
from tests.emulators.grafana import RunningGrafana, serve_grafana
from tests.support.roles import drop_role

Runner = Callable[[str], tuple[list[str], list[tuple[Any, ...]]]]


@pytest.fixture
def grafana() -> Iterator[RunningGrafana]:
    with serve_grafana() as running:
        yield running


@pytest.fixture
def grafana_settings(settings: Settings, grafana: RunningGrafana) -> Iterator[Settings]:
    """Settings pointing at the emulator; on PostgreSQL, a uniquely named read-only role."""
    role = f"crashreg_grafana_{secrets.token_hex(4)}"
    grafana_db_url = None
    if settings.database_url.startswith("postgresql"):
        url = make_url(settings.database_url)
        grafana_db_url = url.set(username=role, password=secrets.token_hex(12)).render_as_string(
            hide_password=False
        )
    yield dataclasses.replace(
        settings, grafana=GrafanaSettings(url=grafana.url, token=grafana.token, db_url=grafana_db_url)
    )
    if grafana_db_url:
        drop_role(settings.database_url, role)


@pytest.fixture
def read_only(db_url: str, database: Database) -> Iterator[Runner]:
    """Run SQL the way Grafana's data source would reach the database."""
    if db_url.startswith("sqlite"):
        # The reporting copy the data source opens (refreshed by load_fleet, as the job does),
        # opened afresh each query: a refresh replaces the file.
        def run_sqlite(sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
            conn = sqlite3.connect(f"file:{reporting_copy_path(db_url)}?mode=ro", uri=True)
            try:
                cursor = conn.execute(sql)
                return [c[0] for c in cursor.description], cursor.fetchall()
            finally:
                conn.close()

        yield run_sqlite
        return
    role = f"crashreg_grafana_{secrets.token_hex(4)}"
    role_url = make_url(db_url).set(drivername="postgresql", username=role, password=secrets.token_hex(12))
    ensure_readonly_role(database.engine, role_url.render_as_string(hide_password=False))
    conn = psycopg.connect(role_url.render_as_string(hide_password=False), autocommit=True)

    def run_postgres(sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        cursor = conn.execute(sql)
        return [c.name for c in cursor.description or []], cursor.fetchall()

    yield run_postgres
    conn.close()
    drop_role(db_url, role)


def dialect_of(db_url: str) -> str:
    return "sqlite" if db_url.startswith("sqlite") else "postgresql"


def run_cli(monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]) -> Result:
    """`crashreg ARGS` with `env` set."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return CliRunner().invoke(main, args)


FOLDER = "alerts"
SQL_QUERY = {
    "refId": "A",
    "relativeTimeRange": {"from": 600, "to": 0},
    "datasourceUid": "some-postgres",
    "model": {"refId": "A", "rawSql": "SELECT 1 AS value", "format": "table"},
}
THRESHOLD = {
    "refId": "B",
    "datasourceUid": "__expr__",
    "model": {
        "refId": "B",
        "type": "threshold",
        "expression": "A",
        "conditions": [{"evaluator": {"type": "gt", "params": [0]}}],
    },
}


def alert_rule(uid: str, title: str, group: str = "g1", **extra: Any) -> dict[str, Any]:
    """An alert rule in Grafana's provisioning shape (a SQL query and a threshold on it)."""
    return {
        "uid": uid,
        "orgID": 1,
        "folderUID": FOLDER,
        "ruleGroup": group,
        "title": title,
        "condition": "B",
        "data": [copy.deepcopy(SQL_QUERY), copy.deepcopy(THRESHOLD)],
        "noDataState": "NoData",
        "execErrState": "Error",
        "for": "300s",
        **extra,
    }
