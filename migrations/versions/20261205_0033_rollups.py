"""rollups kept current by folding a queue of event changes

The daily breakdown and the signatures' daily counts stop being materialized views that a
refresh recomputes from every event (10.8 s at 1 M events, every 5 minutes): a trigger on
`events` queues each counted change (`rollup_changes`: +1 for an event counted in, -1 for one
counted out, as it was), and the scheduler's rollups job folds the queue into tables
(`rollup_breakdown_daily`, `rollup_signature_host_daily`, `rollup_signature_daily`,
`rollup_signature_sources`). `rpt_daily_breakdown` and `rpt_signature_daily` become plain
views over them, with the same columns (so Grafana's read-only role needs its grants again:
`crashreg grafana provision` or the grafana-sync job gives them).

No long lock on events: creating the triggers waits for the writes in flight and holds
events' SHARE ROW EXCLUSIVE lock only for the DDL. The rollups are built from events after
the upgrade (a `rollup_backfills` row says so), by the rollups job's next run or
`crashreg rollups rebuild`, in one snapshot that takes no lock beyond reading.

Revision ID: 0033_rollups
Revises: 0032_symbol_misses
Create Date: 2026-12-05 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033_rollups"
down_revision: str | Sequence[str] | None = "0032_symbol_misses"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

QUEUE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COUNTED = ("signature_id", "host_id", "crashed_at", "region", "kernel_version", "capture_action", "regression",
           "bios_version", "sku", "first_source", "memory_gb", "repeats")
QUEUED = ("delta", "kind", *COUNTED)


def _values(row: str, delta: int) -> str:
    kind = f"(SELECT kind FROM signatures WHERE id = {row}.signature_id)"
    return ", ".join((str(delta), kind, *(f"{row}.{c}" for c in COUNTED)))


def _enqueue(row: str, delta: int) -> str:
    return f"INSERT INTO rollup_changes ({', '.join(QUEUED)}) VALUES ({_values(row, delta)});"


PG_FUNCTION = f"""
CREATE FUNCTION rollup_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        {_enqueue('OLD', -1)}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {_enqueue('NEW', 1)}
    END IF;
    RETURN NULL;
