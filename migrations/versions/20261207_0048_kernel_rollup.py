"""the kernels' rollup: host-time per kernel version per UTC day, kept current by the rollups job

Grafana's crash rate by kernel version read `rpt_kernel_intervals` (0047), a plain view that
computed every host's kernel intervals at each refresh: 5-9 s at 100,000 hosts with monthly
kernels. Now the intervals are kept per host (`rollup_kernel_intervals`) and summed per UTC day
and kernel (`rollup_kernel_daily`: intervals starting and ending that day and their moments;
`rollup_kernel_gaps`: hosts back on a kernel they ran before), by the rollups job, for the hosts
of the fleet's queue (`rollup_host_changes`, 0037's: a host comes, goes, is retired or its first
sighting changes; the fold also takes a host whose first day in the fleet moved) and of a queue of
its own (`rollup_kernel_hosts`) that triggers fill when a host's kernel changes, or one of its
recorded kernel changes is written, corrected or deleted. No trigger of this rollup fires when a
report inserts a host: ingest pays nothing for it. registry/rollups/kernels.py
says how; docs/grafana.md what the panel reads: `rpt_kernel_daily` and `rpt_kernel_gaps`, which
replace `rpt_kernel_intervals` (no panel or rule reads it any more).

No long lock: the triggers are made in one short transaction (hosts and host_attribute_changes
locked SHARE ROW EXCLUSIVE for the DDL's milliseconds, waiting at most 500 ms and tried again),
and a `rollup_backfills` row ('kernels') has the next fold compute every host's intervals, as
0037's backfill does.

Revision ID: 0048_kernel_rollup
Revises: 0047_rpt_kernel_intervals
Create Date: 2026-12-07 21:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection

from registry.partitions import in_short_transaction

revision: str = "0048_kernel_rollup"
down_revision: str | Sequence[str] | None = "0047_rpt_kernel_intervals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

QUEUE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
KERNEL = "attribute = 'kernel_version'"


def _enqueue(host: str) -> str:
    return f"INSERT INTO rollup_kernel_hosts (host_id) VALUES ({host});"


PG_FUNCTIONS = {
    "rollup_kernel_host_enqueue": f"{_enqueue('NEW.id')} RETURN NULL;",
    "rollup_kernel_change_enqueue": (
        f"IF TG_OP <> 'INSERT' THEN {_enqueue('OLD.host_id')} END IF; "
        f"IF TG_OP <> 'DELETE' THEN {_enqueue('NEW.host_id')} END IF; RETURN NULL;"
    ),
}
HOST_KERNEL = ("kernel_version",)  # its first sighting and retirement: the fleet's queue
CHANGE_COLUMNS = ("host_id", "attribute", "old_value", "changed_at")


def _distinct(columns: Sequence[str], dialect: str) -> str:
    if dialect == "postgresql":
        return (
            f"(({', '.join(f'OLD.{c}' for c in columns)}) IS DISTINCT FROM "
            f"({', '.join(f'NEW.{c}' for c in columns)}))"
        )
    return "(" + " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns) + ")"


# name -> (table, timing and events, WHEN (dialect -> SQL) or None, PostgreSQL function, SQLite body)
TRIGGERS = {
    "hosts_kernels_rollup_update": (
        "hosts",
        f"AFTER UPDATE OF {', '.join(HOST_KERNEL)}",
        lambda d: _distinct(HOST_KERNEL, d),
        "rollup_kernel_host_enqueue",
        _enqueue("NEW.id"),
    ),
    "host_changes_kernels_rollup_insert": (
        "host_attribute_changes",
        "AFTER INSERT",
        lambda d: f"NEW.{KERNEL}",
        "rollup_kernel_change_enqueue",
        _enqueue("NEW.host_id"),
    ),
    "host_changes_kernels_rollup_update": (
        "host_attribute_changes",
        "AFTER UPDATE",
        lambda d: f"(OLD.{KERNEL} OR NEW.{KERNEL}) AND {_distinct(CHANGE_COLUMNS, d)}",
        "rollup_kernel_change_enqueue",
        _enqueue("OLD.host_id") + " " + _enqueue("NEW.host_id"),
    ),
    "host_changes_kernels_rollup_delete": (
        "host_attribute_changes",
        "AFTER DELETE",
        lambda d: f"OLD.{KERNEL}",
        "rollup_kernel_change_enqueue",
        _enqueue("OLD.host_id"),
    ),
}


def _trigger(name: str, dialect: str) -> str:
    table, timing, when, function, body = TRIGGERS[name]
    condition = f" WHEN ({when(dialect)})" if when else ""
    if dialect == "postgresql":
        return (
            f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW{condition} EXECUTE FUNCTION {function}()"
        )
    return f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW{condition} BEGIN {body} END"


# PostgreSQL's `day` a timestamptz at midnight UTC, SQLite's 'YYYY-MM-DD', as the daily views.
DAY = {"postgresql": "({}::timestamp AT TIME ZONE 'UTC')", "sqlite": "{}"}


def _views(dialect: str) -> dict[str, str]:
    day = DAY[dialect].format
    return {
        # offset_s: the starts' seconds after the day's midnight summed, less the ends'
        "rpt_kernel_daily": (
            f"SELECT {day('day')} AS day, kernel_version, starts, ends, "
            f"(start_us - end_us) / 1000000.0 AS offset_s FROM rollup_kernel_daily"
        ),
        "rpt_kernel_gaps": (
            f"SELECT kernel_version, {day('ended_day')} AS ended_day, {day('resumed_day')} AS resumed_day, gaps "
            f"FROM rollup_kernel_gaps"
        ),
    }


def _start_counting(connection: Connection) -> None:
    """The triggers, and the build the next fold makes of what they did not see."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        connection.exec_driver_sql("LOCK TABLE hosts, host_attribute_changes IN SHARE ROW EXCLUSIVE MODE")
        for function, body in PG_FUNCTIONS.items():
            connection.exec_driver_sql(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$"
            )
    for name in TRIGGERS:
        connection.exec_driver_sql(_trigger(name, dialect))
    connection.exec_driver_sql(
        "INSERT INTO rollup_backfills (rollups, requested_at) SELECT 'kernels', "
        "CURRENT_TIMESTAMP WHERE EXISTS (SELECT 1 FROM hosts)"
    )


