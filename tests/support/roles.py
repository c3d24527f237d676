"""Cleaning up the PostgreSQL roles the Grafana tests create."""

from __future__ import annotations

import psycopg
from sqlalchemy.engine import make_url

from tests.support.databases import POSTGRES_ADMIN_URL


def drop_role(database_url: str, role: str) -> None:
    url = make_url(database_url).set(drivername="postgresql")
    admin = make_url(POSTGRES_ADMIN_URL).set(database=url.database)
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if exists:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