END $$
"""
OLD_ROW = ", ".join(f"OLD.{c}" for c in COUNTED)
NEW_ROW = ", ".join(f"NEW.{c}" for c in COUNTED)
PG_TRIGGERS = (
    "CREATE TRIGGER events_rollup_insert AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION rollup_enqueue()",
    f"CREATE TRIGGER events_rollup_update AFTER UPDATE OF {', '.join(COUNTED)} ON events FOR EACH ROW "
    f"WHEN (({OLD_ROW}) IS DISTINCT FROM ({NEW_ROW})) EXECUTE FUNCTION rollup_enqueue()",
    "CREATE TRIGGER events_rollup_delete AFTER DELETE ON events FOR EACH ROW EXECUTE FUNCTION rollup_enqueue()",
)
SQLITE_TRIGGERS = (
    f"CREATE TRIGGER events_rollup_insert AFTER INSERT ON events BEGIN {_enqueue('NEW', 1)} END",
    f"CREATE TRIGGER events_rollup_update AFTER UPDATE OF {', '.join(COUNTED)} ON events "
    f"WHEN {' OR '.join(f'OLD.{c} IS NOT NEW.{c}' for c in COUNTED)} "
    f"BEGIN {_enqueue('OLD', -1)} {_enqueue('NEW', 1)} END",
    f"CREATE TRIGGER events_rollup_delete AFTER DELETE ON events BEGIN {_enqueue('OLD', -1)} END",
)
TRIGGERS = ("events_rollup_insert", "events_rollup_update", "events_rollup_delete")

# The views, with the columns the materialized views had (PostgreSQL: `day` a timestamptz at
# midnight UTC; SQLite: 'YYYY-MM-DD').
DAY = {"postgresql": "(day::timestamp AT TIME ZONE 'UTC')", "sqlite": "day"}
VIEWS = {
    "rpt_daily_breakdown": (
        "SELECT {day} AS day, dimension, value, events, "
        "CASE WHEN memory_known > 0 THEN memory_gb END AS memory_gb, repeats FROM rollup_breakdown_daily"
    ),
    "rpt_signature_daily": "SELECT signature_id, {day} AS day, events, hosts FROM rollup_signature_daily",
}

# Downgrade: the definitions 0020 (breakdown) and 0011 (signature daily) left.
OLD_DAY = {
    "postgresql": "(date_trunc('day', e.crashed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
    "sqlite": "date(e.crashed_at)",
}
OLD_DIMENSIONS = ("kind", "region", "kernel_version", "capture_action", "regression", "bios_version", "sku",
                  "source")
OLD_COLUMNS = {"kind": "s.kind", "source": "e.first_source AS source"}
OLD_UNIQUE = {"rpt_daily_breakdown": "(day, dimension, value)", "rpt_signature_daily": "(signature_id, day)"}


def _old_views(dialect: str) -> dict[str, str]:
    columns = ", ".join(OLD_COLUMNS.get(d, f"e.{d}") for d in OLD_DIMENSIONS)
    selects = " UNION ALL ".join(
        f"SELECT day, '{d}' AS dimension, COALESCE({d}, 'unknown') AS value, COUNT(*) AS events, "
        f"SUM(memory_gb) AS memory_gb, SUM(repeats) AS repeats FROM e "
        f"{'WHERE regression IS NOT NULL ' if d == 'regression' else ''}GROUP BY day, 3"
        for d in OLD_DIMENSIONS
    )
    return {
        "rpt_daily_breakdown": (
            f"WITH e AS (SELECT {OLD_DAY[dialect]} AS day, {columns}, e.memory_gb, e.repeats "
            f"FROM events e LEFT JOIN signatures s ON s.id = e.signature_id) {selects}"
        ),
        "rpt_signature_daily": (
            f"SELECT signature_id, {OLD_DAY[dialect]} AS day, COUNT(*) AS events, "
            f"COUNT(DISTINCT e.host_id) AS hosts FROM events e WHERE signature_id IS NOT NULL "
            f"GROUP BY signature_id, {OLD_DAY[dialect]}"
        ),
    }


def _counts() -> list[sa.Column]:
    return [sa.Column("events", sa.BigInteger(), nullable=False)]


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "rollup_changes",
        sa.Column("id", QUEUE_ID, nullable=False),
        sa.Column("delta", sa.SmallInteger(), nullable=False),
        sa.Column("signature_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=True),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("crashed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("region", sa.String(length=128), nullable=True),
        sa.Column("kernel_version", sa.String(length=128), nullable=True),
        sa.Column("capture_action", sa.String(length=16), nullable=True),
        sa.Column("regression", sa.String(length=32), nullable=True),
        sa.Column("bios_version", sa.String(length=128), nullable=True),
        sa.Column("sku", sa.String(length=128), nullable=True),
        sa.Column("first_source", sa.String(length=16), nullable=True),
        sa.Column("memory_gb", sa.Integer(), nullable=True),
        sa.Column("repeats", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollup_changes")),
    )
    op.create_table(
        "rollup_backfills",
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("requested_at", name=op.f("pk_rollup_backfills")),
    )
    op.create_table(
        "rollup_breakdown_daily",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("dimension", sa.String(length=32), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        *_counts(),
        sa.Column("memory_gb", sa.BigInteger(), nullable=False),
        sa.Column("memory_known", sa.BigInteger(), nullable=False),
        sa.Column("repeats", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "dimension", "value", name=op.f("pk_rollup_breakdown_daily")),
    )
    op.create_table(
        "rollup_signature_host_daily",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        *_counts(),
        sa.PrimaryKeyConstraint("signature_id", "day", "host_id", name=op.f("pk_rollup_signature_host_daily")),
    )
    op.create_table(
        "rollup_signature_daily",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        *_counts(),
        sa.Column("hosts", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("signature_id", "day", name=op.f("pk_rollup_signature_daily")),
    )
    op.create_table(
        "rollup_signature_sources",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        *_counts(),
        sa.Column("repeats", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("signature_id", "source", name=op.f("pk_rollup_signature_sources")),
    )
    if dialect == "postgresql":
        op.execute(PG_FUNCTION)
        for trigger in PG_TRIGGERS:
            op.execute(trigger)
    else:
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)
    # Built from events after the upgrade (the rollups job or `crashreg rollups rebuild`).
    op.execute("INSERT INTO rollup_backfills (requested_at) SELECT CURRENT_TIMESTAMP "
               "WHERE EXISTS (SELECT 1 FROM events)")
    drop = "DROP MATERIALIZED VIEW" if dialect == "postgresql" else "DROP VIEW"
    for name, sql in VIEWS.items():
        op.execute(f"{drop} {name}")
        op.execute(f"CREATE VIEW {name} AS {sql.format(day=DAY[dialect])}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for name, sql in _old_views(dialect).items():
        op.execute(f"DROP VIEW {name}")
        if dialect == "postgresql":
            op.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            op.execute(f"CREATE UNIQUE INDEX uq_{name} ON {name} {OLD_UNIQUE[name]}")
        else:
            op.execute(f"CREATE VIEW {name} AS {sql}")
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER {trigger} ON events" if dialect == "postgresql" else f"DROP TRIGGER {trigger}")
    if dialect == "postgresql":
        op.execute("DROP FUNCTION rollup_enqueue()")
    for table in ("rollup_signature_sources", "rollup_signature_daily", "rollup_signature_host_daily",
                  "rollup_breakdown_daily", "rollup_backfills", "rollup_changes"):
        op.drop_table(table)
