"""Grafana's door into the database reads the reporting views and nothing else."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from registry.config import Settings
from registry.db import Database
from sync.grafana.datasource import datasource_spec, grafana_db_url
from sync.grafana.role import (
    MAX_IDENTIFIER_BYTES,
    PASSWORD_SECRET,
    RoleError,
    default_role_name,
    derived_grafana_db_url,
    ensure_readonly_role,
    reporting_views,
)
from sync.grafana.rollups import refresh_rollups
from tests.support.databases import (
    create_postgres_database,
    drop_postgres_database,
    migrated_postgres_database,
)
from tests.support.roles import drop_role

SECRET_TABLES = ("api_tokens", "reports", "jira_webhook_receipts", "events", "signatures", "app_secrets")


@pytest.fixture
def postgres_only(db_url: str) -> str:
    if not db_url.startswith("postgresql"):
        pytest.skip("roles are PostgreSQL's; the SQLite door is tested by the read-only file mode")
    return db_url


@pytest.fixture
def role_url(postgres_only: str) -> Iterator[str]:
    role = f"crashreg_grafana_{secrets.token_hex(4)}"
    url = make_url(postgres_only).set(drivername="postgresql", username=role, password=secrets.token_hex(12))
    yield url.render_as_string(hide_password=False)
    drop_role(postgres_only, role)


def connect_as(role_url: str) -> psycopg.Connection:
    return psycopg.connect(role_url, autocommit=True)


def test_role_reads_views_only_and_cannot_write(database: Database, role_url: str) -> None:
    report = ensure_readonly_role(database.engine, role_url)
    assert report.created and report.ok
    with database.engine.connect() as connection:
        views = reporting_views(connection)
    assert sorted(report.granted) == views and "rpt_events" in views

    with connect_as(role_url) as conn:
        for view in views:
            conn.execute(f"SELECT * FROM {view} LIMIT 1")
        for table in SECRET_TABLES:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT * FROM {table} LIMIT 1")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE grafana_was_here (x int)")
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TEMP TABLE scratch (x int)")
        # Read-only is a default the session may lift: privileges still stop the write.
        conn.execute("SET default_transaction_read_only = off")
        # rpt_hosts is a single-table view, so updatable: only privileges stop the write.
        for statement in ("DELETE FROM rpt_hosts", "DELETE FROM events", "UPDATE api_tokens SET name = ''"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE public.grafana_was_here (x int)")
        # PUBLIC holds TEMPORARY by default: without it taken, the session could fill temp space.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TEMP TABLE scratch AS SELECT generate_series(1, 100000) AS x")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("30s",)
        assert conn.execute("SHOW jit").fetchone() == ("off",)


def test_registry_keeps_its_temporary_tables(database: Database, role_url: str) -> None:
    """TEMPORARY is taken from PUBLIC for the role's sake; the registry (the database's owner,
    or a superuser) still makes the temporary tables its epidemiology refresh uses."""
    ensure_readonly_role(database.engine, role_url)
    with database.engine.begin() as connection:
        connection.exec_driver_sql("CREATE TEMP TABLE registry_scratch AS SELECT generate_series(1, 10) AS x")
        assert connection.exec_driver_sql("SELECT count(*) FROM registry_scratch").scalar_one() == 10
        owner = connection.exec_driver_sql(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()"
        ).scalar_one()
        assert connection.exec_driver_sql(
            f"SELECT has_database_privilege('{owner}', current_database(), 'TEMPORARY')"
        ).scalar_one()


def test_registry_user_not_owning_the_database_gets_the_dba_s_temporary_sql(postgres_only: str) -> None:
    """Only the database's owner may take TEMPORARY from PUBLIC: a registry user that is not is
    told what a DBA runs, its own grant first (its epidemiology refresh makes temporary tables)."""
    url = make_url(create_postgres_database())  # owned by the admin, as a DBA would make it
    app_role, grafana_role = (f"crashreg_{kind}_{secrets.token_hex(4)}" for kind in ("app", "grafana"))
    admin = Database(url.render_as_string(hide_password=False))
    app = Database(url.set(username=app_role, password="pw").render_as_string(hide_password=False))
    try:
        with admin.engine.begin() as connection:
            connection.exec_driver_sql(f"CREATE ROLE \"{app_role}\" LOGIN CREATEROLE PASSWORD 'pw'")
            connection.exec_driver_sql(f'GRANT CREATE ON SCHEMA public TO "{app_role}"')
        with app.engine.begin() as connection:  # the registry's migrations made its views
            connection.exec_driver_sql("CREATE VIEW rpt_hosts AS SELECT 1 AS hosts")
        grafana_url = url.set(username=grafana_role, password="pw")  # pragma: allowlist secret
        report = ensure_readonly_role(app.engine, grafana_url.render_as_string(hide_password=False))
        assert report.granted == ["rpt_hosts"] and len(report.problems) == 1
        assert f"GRANT TEMPORARY ON DATABASE {url.database} TO {app_role}; " in report.problems[0]
        assert f"REVOKE TEMPORARY ON DATABASE {url.database} FROM PUBLIC" in report.problems[0]
    finally:
        app.dispose()
        admin.dispose()
        drop_postgres_database(url.render_as_string(hide_password=False))
        for role in (grafana_role, app_role):
            drop_role(postgres_only, role)


def test_rerun_checks_and_repairs_stray_privileges(database: Database, role_url: str) -> None:
    ensure_readonly_role(database.engine, role_url)
    role = make_url(role_url).username
    with database.engine.begin() as connection:
        connection.exec_driver_sql(f'GRANT SELECT, INSERT ON api_tokens TO "{role}"')
        connection.exec_driver_sql(f'GRANT TEMPORARY ON DATABASE "{make_url(role_url).database}" TO "{role}"')
    report = ensure_readonly_role(database.engine, role_url)
    assert not report.created and report.granted == [] and report.ok
    assert report.revoked == ["api_tokens", f"TEMPORARY on database {make_url(role_url).database}"]
    with connect_as(role_url) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM api_tokens")
        conn.execute("SET default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TEMP TABLE scratch (x int)")


def test_registry_user_without_createrole_gets_instructions(database: Database, role_url: str) -> None:
    """A registry user that may not create roles is told what a DBA must run."""
    registry_role = f"crashreg_app_{secrets.token_hex(4)}"
    with database.engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE ROLE \"{registry_role}\" LOGIN PASSWORD 'pw'")
    try:
        app_url = make_url(database.url).set(username=registry_role, password="pw")
        limited = Database(app_url.render_as_string(hide_password=False))
        with pytest.raises(RoleError, match="CREATE ROLE"):
            ensure_readonly_role(limited.engine, role_url)
        limited.dispose()
    finally:
        drop_role(database.url, registry_role)


def test_privileged_role_is_refused(database: Database, role_url: str) -> None:
    role = make_url(role_url).username
    with database.engine.begin() as connection:
        connection.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN CREATEDB')
    with pytest.raises(RoleError, match="privileged"):
        ensure_readonly_role(database.engine, role_url)


def test_default_role_is_the_database_s_own() -> None:
    registry_url = "postgresql+psycopg://crashreg:registry-pw@db:5432/crashreg"
    derived = make_url(derived_grafana_db_url(registry_url, "pw"))
    assert derived.username == "crashreg_grafana_crashreg" and derived.database == "crashreg"
    assert derived.host == "db" and derived.password == "pw"  # pragma: allowlist secret
    assert make_url(derived_grafana_db_url(registry_url, None)).password is None  # the export's
    # Names PostgreSQL would cut to the same 63 bytes stay apart.
    long_names = [default_role_name("registry_of_the_fleet_" + "x" * 50 + tail) for tail in ("a", "b")]
    assert len(set(long_names)) == 2
    assert all(len(name.encode()) <= MAX_IDENTIFIER_BYTES for name in long_names)


def test_derived_url_names_the_read_replica_with_the_primary_s_role() -> None:
    """The role is made on the primary and replicated: same name and password, the replica's door."""
    registry_url = "postgresql+psycopg://crashreg:registry-pw@db:5432/crashreg"
    replica_url = "postgresql://crashreg@replica:6432/crashreg"
    on_replica = make_url(derived_grafana_db_url(registry_url, "pw", replica_url))
    on_primary = make_url(derived_grafana_db_url(registry_url, "pw"))
    assert (on_replica.host, on_replica.port, on_replica.database) == ("replica", 6432, "crashreg")
    assert (on_replica.username, on_replica.password) == (on_primary.username, on_primary.password)


