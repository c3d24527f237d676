"""daily rollups for Grafana

Grafana's daily panels over a million events cannot afford to group raw events on every
refresh. On PostgreSQL three reporting relations become materialized views with a unique
index (refreshed CONCURRENTLY by `crashreg grafana provision` and the scheduler's Grafana
job): `rpt_daily_breakdown` (events per UTC day by kind, region, kernel version, capture
decision and regression), `rpt_signature_daily` and `rpt_fleet_daily`. On SQLite (laptop
scale) the same names are plain views. `day` is midnight UTC (timestamptz on PostgreSQL,
'YYYY-MM-DD' on SQLite), so Grafana's time macros apply to it directly.

Indexes for what stays on raw events: a signature's drill-down reads its events in a time
range through a covering index; failed captures are found by status, regressions by a
partial index, captured events by their capture decision and time.

Revision ID: 0011_rpt_rollups
Revises: 0010_rpt_rca_epi
Create Date: 2026-11-29 17:55:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011_rpt_rollups"
down_revision: str | Sequence[str] | None = "0010_rpt_rca_epi"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DAY = {
    "postgresql": "(date_trunc('day', {} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
    "sqlite": "date({})",
}
BREAKDOWN_DIMENSIONS = ("kind", "region", "kernel_version", "capture_action", "regression")

BREAKDOWN = """
    WITH e AS (
        SELECT {day} AS day, s.kind, e.region, e.kernel_version, e.capture_action, e.regression,
               e.memory_gb
        FROM events e LEFT JOIN signatures s ON s.id = e.signature_id
    )
    {selects}
"""
BREAKDOWN_SELECT = (
    "SELECT day, '{dimension}' AS dimension, COALESCE({dimension}, 'unknown') AS value, "
    "COUNT(*) AS events, SUM(memory_gb) AS memory_gb FROM e {where}GROUP BY day, 3"
)

SIGNATURE_DAILY = """
    SELECT signature_id, {day} AS day, COUNT(*) AS events, COUNT(DISTINCT host_id) AS hosts
    FROM events e WHERE signature_id IS NOT NULL
    GROUP BY signature_id, {day}
"""

FLEET_DAILY = {
    "postgresql": """
        WITH changes AS (
            SELECT (LEAST(h.first_seen, COALESCE(
                       (SELECT MIN(crashed_at) FROM events WHERE host_id = h.id), h.first_seen))
                    AT TIME ZONE 'UTC')::date AS day, 1 AS delta
            FROM hosts h
            UNION ALL
            SELECT (retired_at AT TIME ZONE 'UTC')::date, -1 FROM hosts WHERE retired_at IS NOT NULL
        ), per_day AS (SELECT day, SUM(delta) AS delta FROM changes GROUP BY day)
        SELECT (d::date)::timestamp AT TIME ZONE 'UTC' AS day,
               SUM(COALESCE(per_day.delta, 0)) OVER (ORDER BY d) AS hosts
        FROM generate_series((SELECT MIN(day) FROM per_day),
                             (now() AT TIME ZONE 'UTC')::date, interval '1 day') AS d
        LEFT JOIN per_day ON per_day.day = d::date
    """,
}

# name -> (unique index columns) for the PostgreSQL materialized views.
ROLLUPS = {
    "rpt_daily_breakdown": "(day, dimension, value)",
    "rpt_signature_daily": "(signature_id, day)",
    "rpt_fleet_daily": "(day)",
}


def _breakdown(dialect: str) -> str:
    selects = " UNION ALL ".join(
        BREAKDOWN_SELECT.format(
            dimension=dimension,
            where="WHERE regression IS NOT NULL " if dimension == "regression" else "",
        )
        for dimension in BREAKDOWN_DIMENSIONS
    )
    return BREAKDOWN.format(day=DAY[dialect].format("e.crashed_at"), selects=selects)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        # rpt_signature_daily (0002) and rpt_fleet_daily (0002) already have these shapes.
        op.execute(f"CREATE VIEW rpt_daily_breakdown AS {_breakdown(dialect)}")
        return
    op.execute("DROP VIEW rpt_signature_daily")
    op.execute("DROP VIEW rpt_fleet_daily")
    definitions = {
        "rpt_daily_breakdown": _breakdown(dialect),
        "rpt_signature_daily": SIGNATURE_DAILY.format(day=DAY[dialect].format("e.crashed_at")),
        "rpt_fleet_daily": FLEET_DAILY[dialect],
    }
    for name, sql in definitions.items():
        op.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        op.execute(f"CREATE UNIQUE INDEX uq_{name} ON {name} {ROLLUPS[name]}")
    op.execute(
        "CREATE INDEX ix_events_signature_crashed_report ON events (signature_id, crashed_at) "
        "INCLUDE (hostname, physical_host, region, sku, kernel_version, bios_version, uptime_s)"
    )
    op.execute("CREATE INDEX ix_captures_status_event ON captures (status, event_id)")
    op.execute("CREATE INDEX ix_events_regressed ON events (crashed_at) WHERE regression IS NOT NULL")
    op.execute(
        "CREATE INDEX ix_events_capture_action_crashed ON events (capture_action, crashed_at) "
        "INCLUDE (id, memory_gb)"
    )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP VIEW rpt_daily_breakdown")
        return
    op.execute("DROP INDEX ix_events_capture_action_crashed")
    op.execute("DROP INDEX ix_events_regressed")
    op.execute("DROP INDEX ix_captures_status_event")
    op.execute("DROP INDEX ix_events_signature_crashed_report")
    for name in ROLLUPS:
        op.execute(f"DROP MATERIALIZED VIEW {name}")
    op.execute(
        "CREATE VIEW rpt_signature_daily AS SELECT signature_id, (e.crashed_at AT TIME ZONE 'UTC')::date AS day, "
        "COUNT(*) AS events, COUNT(DISTINCT e.host_id) AS hosts FROM events e "
        "WHERE signature_id IS NOT NULL GROUP BY signature_id, (e.crashed_at AT TIME ZONE 'UTC')::date"
    )
    op.execute(
        "CREATE VIEW rpt_fleet_daily AS "
        + FLEET_DAILY["postgresql"].replace(
            "(d::date)::timestamp AT TIME ZONE 'UTC' AS day", "d::date AS day"
        )
    )
