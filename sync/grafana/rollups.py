"""Refresh the daily rollups Grafana's daily panels read (PostgreSQL materialized views).

CONCURRENTLY: Grafana keeps reading the previous contents while a refresh runs. On SQLite
the rollups are plain views and there is nothing to refresh.
"""

from __future__ import annotations

from sqlalchemy import text

from registry.db import Database
from sync.grafana.role import REPORTING_VIEW_PREFIX


def refresh_rollups(database: Database) -> list[str]:
    """Refresh every `rpt_*` materialized view; returns their names."""
    if database.engine.dialect.name != "postgresql":
        return []
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        names = list(
            connection.execute(
                text(
                    "SELECT matviewname FROM pg_matviews WHERE schemaname = current_schema() "
                    "AND matviewname LIKE :prefix ORDER BY 1"
                ),
                {"prefix": REPORTING_VIEW_PREFIX + "%"},
            ).scalars()
        )
        for name in names:
            connection.execute(text(f'REFRESH MATERIALIZED VIEW CONCURRENTLY "{name}"'))
    return names