@pytest.fixture
def default_role(postgres_only: str, settings: Settings) -> Iterator[str]:
    """This registry's default role, dropped after the test."""
    role = default_role_name(make_url(postgres_only).database or "")
    yield role
    drop_role(postgres_only, role)


def test_default_password_is_random_and_kept_from_grafana(
    database: Database, settings: Settings, default_role: str
) -> None:
    """Not derived from anything outside the database (a URL without its password gave it away):
    random, kept in app_secrets, which the role itself may not read."""
    door = grafana_db_url(settings, database)
    assert make_url(door).username == default_role and grafana_db_url(settings, database) == door
    password = make_url(door).password or ""
    assert len(password) == 32 and password not in settings.database_url
    assert datasource_spec(settings, database).secret == password
    assert ensure_readonly_role(database.engine, door).ok
    with connect_as(door) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT value FROM app_secrets")
    with database.engine.begin() as connection:  # the same URL, another registry's secret
        connection.execute(text("DELETE FROM app_secrets WHERE name = :n"), {"n": PASSWORD_SECRET})
    assert make_url(grafana_db_url(settings, database)).password not in (None, password)


def role_password_hash(database_url: str, role: str) -> str:
    with psycopg.connect(make_url(database_url).render_as_string(hide_password=False)) as conn:
        return conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)).fetchone()[0]


