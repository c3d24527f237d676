"""reporting views for Grafana alerting: Jira sync backlog, attribute rollouts

Adds to the `rpt_*` contract (see 0002), so alert rules read what Grafana's read-only role
may read and nothing else:

- `rpt_jira_outbox`: one row, the Jira sync's backlog (pending messages of the topics it
  consumes, the oldest pending one's creation time, messages Jira refused permanently).
  Payloads and errors stay out of reach.
- `rpt_attribute_rollouts`: per kernel version, BIOS version and SKU, when the value first
  appeared in the fleet (a host first seen with it, or changing to or from it) and how many
  hosts run it now: what a crash-rate-after-rollout alert compares.
- `rpt_daily_breakdown` (0011) gains the dimensions `bios_version` and `sku`, so that the
  crash-rate alert reads a few hundred daily rows instead of every crash since a rollout
  (2.4 s on a million events with a two-week-old rollout). Its events are read once for all
  dimensions, so two more cost little of the rollups' refresh; a rollup of its own (one
  more scan of events every 5 minutes) cost 13 s. Recreating it drops the read-only role's
  grant on it: `crashreg grafana provision` (or the scheduler's grafana-sync) grants it again,
  as it grants the views added here.

Revision ID: 0017_grafana_alerts
Revises: 0016_epi_components
Create Date: 2026-12-01 07:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017_grafana_alerts"
down_revision: str | Sequence[str] | None = "0016_epi_components"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The outbox topics the Jira sync consumes (registry.jira.state.JIRA_TOPICS as of this revision).
JIRA_TOPICS = (
    "signature.created",
    "signature.regressed",
    "rca.confirmed",
    "rca.flagged",
    "jira.issue_changed",
)
ROLLOUT_ATTRIBUTES = ("kernel_version", "bios_version", "sku")
PERMANENT_ERROR_PREFIX = "permanent: "


def _jira_outbox() -> str:
    topics = ", ".join(f"'{topic}'" for topic in JIRA_TOPICS)
    return f"""
        SELECT SUM(CASE WHEN processed_at IS NULL THEN 1 ELSE 0 END) AS pending,
               MIN(CASE WHEN processed_at IS NULL THEN created_at END) AS oldest_pending,
               SUM(CASE WHEN processed_at IS NOT NULL
                        AND last_error LIKE '{PERMANENT_ERROR_PREFIX}%' THEN 1 ELSE 0 END) AS refused
        FROM outbox WHERE topic IN ({topics})
    """


def _text(literal: str) -> str:
    """A literal of the type of host_attribute_changes.attribute: with every branch of the union of
    one type, PostgreSQL pushes a filter on `attribute` down into the branches."""
    return f"CAST('{literal}' AS VARCHAR(64))"


def _value(column: str) -> str:
    return f"CAST({column} AS VARCHAR(255))"  # host_attribute_changes.old_value/new_value's type


def _attribute_rollouts() -> str:
    """A value appears when a host changes to it, or with the host itself: the host's value
    before its first change of that attribute, or its current value if it never changed."""
    appearances, current = [], []
    never_changed = (
        "NOT EXISTS (SELECT 1 FROM host_attribute_changes c "
        "WHERE c.host_id = h.id AND c.attribute = '{attribute}')"
    )
    for attribute in ROLLOUT_ATTRIBUTES:
        appearances.append(
            f"SELECT {_text(attribute)} AS attribute, {_value(f'h.{attribute}')} AS value, h.first_seen AS seen "
            f"FROM hosts h WHERE h.{attribute} IS NOT NULL AND {never_changed.format(attribute=attribute)}"
        )
        current.append(
            f"SELECT {_text(attribute)} AS attribute, {_value(attribute)} AS value, COUNT(*) AS hosts "
            f"FROM hosts WHERE retired_at IS NULL AND {attribute} IS NOT NULL GROUP BY {attribute}"
        )
    attributes = ", ".join(f"'{a}'" for a in ROLLOUT_ATTRIBUTES)
    appearances += [
        "SELECT c.attribute, c.new_value, c.changed_at FROM host_attribute_changes c "
        f"WHERE c.attribute IN ({attributes}) AND c.new_value IS NOT NULL",
        "SELECT c.attribute, c.old_value, h.first_seen FROM host_attribute_changes c "
        f"JOIN hosts h ON h.id = c.host_id WHERE c.attribute IN ({attributes}) AND c.old_value IS NOT NULL "
        "AND c.changed_at = (SELECT MIN(f.changed_at) FROM host_attribute_changes f "
        "WHERE f.host_id = c.host_id AND f.attribute = c.attribute)",
    ]
    return f"""
        WITH appearances AS ({" UNION ALL ".join(appearances)}),
        current_hosts AS ({" UNION ALL ".join(current)})
        SELECT a.attribute, a.value, MIN(a.seen) AS first_seen, COALESCE(MAX(c.hosts), 0) AS hosts
        FROM appearances a
        LEFT JOIN current_hosts c ON c.attribute = a.attribute AND c.value = a.value
        GROUP BY a.attribute, a.value
    """


VIEWS = {"rpt_jira_outbox": _jira_outbox(), "rpt_attribute_rollouts": _attribute_rollouts()}

DAY = {
    "postgresql": "(date_trunc('day', e.crashed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
    "sqlite": "date(e.crashed_at)",
}
# rpt_daily_breakdown's dimensions as 0011 made them, and as this revision makes them.
DIMENSIONS_0011 = ("kind", "region", "kernel_version", "capture_action", "regression")
DIMENSIONS = (*DIMENSIONS_0011, "bios_version", "sku")


def _breakdown(dialect: str, dimensions: Sequence[str]) -> str:
    """0011's rpt_daily_breakdown over `dimensions`: events read once (a CTE), grouped per dimension."""
    columns = ", ".join(f"s.{d}" if d == "kind" else f"e.{d}" for d in dimensions)
    selects = " UNION ALL ".join(
        f"SELECT day, '{d}' AS dimension, COALESCE({d}, 'unknown') AS value, COUNT(*) AS events, "
        f"SUM(memory_gb) AS memory_gb FROM e {'WHERE regression IS NOT NULL ' if d == 'regression' else ''}"
        "GROUP BY day, 3"
        for d in dimensions
    )
    return (
        f"WITH e AS (SELECT {DAY[dialect]} AS day, {columns}, e.memory_gb "
        f"FROM events e LEFT JOIN signatures s ON s.id = e.signature_id) {selects}"
    )


def _replace_breakdown(dialect: str, dimensions: Sequence[str]) -> None:
    if dialect == "sqlite":
        op.execute("DROP VIEW rpt_daily_breakdown")
        op.execute(f"CREATE VIEW rpt_daily_breakdown AS {_breakdown(dialect, dimensions)}")
        return
    op.execute("DROP MATERIALIZED VIEW rpt_daily_breakdown")
    op.execute(f"CREATE MATERIALIZED VIEW rpt_daily_breakdown AS {_breakdown(dialect, dimensions)}")
    op.execute("CREATE UNIQUE INDEX uq_rpt_daily_breakdown ON rpt_daily_breakdown (day, dimension, value)")


def upgrade() -> None:
    for name, sql in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {sql}")
    _replace_breakdown(op.get_bind().dialect.name, DIMENSIONS)


def downgrade() -> None:
    _replace_breakdown(op.get_bind().dialect.name, DIMENSIONS_0011)
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
