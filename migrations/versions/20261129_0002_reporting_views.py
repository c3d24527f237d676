"""reporting views for Grafana

The contract between the registry's tables and Grafana: dashboards query these `rpt_*`
views only, and Grafana's read-only role is granted SELECT on them and nothing else. They
leave out everything secret or raw (tokens, webhook secrets, raw reports, capture URIs).

Revision ID: 0002_reporting_views
Revises: 0001
Create Date: 2026-11-29 17:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002_reporting_views"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Dialect fragments: a UTC calendar day, and "today".
DAY = {
    "postgresql": "(({}) AT TIME ZONE 'UTC')::date",
    "sqlite": "date({})",
}
TODAY = {
    "postgresql": "(now() AT TIME ZONE 'UTC')::date",
    "sqlite": "date('now')",
}
# The calendar days from the first host to today (`days` refers to itself on SQLite).
DAYS = {
    "postgresql": (
        "SELECT d::date FROM generate_series("
        "(SELECT MIN(day) FROM per_day), {today}, interval '1 day') AS d"
    ),
    "sqlite": (
        "SELECT MIN(day) FROM per_day UNION ALL "
        "SELECT date(day, '+1 day') FROM days WHERE day < {today}"
    ),
}
EARLIEST = {"postgresql": "LEAST({}, {})", "sqlite": "min({}, {})"}

HOST_COLUMNS = (
    "physical_host, region, cluster, sku, cpu_model, microcode, bios_version, bmc_version, "
    "kernel_version, os_image, memory_gb, hypervisor, gpu_driver"
)

VIEWS: dict[str, str] = {
    # One row per crash, with the host's attributes as they were when it crashed.
    "rpt_events": """
        SELECT e.id AS event_id, e.signature_id, s.fingerprint, s.title, s.kind,
               s.status AS signature_status, e.crashed_at, {day_crashed} AS day,
               e.received_at, e.hostname, e.physical_host, e.region, e.cluster, e.sku,
               e.cpu_model, e.microcode, e.bios_version, e.bmc_version, e.kernel_version,
               e.os_image, e.memory_gb, e.hypervisor, e.gpu_driver, e.uptime_s,
               e.first_source AS source, e.capture_action, e.capture_reason,
               e.capture_dump_level, e.regression
        FROM events e LEFT JOIN signatures s ON s.id = e.signature_id
    """,
    # One row per (unmerged) signature with its counters and Jira issue.
    "rpt_signatures": """
        SELECT s.id AS signature_id, s.fingerprint, s.title, s.kind, s.function, s.module,
               s.status, s.first_seen, c.last_seen, COALESCE(c.events, 0) AS event_count,
               s.resolved_at, s.resolution, s.fixed_in_kernel, s.capture_policy,
               j.issue_key AS jira_key, j.url AS jira_url, j.status_category AS jira_status
        FROM signatures s
        LEFT JOIN (
            SELECT signature_id, SUM(events) AS events, MAX(last_seen) AS last_seen
            FROM signature_counters GROUP BY signature_id
        ) c ON c.signature_id = s.id
        LEFT JOIN jira_links j ON j.signature_id = s.id
        WHERE s.merged_into_id IS NULL
    """,
    # Daily event and host counts per signature.
    "rpt_signature_daily": """
        SELECT signature_id, {day_crashed} AS day, COUNT(*) AS events,
               COUNT(DISTINCT e.host_id) AS hosts
        FROM events e WHERE signature_id IS NOT NULL
        GROUP BY signature_id, {day_crashed}
    """,
    # Captures with the crash they belong to (no URIs: they may carry credentials).
    "rpt_captures": """
        SELECT c.id AS capture_id, c.event_id, c.signature_id, e.crashed_at, c.created_at,
               c.method, c.status, c.dump_level, c.bytes, c.bytes / 1e9 AS gb, c.duration_s,
               c.downtime_s, e.hostname, e.memory_gb, e.region, e.sku, e.capture_action
        FROM captures c JOIN events e ON e.id = c.event_id
    """,
    # The inventory, without free-form labels.
    "rpt_hosts": f"""
        SELECT hostname, {HOST_COLUMNS}, first_seen, retired_at, in_inventory
        FROM hosts
    """,
    # Fleet size per UTC day: a host counts from its first sighting (or first crash, for
    # back-filled history) until it is retired.
    "rpt_fleet_daily": """
        WITH RECURSIVE changes AS (
            SELECT {day_host_start} AS day, 1 AS delta FROM hosts h
            UNION ALL
            SELECT {day_retired} AS day, -1 AS delta FROM hosts h WHERE retired_at IS NOT NULL
        ), per_day AS (
            SELECT day, SUM(delta) AS delta FROM changes GROUP BY day
        ), days(day) AS ({days})
        SELECT days.day, SUM(COALESCE(per_day.delta, 0)) OVER (ORDER BY days.day) AS hosts
        FROM days LEFT JOIN per_day ON per_day.day = days.day
        WHERE days.day IS NOT NULL
    """,
    # Hosts per kernel version now: denominators for per-kernel crash rates.
    "rpt_kernel_fleet": """
        SELECT kernel_version, COUNT(*) AS hosts FROM hosts
        WHERE retired_at IS NULL AND kernel_version IS NOT NULL
        GROUP BY kernel_version
    """,
    # What Grafana marks on the time axis; `annotation_key` names each mark once.
    "rpt_annotations": """
        SELECT first_seen AS time, 'first-seen' AS kind, id AS signature_id,
               'first-seen:' || CAST(id AS VARCHAR(20)) AS annotation_key,
               'First sighting: ' || title AS text, 'crashreg,first-seen,' || kind AS tags
        FROM signatures WHERE merged_into_id IS NULL
        UNION ALL
        SELECT MIN(e.crashed_at), 'regression', e.signature_id,
               'regression:' || CAST(e.signature_id AS VARCHAR(20)) || ':'
                   || CAST({day_crashed} AS VARCHAR(10)),
               'Regression: ' || MAX(s.title), 'crashreg,regression'
        FROM events e JOIN signatures s ON s.id = e.signature_id
        WHERE e.regression = 'regressed'
        GROUP BY e.signature_id, {day_crashed}
        UNION ALL
        SELECT MIN(changed_at), 'kernel-rollout', NULL, 'kernel-rollout:' || new_value,
               'Kernel rollout: ' || new_value, 'crashreg,kernel-rollout'
        FROM host_attribute_changes
        WHERE attribute = 'kernel_version' AND new_value IS NOT NULL
        GROUP BY new_value
    """,
}


def render(sql: str, dialect: str) -> str:
    day = DAY[dialect]
    first_crash = "(SELECT MIN(crashed_at) FROM events WHERE host_id = h.id)"
    host_start = EARLIEST[dialect].format("h.first_seen", f"COALESCE({first_crash}, h.first_seen)")
    return sql.format(
        day_crashed=day.format("e.crashed_at"),
        day_host_start=day.format(host_start),
        day_retired=day.format("h.retired_at"),
        days=DAYS[dialect].format(today=TODAY[dialect]),
    )


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for name, sql in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {render(sql, dialect)}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