def test_two_registries_on_one_server_keep_their_own_roles(
    database: Database, settings: Settings, default_role: str, role_url: str
) -> None:
    """Roles are the server's: a second registry (another database) provisioning every 5 minutes
    must not reset the first one's password, nor take a role the first one made."""
    first = grafana_db_url(settings, database)
    assert ensure_readonly_role(database.engine, first).ok
    ensure_readonly_role(database.engine, role_url)  # a role this registry was told to use
    first_hash = role_password_hash(settings.database_url, default_role)
    with migrated_postgres_database() as other_url:
        other = Database(other_url)
        other_settings = Settings(database_url=other_url)
        second = grafana_db_url(other_settings, other)
        try:
            assert make_url(second).username != default_role
            assert ensure_readonly_role(other.engine, second).ok
            assert role_password_hash(settings.database_url, default_role) == first_hash
            assert ensure_readonly_role(database.engine, first).ok  # and back: neither moves
            assert role_password_hash(other_url, make_url(second).username or "") != first_hash
            taken = make_url(role_url).set(database=make_url(other_url).database)
            with pytest.raises(RoleError, match="another registry"):
                ensure_readonly_role(other.engine, taken.render_as_string(hide_password=False))
        finally:
            other.dispose()
            drop_role(other_url, make_url(second).username or "")


def test_sqlite_data_source_reads_a_copy_of_the_views_only(db_url: str, database: Database) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("the SQLite data source")
    with database.session() as session:
        session.execute(
            text("INSERT INTO app_secrets (name, value, created_at) VALUES ('k', 's', '2026-11-29')")
        )
    refresh_rollups(database)
    spec = datasource_spec(Settings(database_url=db_url))
    options = spec.body["jsonData"]
    dsn = f"{options['pathPrefix']}{options['path']}?{options['pathOptions']}"
    conn = sqlite3.connect(dsn, uri=True)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "rpt_events" in tables and all(name.startswith("rpt_") for name in tables)
    assert conn.execute("SELECT COUNT(*) FROM rpt_events").fetchone() == (0,)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM rpt_events")
    conn.close()
