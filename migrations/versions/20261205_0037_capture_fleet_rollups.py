"""the captures' and the fleet's daily rollups kept current by folding queues of changes

`rpt_capture_daily` and `rpt_fleet_daily`, the last materialized views a refresh recomputed
from every capture joined to its event and every host (every 5 minutes, ~75 s at 10 M
events), become plain views over rollup tables kept current as 0033's are: triggers queue each
counted change (`rollup_capture_changes`: a capture counted in or out with its event's crash
day, decision and memory; `rollup_host_changes`: a host's first sighting and retirement; the
fleet's crash days come from 0033's `rollup_changes`), and the scheduler's rollups job folds
the queues. Same columns; the views' grants are carried over.

No long lock: on PostgreSQL the triggers are made in one short transaction (hosts, events and
captures locked at once, SHARE ROW EXCLUSIVE, for the DDL's milliseconds) and the views swapped
in another, each waiting at most 500 ms for its locks and tried again (so a writer caught in a
lock cycle with it is never the deadlock's victim). `rollup_backfills` names what to build (`rollups`): the next fold
builds the captures' and the fleet's rollups from the database in one snapshot, leaving the
events' rollups (and what archived events left in them) as they are.

Revision ID: 0037_capture_fleet_rollups
Revises: 0036_named_build_ids
Create Date: 2026-12-05 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection

from registry.partitions import in_short_transaction

revision: str = "0037_capture_fleet_rollups"
down_revision: str | Sequence[str] | None = "0036_named_build_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

QUEUE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# A capture as counted: its event's columns (e), its own (c).
CAPTURE_QUEUED = ("delta", "crashed_at", "capture_action", "memory_gb", "status", "bytes", "duration_s",
                  "downtime_s")
EVENT_COUNTED = ("crashed_at", "capture_action", "memory_gb")
CAPTURE_COUNTED = ("status", "bytes", "duration_s", "downtime_s")


def _capture_enqueue(delta: int, event: str, capture: str, source: str) -> str:
    values = ", ".join((str(delta), *(f"{event}.{c}" for c in EVENT_COUNTED),
                        *(f"{capture}.{c}" for c in CAPTURE_COUNTED)))
    return f"INSERT INTO rollup_capture_changes ({', '.join(CAPTURE_QUEUED)}) SELECT {values} FROM {source};"


def _of_event(row: str) -> str:
    """A capture row's event (none once the event is deleted: its own trigger counted it out)."""
    return _capture_enqueue(1 if row == "NEW" else -1, "e", row, f"events e WHERE e.id = {row}.event_id")


def _of_captures(row: str) -> str:
    """An event row's captures."""
    return _capture_enqueue(1 if row == "NEW" else -1, row, "c", f"captures c WHERE c.event_id = {row}.id")


def _host_enqueue(row: str) -> str:
    delta = 1 if row == "NEW" else -1
    return (f"INSERT INTO rollup_host_changes (delta, host_id, first_seen, retired_at) "
            f"VALUES ({delta}, {row}.id, {row}.first_seen, {row}.retired_at);")


def _distinct(columns: Sequence[str], dialect: str) -> str:
    if dialect == "postgresql":
        return (f"(({', '.join(f'OLD.{c}' for c in columns)}) IS DISTINCT FROM "
                f"({', '.join(f'NEW.{c}' for c in columns)}))")
    return " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns)