def _counts(*names: str) -> list[sa.Column]:
    return [sa.Column(name, sa.BigInteger(), nullable=False) for name in names]


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "rollup_kernel_hosts",
        sa.Column("id", QUEUE_ID, nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollup_kernel_hosts")),
    )
    op.create_table(
        "rollup_kernel_intervals",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kernel_version", sa.String(length=255), nullable=False),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("host_id", "valid_from", name=op.f("pk_rollup_kernel_intervals")),
    )
    op.create_table(
        "rollup_kernel_daily",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("kernel_version", sa.String(length=255), nullable=False),
        *_counts("starts", "ends", "start_us", "end_us"),
        sa.PrimaryKeyConstraint("day", "kernel_version", name=op.f("pk_rollup_kernel_daily")),
    )
    op.create_table(
        "rollup_kernel_gaps",
        sa.Column("kernel_version", sa.String(length=255), nullable=False),
        sa.Column("ended_day", sa.Date(), nullable=False),
        sa.Column("resumed_day", sa.Date(), nullable=False),
        *_counts("gaps"),
        sa.PrimaryKeyConstraint(
            "kernel_version", "ended_day", "resumed_day", name=op.f("pk_rollup_kernel_gaps")
        ),
    )
    op.execute("DROP VIEW rpt_kernel_intervals")
    for name, sql in _views(dialect).items():
        op.execute(f"CREATE VIEW {name} AS {sql}")
    if dialect != "postgresql":
        _start_counting(op.get_bind())
        return
    with op.get_context().autocommit_block():
        in_short_transaction(op.get_bind(), _start_counting)


# Downgrade: 0047's view, as it made it.
OLD_DAY = {"postgresql": "(h.first_seen AT TIME ZONE 'UTC')::date", "sqlite": "date(h.first_seen)"}
OLD_MIDNIGHT = {
    "postgresql": "(({})::timestamp AT TIME ZONE 'UTC')",
    "sqlite": "(({}) || ' 00:00:00.000000')",
}
OLD_FIRST_DAY = "SELECT MIN(d.day) FROM rollup_host_days d WHERE d.host_id = h.id"
OLD_VIEW = """
    WITH born AS (
        SELECT h.id, h.hostname, h.kernel_version, h.retired_at,
               CASE WHEN EXISTS (SELECT 1 FROM rollup_host_days d WHERE d.host_id = h.id AND d.day < {day})
                    THEN {midnight} ELSE h.first_seen END AS born
        FROM hosts h
    ), changes AS (
        SELECT host_id, old_value, changed_at,
               LAG(changed_at) OVER host AS since, LEAD(id) OVER host AS next_id
        FROM host_attribute_changes WHERE attribute = 'kernel_version'
        WINDOW host AS (PARTITION BY host_id ORDER BY changed_at, id)
    ), spans AS (
        SELECT b.hostname, c.old_value AS kernel_version, b.born, b.retired_at,
               COALESCE(c.since, b.born) AS since, c.changed_at AS until
        FROM changes c JOIN born b ON b.id = c.host_id
        WHERE c.old_value IS NOT NULL
        UNION ALL
        SELECT b.hostname, b.kernel_version, b.born, b.retired_at, COALESCE(c.changed_at, b.born), NULL
        FROM born b LEFT JOIN changes c ON c.host_id = b.id AND c.next_id IS NULL
        WHERE b.kernel_version IS NOT NULL
    ), clipped AS (
        SELECT hostname, kernel_version,
               CASE WHEN since > born THEN since ELSE born END AS valid_from,
               CASE WHEN until IS NULL THEN retired_at
                    WHEN retired_at IS NULL OR until < retired_at THEN until
                    ELSE retired_at END AS valid_to
        FROM spans
    )
    SELECT hostname, kernel_version, valid_from, valid_to FROM clipped
    WHERE valid_to IS NULL OR valid_to > valid_from
"""


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for name in TRIGGERS:
        table = TRIGGERS[name][0]
        op.execute(f"DROP TRIGGER {name} ON {table}" if dialect == "postgresql" else f"DROP TRIGGER {name}")
    if dialect == "postgresql":
        for function in PG_FUNCTIONS:
            op.execute(f"DROP FUNCTION {function}()")
    op.execute("DELETE FROM rollup_backfills WHERE rollups = 'kernels'")
    for name in _views(dialect):
        op.execute(f"DROP VIEW {name}")
    midnight = OLD_MIDNIGHT[dialect].format(OLD_FIRST_DAY)
    op.execute(
        f"CREATE VIEW rpt_kernel_intervals AS {OLD_VIEW.format(day=OLD_DAY[dialect], midnight=midnight)}"
    )
    for table in (
        "rollup_kernel_gaps",
        "rollup_kernel_daily",
        "rollup_kernel_intervals",
        "rollup_kernel_hosts",
    ):
        op.drop_table(table)
