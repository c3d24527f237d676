"""daily capture rollup for Grafana

`rpt_capture_daily`: captures per UTC day (of the crash), capture decision, status, host
memory and duration, with their GB, the hosts' memory and the downtime summed. On
PostgreSQL a materialized view (refreshed with the other rollups) whose durations are
log-scale buckets 5% wide (`duration_s` is the bucket's upper bound), so percentiles read
from it are within 5%; on SQLite a plain view with exact durations.

Revision ID: 0012_rpt_capture_daily
Revises: 0011_rpt_rollups
Create Date: 2026-11-29 18:10:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_rpt_capture_daily"
down_revision: str | Sequence[str] | None = "0011_rpt_rollups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DAY = {
    "postgresql": "(date_trunc('day', e.crashed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
    "sqlite": "date(e.crashed_at)",
}
DURATION = {
    "postgresql": (
        "CASE WHEN c.duration_s > 0 THEN round(exp((floor(ln(c.duration_s) / ln(1.05)) + 1) "
        "* ln(1.05))::numeric, 1)::float8 ELSE c.duration_s END"
    ),
    "sqlite": "c.duration_s",
}
CAPTURE_DAILY = """
    SELECT {day} AS day, e.capture_action, c.status, e.memory_gb, {duration} AS duration_s,
           COUNT(*) AS captures, SUM(c.bytes) / 1e9 AS gb, SUM(e.memory_gb) AS memory_gb_total,
           SUM(c.downtime_s) AS downtime_s
    FROM captures c JOIN events e ON e.id = c.event_id
    GROUP BY 1, 2, 3, 4, 5
"""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    sql = CAPTURE_DAILY.format(day=DAY[dialect], duration=DURATION[dialect])
    if dialect == "sqlite":
        op.execute(f"CREATE VIEW rpt_capture_daily AS {sql}")
        return
    op.execute(f"CREATE MATERIALIZED VIEW rpt_capture_daily AS {sql}")
    # Unique by construction (the GROUP BY keys): what REFRESH ... CONCURRENTLY requires.
    op.execute(
        "CREATE UNIQUE INDEX uq_rpt_capture_daily ON rpt_capture_daily "
        "(day, capture_action, status, memory_gb, duration_s)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP VIEW rpt_capture_daily")
    else:
        op.execute("DROP MATERIALIZED VIEW rpt_capture_daily")