PG_FUNCTIONS = {
    # A capture in, out, or changed.
    "rollup_capture_enqueue": (
        f"IF TG_OP <> 'INSERT' THEN {_of_event('OLD')} END IF; "
        f"IF TG_OP <> 'DELETE' THEN {_of_event('NEW')} END IF; RETURN NULL;"
    ),
    # An event's captures counted out as they were (before its delete: the cascade that
    # deletes them runs after the event is gone), and in as they are after an update.
    "rollup_event_captures_enqueue": (
        f"{_of_captures('OLD')} IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; "
        f"{_of_captures('NEW')} RETURN NULL;"
    ),
    "rollup_host_enqueue": (
        f"IF TG_OP <> 'INSERT' THEN {_host_enqueue('OLD')} END IF; "
        f"IF TG_OP <> 'DELETE' THEN {_host_enqueue('NEW')} END IF; RETURN NULL;"
    ),
}
HOST_COUNTED = ("first_seen", "retired_at")
CAPTURE_UPDATED = (*CAPTURE_COUNTED, "event_id")
# name -> (table, timing and events, WHEN or None, PostgreSQL function, SQLite body)
TRIGGERS = {
    "captures_rollup_insert": ("captures", "AFTER INSERT", None, "rollup_capture_enqueue", _of_event("NEW")),
    "captures_rollup_update": ("captures", f"AFTER UPDATE OF {', '.join(CAPTURE_UPDATED)}", CAPTURE_UPDATED,
                               "rollup_capture_enqueue", _of_event("OLD") + " " + _of_event("NEW")),
    "captures_rollup_delete": ("captures", "AFTER DELETE", None, "rollup_capture_enqueue", _of_event("OLD")),
    "events_captures_rollup_update": (
        "events", f"AFTER UPDATE OF {', '.join(EVENT_COUNTED)}", EVENT_COUNTED, "rollup_event_captures_enqueue",
        _of_captures("OLD") + " " + _of_captures("NEW")),
    "events_captures_rollup_delete": ("events", "BEFORE DELETE", None, "rollup_event_captures_enqueue",
                                      _of_captures("OLD")),
    "hosts_rollup_insert": ("hosts", "AFTER INSERT", None, "rollup_host_enqueue", _host_enqueue("NEW")),
    "hosts_rollup_update": ("hosts", f"AFTER UPDATE OF {', '.join(HOST_COUNTED)}", HOST_COUNTED,
                            "rollup_host_enqueue", _host_enqueue("OLD") + " " + _host_enqueue("NEW")),
    "hosts_rollup_delete": ("hosts", "AFTER DELETE", None, "rollup_host_enqueue", _host_enqueue("OLD")),
}


def _trigger(name: str, dialect: str) -> str:
    table, timing, when, function, body = TRIGGERS[name]
    condition = f" WHEN {_distinct(when, dialect)}" if when else ""
    if dialect == "postgresql":
        return (f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW{condition} "
                f"EXECUTE FUNCTION {function}()")
    return f"CREATE TRIGGER {name} {timing} ON {table}{condition} BEGIN {body} END"


# The views, with the columns the materialized views had: PostgreSQL's `day` a timestamptz at
# midnight UTC, SQLite's 'YYYY-MM-DD'; no decision '', no memory or duration -1 in the tables.
DAY = {"postgresql": "(day::timestamp AT TIME ZONE 'UTC')", "sqlite": "day"}
FLEET_DAYS = {
    "postgresql": (
        "SELECT (d::date)::timestamp AT TIME ZONE 'UTC' AS day, "
        "SUM(COALESCE(per_day.delta, 0)) OVER (ORDER BY d) AS hosts "
        "FROM generate_series((SELECT MIN(day) FROM per_day), (now() AT TIME ZONE 'UTC')::date, "
        "interval '1 day') AS d LEFT JOIN per_day ON per_day.day = d::date"
    ),
    "sqlite": (
        ", days(day) AS (SELECT MIN(day) FROM per_day UNION ALL "
        "SELECT date(day, '+1 day') FROM days WHERE day < date('now')) "
        "SELECT days.day, SUM(COALESCE(per_day.delta, 0)) OVER (ORDER BY days.day) AS hosts "
        "FROM days LEFT JOIN per_day ON per_day.day = days.day WHERE days.day IS NOT NULL"
    ),
}


def _views(dialect: str) -> dict[str, str]:
    fleet = FLEET_DAYS[dialect]
    return {
        "rpt_capture_daily": (
            f"SELECT {DAY[dialect]} AS day, NULLIF(capture_action, '') AS capture_action, status, "
            f"NULLIF(memory_gb, -1) AS memory_gb, NULLIF(duration_s, -1) AS duration_s, captures, "
            f"CASE WHEN bytes_known > 0 THEN bytes / 1e9 END AS gb, "
            f"NULLIF(memory_gb, -1) * captures AS memory_gb_total, "
            f"CASE WHEN downtime_known > 0 THEN downtime_us / "
            f"{'1e6::float8' if dialect == 'postgresql' else '1e6'} END AS downtime_s "
            f"FROM rollup_capture_daily"
        ),
        "rpt_fleet_daily": (
            f"WITH {'RECURSIVE ' if dialect == 'sqlite' else ''}per_day AS "
            f"(SELECT day, joined - retired AS delta FROM rollup_fleet_daily)"
            f"{'' if dialect == 'sqlite' else ' '}{fleet}"
        ),
    }


