"""Keep what Grafana reads current: the rollups, and on SQLite the reporting copy.

The queued changes are folded into the rollups (registry/rollups: the daily breakdown, the
signatures' days, captures per day, the fleet's size per day; nothing is recomputed from
history). On PostgreSQL that is all: every `rpt_*` relation is a plain view. SQLite has no
per-table privileges, so Grafana does not open the registry's file at all: it reads a copy
holding only the `rpt_*` views' rows
(`<registry file stem>-grafana.db` beside it), rebuilt aside and swapped in atomically.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from sqlalchemy.engine import make_url

from registry.db import Database
from registry.rollups.fold import fold
from sync.grafana.role import REPORTING_VIEW_PREFIX

REPORTING_COPY_SUFFIX = "-grafana"


def reporting_copy_path(database_url: str) -> Path:
    """Where the SQLite reporting copy lives: beside the registry's file."""
    path = Path(make_url(database_url).database or "crashreg.db").resolve()
    return path.with_name(f"{path.stem}{REPORTING_COPY_SUFFIX}{path.suffix or '.db'}")


def refresh_rollups(database: Database) -> list[str]:
    """Bring what Grafana reads up to date; returns the reporting copy's tables (SQLite)."""
    fold(database)
    if database.engine.dialect.name == "sqlite":
        return refresh_reporting_copy(database.url)
    return []


def refresh_reporting_copy(database_url: str) -> list[str]:
    """Rebuild the SQLite reporting copy: one table per `rpt_*` view, nothing else."""
    source = make_url(database_url).database or ""
    target = reporting_copy_path(database_url)
    staging = target.with_name(target.name + ".new")
    staging.unlink(missing_ok=True)
    connection = sqlite3.connect(source, isolation_level=None)
    try:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'view' AND name LIKE ? ORDER BY 1",
                (REPORTING_VIEW_PREFIX + "%",),
            )
        ]
        connection.execute("ATTACH DATABASE ? AS copy", (str(staging),))
        connection.execute("BEGIN")
        for name in names:
            connection.execute(f'CREATE TABLE copy."{name}" AS SELECT * FROM main."{name}"')
        connection.execute("COMMIT")
        connection.execute("DETACH DATABASE copy")
    finally:
        connection.close()
    os.replace(staging, target)
    return names
