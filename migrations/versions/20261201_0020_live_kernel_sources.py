"""live kernel reports: events count their repeats; the daily breakdown counts sources

- `events.repeats`: further occurrences of a live host's oops or warning in the same boot
  (a WARN_ON in a hot path prints a million times; the watcher reports the first and then the
  count, at most once a minute), summed from the reports' `repeat_count`.
- `rpt_daily_breakdown` gains the dimension `source` (the event's first source: crash_kernel,
  dpu, live_kernel, pstore, ...) and the column `repeats`, so Grafana's panels and alert
  rules count live reports and their fleet-wide rate without reading events. Recreating it
  drops the read-only role's grant on it: `crashreg grafana provision` (or the scheduler's
  grafana-sync) grants it again.

Revision ID: 0020_live_kernel_sources
Revises: 0019_plausible_last_seen
Create Date: 2026-12-01 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_live_kernel_sources"
down_revision: str | Sequence[str] | None = "0019_plausible_last_seen"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DAY = {
    "postgresql": "(date_trunc('day', e.crashed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
    "sqlite": "date(e.crashed_at)",
}
# rpt_daily_breakdown's dimensions as 0017 made them, and as this revision makes them.
DIMENSIONS_0017 = ("kind", "region", "kernel_version", "capture_action", "regression", "bios_version", "sku")
DIMENSIONS = (*DIMENSIONS_0017, "source")
COLUMNS = {"kind": "s.kind", "source": "e.first_source AS source"}


def _breakdown(dialect: str, dimensions: Sequence[str], with_repeats: bool) -> str:
    """0017's rpt_daily_breakdown over `dimensions` (events read once, grouped per dimension),
    with the events' summed repeats when `with_repeats`."""
    columns = ", ".join(COLUMNS.get(d, f"e.{d}") for d in dimensions)
    repeats = ", SUM(repeats) AS repeats" if with_repeats else ""
    selects = " UNION ALL ".join(
        f"SELECT day, '{d}' AS dimension, COALESCE({d}, 'unknown') AS value, COUNT(*) AS events, "
        f"SUM(memory_gb) AS memory_gb{repeats} FROM e "
        f"{'WHERE regression IS NOT NULL ' if d == 'regression' else ''}GROUP BY day, 3"
        for d in dimensions
    )
    source = ", e.repeats" if with_repeats else ""
    return (
        f"WITH e AS (SELECT {DAY[dialect]} AS day, {columns}, e.memory_gb{source} "
        f"FROM events e LEFT JOIN signatures s ON s.id = e.signature_id) {selects}"
    )


def _replace_breakdown(dialect: str, sql: str) -> None:
    if dialect == "sqlite":
        op.execute("DROP VIEW rpt_daily_breakdown")
        op.execute(f"CREATE VIEW rpt_daily_breakdown AS {sql}")
        return
    op.execute("DROP MATERIALIZED VIEW rpt_daily_breakdown")
    op.execute(f"CREATE MATERIALIZED VIEW rpt_daily_breakdown AS {sql}")
    op.execute("CREATE UNIQUE INDEX uq_rpt_daily_breakdown ON rpt_daily_breakdown (day, dimension, value)")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.add_column("events", sa.Column("repeats", sa.BigInteger(), server_default="0", nullable=False))
    _replace_breakdown(dialect, _breakdown(dialect, DIMENSIONS, with_repeats=True))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _replace_breakdown(dialect, _breakdown(dialect, DIMENSIONS_0017, with_repeats=False))
    with op.batch_alter_table("events") as batch:
        batch.drop_column("repeats")