# Downgrade: what 0012 (captures) and 0011/0002 (fleet) left.
OLD_DAY = {
    "postgresql": "(date_trunc('day', e.crashed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
    "sqlite": "date(e.crashed_at)",
}
OLD_DURATION = {
    "postgresql": (
        "CASE WHEN c.duration_s > 0 THEN round(exp((floor(ln(c.duration_s) / ln(1.05)) + 1) "
        "* ln(1.05))::numeric, 1)::float8 ELSE c.duration_s END"
    ),
    "sqlite": "c.duration_s",
}
OLD_START = {
    "postgresql": "(LEAST(h.first_seen, COALESCE((SELECT MIN(crashed_at) FROM events WHERE host_id = h.id), "
                  "h.first_seen)) AT TIME ZONE 'UTC')::date",
    "sqlite": "date(min(h.first_seen, COALESCE((SELECT MIN(crashed_at) FROM events WHERE host_id = h.id), "
              "h.first_seen)))",
}
OLD_RETIRED = {"postgresql": "(h.retired_at AT TIME ZONE 'UTC')::date", "sqlite": "date(h.retired_at)"}
OLD_UNIQUE = {"rpt_capture_daily": "(day, capture_action, status, memory_gb, duration_s)",
              "rpt_fleet_daily": "(day)"}


def _old_views(dialect: str) -> dict[str, str]:
    return {
        "rpt_capture_daily": (
            f"SELECT {OLD_DAY[dialect]} AS day, e.capture_action, c.status, e.memory_gb, "
            f"{OLD_DURATION[dialect]} AS duration_s, COUNT(*) AS captures, SUM(c.bytes) / 1e9 AS gb, "
            f"SUM(e.memory_gb) AS memory_gb_total, SUM(c.downtime_s) AS downtime_s "
            f"FROM captures c JOIN events e ON e.id = c.event_id GROUP BY 1, 2, 3, 4, 5"
        ),
        "rpt_fleet_daily": (
            f"WITH {'RECURSIVE ' if dialect == 'sqlite' else ''}changes AS ("
            f"SELECT {OLD_START[dialect]} AS day, 1 AS delta FROM hosts h UNION ALL "
            f"SELECT {OLD_RETIRED[dialect]}, -1 FROM hosts h WHERE retired_at IS NOT NULL), "
            f"per_day AS (SELECT day, SUM(delta) AS delta FROM changes GROUP BY day)"
            f"{'' if dialect == 'sqlite' else ' '}{FLEET_DAYS[dialect]}"
        ),
    }


def _grants(connection: Connection, name: str) -> list[tuple[str, str]]:
    """Who may read the view beside its owner (Grafana's role): carried over to its successor."""
    return [tuple(row) for row in connection.exec_driver_sql(
        "SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
        "ELSE quote_ident(pg_get_userbyid(a.grantee)) END FROM pg_class c, aclexplode(c.relacl) a "
        f"WHERE c.oid = '{name}'::regclass AND a.grantee <> c.relowner").all()]


def _replace_views(connection: Connection, views: dict[str, str], old_kind: str, new_kind: str) -> None:
    for name, sql in views.items():
        grants = _grants(connection, name) if connection.dialect.name == "postgresql" else []
        connection.exec_driver_sql(f"DROP {old_kind} {name}")
        connection.exec_driver_sql(f"CREATE {new_kind} {name} AS {sql}")
        if new_kind == "MATERIALIZED VIEW":
            connection.exec_driver_sql(f"CREATE UNIQUE INDEX uq_{name} ON {name} {OLD_UNIQUE[name]}")
        for privilege, grantee in grants:
            connection.exec_driver_sql(f"GRANT {privilege} ON {name} TO {grantee}")


