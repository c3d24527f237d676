"""The Grafana data source crashreg provisions: its database, seen through a read-only door.

PostgreSQL: Grafana's core `grafana-postgresql-datasource`, logging in as the read-only role
of CRASHREG_GRAFANA_DB_URL (password in `secureJsonData`, never readable back). SQLite (the
embedded default): the frser-sqlite-datasource plugin opening, read-only, the reporting copy
that holds the `rpt_*` views' rows and nothing else (sync.grafana.rollups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import make_url

from dashboards.dialects import POSTGRES_DATASOURCE_UID, SQLITE_DATASOURCE_UID
from registry.config import Settings
from registry.db import Database
from sync.grafana.role import derived_grafana_db_url, role_password
from sync.grafana.rollups import reporting_copy_path

DATASOURCE_NAME = "crashreg"


@dataclass(frozen=True)
class DataSourceSpec:
    """What Grafana should hold; `secret` goes to secureJsonData only."""

    body: dict[str, Any]
    secret: str | None

    @property
    def uid(self) -> str:
        return self.body["uid"]

    def request(self) -> dict[str, Any]:
        """The create/update body, with the secret in the write-only secureJsonData."""
        body = dict(self.body)
        if self.secret is not None:
            body["secureJsonData"] = {"password": self.secret}
        return body


def dialect_name(settings: Settings) -> str:
    return "sqlite" if settings.database_url.startswith("sqlite") else "postgresql"


def grafana_db_url(settings: Settings, database: Database | None = None) -> str:
    """CRASHREG_GRAFANA_DB_URL, else this registry's own role, its password read from (or made
    in) `database`; without one (the export never writes the password) the URL has none."""
    if settings.grafana.db_url:
        return settings.grafana.db_url
    password = role_password(database) if database is not None else None
    return derived_grafana_db_url(settings.database_url, password, settings.read_replica.url)


def datasource_spec(settings: Settings, database: Database | None = None) -> DataSourceSpec:
    if dialect_name(settings) == "sqlite":
        return DataSourceSpec(
            {
                "uid": SQLITE_DATASOURCE_UID,
                "name": DATASOURCE_NAME,
                "type": "frser-sqlite-datasource",
                "access": "proxy",
                "isDefault": False,
                "jsonData": {
                    "path": str(reporting_copy_path(settings.database_url)),
                    "pathPrefix": "file:",
                    "pathOptions": "mode=ro",
                },
            },
            secret=None,
        )
    url = make_url(grafana_db_url(settings, database))
    port = url.port or 5432
    return DataSourceSpec(
        {
            "uid": POSTGRES_DATASOURCE_UID,
            "name": DATASOURCE_NAME,
            "type": "grafana-postgresql-datasource",
            "access": "proxy",
            "isDefault": False,
            "url": f"{url.host or 'localhost'}:{port}",
            "user": url.username,
            "jsonData": {
                "database": url.database,
                "sslmode": url.query.get("sslmode", "disable"),
                "postgresVersion": 1500,
                "timescaledb": False,
                "maxOpenConns": 10,
                "connMaxLifetime": 14400,
            },
        },
        secret=url.password or "",
    )
