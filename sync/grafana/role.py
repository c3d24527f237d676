"""Grafana's read-only PostgreSQL role: SELECT on the reporting views, nothing else.

Grafana runs whatever SQL a dashboard editor types, so its data source logs in as a role
that can read the `rpt_*` views only (never tokens, webhook secrets, raw reports or any
table), whose sessions are read-only by default, and whose statements are time-limited.
The registry's database user creates the role when it may (CREATEROLE); otherwise the role
must exist and is checked, and every problem is reported with the SQL a DBA can run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine, make_url

from registry.core.secrets import shared_secret
from registry.db import Database

REPORTING_VIEW_PREFIX = "rpt_"
DEFAULT_ROLE_PREFIX = "crashreg_grafana_"
# The name of the app_secrets row holding the role's password (a table the role may not read).
PASSWORD_SECRET = "grafana_role_password"  # pragma: allowlist secret
STATEMENT_TIMEOUT = "30s"
MAX_IDENTIFIER_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are cut without error
# A role crashreg made says whose it is, so that a second registry on the server never takes it.
OWNER_COMMENT = "crashreg: Grafana's read-only role of database "


class RoleError(RuntimeError):
    """The role cannot be made safe with the registry user's privileges."""


@dataclass
class RoleReport:
    role: str
    created: bool = False
    granted: list[str] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def default_role_name(database: str) -> str:
    """`crashreg_grafana_<database>`: roles are the server's, databases are not, so each registry
    on a server has its own (one shared role had its password reset by each in turn). A name
    too long for PostgreSQL keeps its start and ends in a digest of the whole database name."""
    name = f"{DEFAULT_ROLE_PREFIX}{database}"
    if len(name.encode()) <= MAX_IDENTIFIER_BYTES:
        return name
    digest = hashlib.sha256(database.encode()).hexdigest()[:8]
    start = name.encode()[: MAX_IDENTIFIER_BYTES - len(digest) - 1].decode(errors="ignore")
    return f"{start}_{digest}"


def role_password(database: Database) -> str:
    """The default role's password: random, made on first use and kept in the registry's
    `app_secrets`, which only the registry reads (the role is refused every table). Nothing
    anyone can learn outside the database (a URL, a host name) gives it away."""
    with database.session() as session:
        return shared_secret(session, PASSWORD_SECRET)[:32]


def derived_grafana_db_url(
    database_url: str, password: str | None, read_database_url: str | None = None
) -> str:
    """CRASHREG_GRAFANA_DB_URL's default: the registry's database as its own
    `crashreg_grafana_<database>`, with `password` (`role_password`; None where it is not
    needed, as in the export, which never writes it), on the read replica when there is one
    (CRASHREG_READ_DATABASE_URL: the role, made on the primary, is replicated with the rest)."""
    door = make_url(read_database_url or database_url)
    url = URL.create(
        "postgresql",
        username=default_role_name(make_url(database_url).database or ""),
        password=password,  # never the registry's own, which URL.set(password=None) would keep
        host=door.host,
        port=door.port,
        database=door.database,
        query=door.query,
    )
    return url.render_as_string(hide_password=False)


def reporting_views(connection: Connection) -> list[str]:
    """The `rpt_*` views of the current schema (materialized ones too: none is left since 0037)."""
    rows = connection.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('v', 'm') "
            "AND c.relname LIKE :prefix ORDER BY 1"
        ),
        {"prefix": REPORTING_VIEW_PREFIX + "%"},
    )
    return [row[0] for row in rows]


def _quote_ident(connection: Connection, name: str) -> str:
    return connection.execute(text("SELECT quote_ident(:n)"), {"n": name}).scalar_one()


def _quote_literal(connection: Connection, value: str) -> str:
    return connection.execute(text("SELECT quote_literal(:v)"), {"v": value}).scalar_one()


def _other_relations_readable(connection: Connection, role: str) -> list[str]:
    """Tables and views outside the reporting views on which the role holds any privilege."""
    rows = connection.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p') "
            "AND c.relname NOT LIKE :prefix "
            "AND has_table_privilege(:role, c.oid, "
            "'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER') ORDER BY 1"
        ),
        {"prefix": REPORTING_VIEW_PREFIX + "%", "role": role},
    )
    return [row[0] for row in rows]