def _start_counting(connection: Connection) -> None:
    """The triggers, and the builds the next fold makes of what they did not see."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        connection.exec_driver_sql("LOCK TABLE hosts, events, captures IN SHARE ROW EXCLUSIVE MODE")
        for function, body in PG_FUNCTIONS.items():
            connection.exec_driver_sql(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$")
    for name in TRIGGERS:
        connection.exec_driver_sql(_trigger(name, dialect))
    for group, table in (("captures", "captures"), ("fleet", "hosts")):
        connection.exec_driver_sql(f"INSERT INTO rollup_backfills (rollups, requested_at) SELECT '{group}', "
                                   f"CURRENT_TIMESTAMP WHERE EXISTS (SELECT 1 FROM {table})")


def _counts(*names: str) -> list[sa.Column]:
    return [sa.Column(name, sa.BigInteger(), nullable=False) for name in names]


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "rollup_capture_changes",
        sa.Column("id", QUEUE_ID, nullable=False),
        sa.Column("delta", sa.SmallInteger(), nullable=False),
        sa.Column("crashed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("capture_action", sa.String(length=16), nullable=True),
        sa.Column("memory_gb", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("downtime_s", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollup_capture_changes")),
    )
    op.create_table(
        "rollup_host_changes",
        sa.Column("id", QUEUE_ID, nullable=False),
        sa.Column("delta", sa.SmallInteger(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollup_host_changes")),
    )
    op.create_table(
        "rollup_capture_daily",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("capture_action", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("memory_gb", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        *_counts("captures", "bytes", "bytes_known", "downtime_us", "downtime_known"),
        sa.PrimaryKeyConstraint("day", "capture_action", "status", "memory_gb", "duration_s",
                                name=op.f("pk_rollup_capture_daily")),
    )
    op.create_table(
        "rollup_host_days",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        *_counts("marks"),
        sa.PrimaryKeyConstraint("host_id", "day", name=op.f("pk_rollup_host_days")),
    )
    op.create_table(
        "rollup_fleet_daily",
        sa.Column("day", sa.Date(), nullable=False),
        *_counts("joined", "retired"),
        sa.PrimaryKeyConstraint("day", name=op.f("pk_rollup_fleet_daily")),
    )
    # One pending build per group of rollups ('events': 0033's, left as it is).
    with op.batch_alter_table("rollup_backfills") as batch:
        batch.add_column(sa.Column("rollups", sa.String(length=16), nullable=False,
                                   server_default=sa.text("'events'")))
        batch.drop_constraint("pk_rollup_backfills", type_="primary")
        batch.create_primary_key("pk_rollup_backfills", ["rollups"])
    if dialect != "postgresql":
        _start_counting(op.get_bind())
        _replace_views(op.get_bind(), _views(dialect), "VIEW", "VIEW")
        return
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        in_short_transaction(connection, _start_counting)
        in_short_transaction(connection, lambda c: _replace_views(c, _views(dialect), "MATERIALIZED VIEW", "VIEW"))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _replace_views(op.get_bind(), _old_views(dialect), "VIEW",
                   "MATERIALIZED VIEW" if dialect == "postgresql" else "VIEW")
    for name, (table, *_) in TRIGGERS.items():
        op.execute(f"DROP TRIGGER {name} ON {table}" if dialect == "postgresql" else f"DROP TRIGGER {name}")
    if dialect == "postgresql":
        for function in PG_FUNCTIONS:
            op.execute(f"DROP FUNCTION {function}()")
    op.execute("DELETE FROM rollup_backfills WHERE rollups <> 'events'")
    with op.batch_alter_table("rollup_backfills") as batch:
        batch.drop_constraint("pk_rollup_backfills", type_="primary")
        batch.create_primary_key("pk_rollup_backfills", ["requested_at"])
        batch.drop_column("rollups")
    for table in ("rollup_fleet_daily", "rollup_host_days", "rollup_capture_daily", "rollup_host_changes",
                  "rollup_capture_changes"):
        op.drop_table(table)