def ensure_readonly_role(engine: Engine, grafana_db_url: str) -> RoleReport:
    """Create (when permitted) or check the role of `grafana_db_url`; grant views only."""
    url = make_url(grafana_db_url)
    role = url.username or default_role_name(url.database or "")
    report = RoleReport(role)
    with engine.begin() as connection:
        me = connection.execute(
            text("SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user")
        ).one()
        may_manage = bool(me.rolsuper or me.rolcreaterole)
        existing = connection.execute(
            text(
                "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = :r"
            ),
            {"r": role},
        ).one_or_none()
        ident = _quote_ident(connection, role)
        if existing is None:
            if not may_manage:
                raise RoleError(
                    f"role {role} does not exist and the registry's database user may not create "
                    f"roles; as a DBA run: CREATE ROLE {ident} LOGIN PASSWORD '...'; then set "
                    "CRASHREG_GRAFANA_DB_URL to its URL with that password and run "
                    "`crashreg grafana provision` again"
                )
            password = _quote_literal(connection, url.password or "")
            connection.execute(text(f"CREATE ROLE {ident} LOGIN PASSWORD {password}"))
            report.created = True
        elif existing.rolsuper or existing.rolbypassrls or existing.rolcreaterole or existing.rolcreatedb:
            raise RoleError(f"role {role} is privileged (superuser, bypassrls, createrole or createdb)")
        here = connection.execute(text("SELECT current_database()")).scalar_one()
        database = url.database or here
        if may_manage:
            _claim(connection, role, ident, here)
            if not report.created and url.password:
                password = _quote_literal(connection, url.password)
                connection.execute(text(f"ALTER ROLE {ident} LOGIN PASSWORD {password}"))
            connection.execute(text(f"ALTER ROLE {ident} SET default_transaction_read_only = on"))
            connection.execute(text(f"ALTER ROLE {ident} SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
            # Dashboard queries are short: JIT compilation would cost more than it saves.
            connection.execute(text(f"ALTER ROLE {ident} SET jit = off"))
        _grant_views_only(connection, role, ident, database, report)
        _revoke_temporary(connection, role, ident, database, report)
        _check_read_only_default(connection, role, report)
    return report


def _claim(connection: Connection, role: str, ident: str, database: str) -> None:
    """Mark the role as this database's registry's, or refuse one another registry marked:
    resetting its password would lock that registry's Grafana out at every run."""
    comment = connection.execute(
        text("SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = :r"), {"r": role}
    ).scalar_one()
    mine = OWNER_COMMENT + database
    if comment and comment.startswith(OWNER_COMMENT) and comment != mine:
        raise RoleError(
            f"role {role} is the Grafana role of another registry ({comment.removeprefix(OWNER_COMMENT)} "
            "on the same server); set CRASHREG_GRAFANA_DB_URL to a role of this registry's own"
        )
    if comment is None:
        connection.execute(text(f"COMMENT ON ROLE {ident} IS {_quote_literal(connection, mine)}"))


def _grant_views_only(
    connection: Connection, role: str, ident: str, database: str, report: RoleReport
) -> None:
    connection.execute(text(f"GRANT CONNECT ON DATABASE {_quote_ident(connection, database)} TO {ident}"))
    connection.execute(text(f"GRANT USAGE ON SCHEMA {_quote_ident(connection, 'public')} TO {ident}"))
    for view in reporting_views(connection):
        if not connection.execute(
            text("SELECT has_table_privilege(:r, :v, 'SELECT')"), {"r": role, "v": view}
        ).scalar_one():
            connection.execute(text(f"GRANT SELECT ON {_quote_ident(connection, view)} TO {ident}"))
            report.granted.append(view)
    for relation in _other_relations_readable(connection, role):
        connection.execute(text(f"REVOKE ALL ON {_quote_ident(connection, relation)} FROM {ident}"))
        report.revoked.append(relation)
    still = _other_relations_readable(connection, role)
    if still:
        report.problems.append(
            f"role {role} can still reach {', '.join(still)} (granted to PUBLIC or a parent role)"
        )


def _revoke_temporary(
    connection: Connection, role: str, ident: str, database: str, report: RoleReport
) -> None:
    """No temporary tables: a session that lifts its read-only default could fill the server's
    disk with them. PUBLIC holds TEMPORARY by default and one member of PUBLIC cannot be left
    out, so it is taken from PUBLIC when the registry's user may (owner or superuser): the
    owner keeps it as owner, so the registry's own temporary tables (epidemiology) still work.
    """
    quoted_database = _quote_ident(connection, database)
    if connection.execute(
        text(
            "SELECT EXISTS (SELECT 1 FROM aclexplode(d.datacl) a "
            "WHERE a.grantee = r.oid AND a.privilege_type = 'TEMPORARY') "
            "FROM pg_database d, pg_roles r WHERE d.datname = :d AND r.rolname = :r"
        ),
        {"d": database, "r": role},
    ).scalar_one():
        connection.execute(text(f"REVOKE TEMPORARY ON DATABASE {quoted_database} FROM {ident}"))
        report.revoked.append(f"TEMPORARY on database {database}")
    may_revoke_from_public = connection.execute(
        text(
            "SELECT r.rolsuper OR pg_has_role(current_user, d.datdba, 'USAGE') "
            "FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = :d"
        ),
        {"d": database},
    ).scalar_one()
    public_temporary = "SELECT has_database_privilege('public', :d, 'TEMPORARY')"
    if may_revoke_from_public and connection.execute(text(public_temporary), {"d": database}).scalar_one():
        connection.execute(text(f"REVOKE TEMPORARY ON DATABASE {quoted_database} FROM PUBLIC"))
        report.revoked.append(f"TEMPORARY on database {database} from PUBLIC")
    if connection.execute(
        text("SELECT has_database_privilege(:r, :d, 'TEMPORARY')"), {"r": role, "d": database}
    ).scalar_one():
        me = connection.execute(text("SELECT quote_ident(current_user)")).scalar_one()
        report.problems.append(
            f"role {role} may create temporary tables in {database} (TEMPORARY granted to PUBLIC "
            f"or a parent role); as a DBA (the registry keeps its own) run: "
            f"GRANT TEMPORARY ON DATABASE {quoted_database} TO {me}; "
            f"REVOKE TEMPORARY ON DATABASE {quoted_database} FROM PUBLIC"
        )


def _check_read_only_default(connection: Connection, role: str, report: RoleReport) -> None:
    settings = connection.execute(
        text(
            "SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
            "WHERE r.rolname = :r AND s.setdatabase = 0"
        ),
        {"r": role},
    ).scalar_one_or_none()
    if "default_transaction_read_only=on" not in (settings or []):
        report.problems.append(
            f"role {role} is not read-only by default; as a DBA run: "
            f"ALTER ROLE {role} SET default_transaction_read_only = on"
        )
