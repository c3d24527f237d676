"""Triage and RCA: what is open and for how long, regressions, RCA coverage and review."""

from __future__ import annotations

from dashboards.common import (
    PIE_OPTIONS,
    SIGNATURE_LINK,
    annotations,
    bucket_panel,
    percentiles,
    registry_url_variable,
)
from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Panel, Query, dashboard

UID = "crashreg-triage"
OPEN_STATUSES = "('new', 'triaged', 'regressed')"
AGE_BUCKETS: tuple[tuple[float | None, str], ...] = (
    (1, "< 1 day"),
    (7, "1 - 7 days"),
    (30, "7 - 30 days"),
    (90, "30 - 90 days"),
    (None, "> 90 days"),
)


def build(dialect: Dialect, public_url: str) -> Dashboard:
    d = dialect
    regressed = f"FROM rpt_events WHERE regression = 'regressed' AND {d.time_filter('crashed_at')}"
    rcas_in_range = f"FROM rpt_rcas WHERE {d.time_filter('created_at')}"
    panels = (
        bucket_panel(
            "Open signatures by age",
            d.days_since("first_seen"),
            AGE_BUCKETS,
            f"FROM rpt_signatures WHERE status IN {OPEN_STATUSES}",
            "age",
            "signatures",
            description="Signatures not resolved or ignored, by time since first seen.",
        ),
        Panel(
            "Days from first seen to Jira done (p50/p95)",
            "stat",
            (
                Query(
                    percentiles(
                        d.days_between("first_seen", "resolved_at"),
                        None,
                        "FROM rpt_signatures WHERE jira_status = 'done' "
                        f"AND resolved_at IS NOT NULL AND {d.time_filter('resolved_at')}",
                    ),
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            unit="d",
        ),
        Panel(
            "Signatures by status",
            "piechart",
            (
                Query(
                    "SELECT status, COUNT(*) AS signatures FROM rpt_signatures "
                    "GROUP BY status ORDER BY status",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            options=PIE_OPTIONS,
        ),
        Panel(
            "Regressed events per day",
            "timeseries",
            (
                Query(
                    f'SELECT {d.day("day")}, SUM(events) AS "regressed events" '
                    "FROM rpt_daily_breakdown WHERE dimension = 'regression' AND value = 'regressed' "
                    f"AND {d.time_filter('day')} GROUP BY 1 ORDER BY 1"
                ),
            ),
        ),
        Panel(
            "Regressions",
            "table",
            (
                Query(
                    "SELECT signature_id, MAX(title) AS title, COUNT(*) AS events, "
                    "COUNT(DISTINCT hostname) AS hosts, MAX(kernel_version) AS kernel_version, "
                    f"{d.ts('MIN(crashed_at)')} AS first_regression, "
                    f"{d.ts('MAX(crashed_at)')} AS last_regression {regressed} "
                    "GROUP BY signature_id ORDER BY events DESC LIMIT 100",
                    table=True,
                    time_columns=("first_regression", "last_regression"),
                ),
            ),
            links=(SIGNATURE_LINK,),
        ),
        Panel(
            "RCA coverage of signatures seen in range",
            "piechart",
            (
                Query(
                    "SELECT CASE WHEN confirmed > 0 THEN 'confirmed RCA' "
                    "WHEN proposed > 0 THEN 'proposed only' ELSE 'no RCA' END AS coverage, "
                    "COUNT(*) AS signatures FROM ("
                    "SELECT s.signature_id, "
                    "SUM(CASE WHEN r.status = 'confirmed' THEN 1 ELSE 0 END) AS confirmed, "
                    "SUM(CASE WHEN r.status = 'proposed' THEN 1 ELSE 0 END) AS proposed "
                    "FROM rpt_signatures s LEFT JOIN rpt_rcas r ON r.signature_id = s.signature_id "
                    f"WHERE s.last_seen >= {_range_start(d)} "
                    "GROUP BY s.signature_id) per_signature GROUP BY 1 ORDER BY 1",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            options=PIE_OPTIONS,
        ),
        Panel(
            "RCAs per week: AI-proposed vs human, by outcome",
            "timeseries",
            (
                Query(
                    f"SELECT {d.week('created_at')}, author_kind || ' ' || status AS rca, "
                    f"COUNT(*) AS rcas {rcas_in_range} GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
            width=16,
            description="RCAs by author kind (ai, human) and status (proposed, confirmed, ...).",
        ),
        Panel(
            "Jira sync backlog",
            "stat",
            (
                Query(
                    "SELECT pending, refused, "
                    f"{d.ts('oldest_pending')} AS oldest_pending FROM rpt_jira_outbox",
                    table=True,
                    time_columns=("oldest_pending",),
                ),
            ),
            width=8,
            description=(
                "Changes the Jira sync still owes (pending), the oldest of them, and those Jira "
                "refused for good (see `crashreg jira requeue`)."
            ),
        ),
    )
    return dashboard(
        UID,
        "Crash registry: triage and RCA",
        "Open signatures by age, time to Jira done, regressions, RCA coverage and review.",
        panels,
        d,
        variables=(registry_url_variable(public_url),),
        annotations=annotations(),
    )


def _range_start(dialect: Dialect) -> str:
    """The start of the dashboard's time range, comparable with a view's timestamp."""
    if dialect.is_postgres:
        return "$__timeFrom()"
    return "datetime($__from / 1000, 'unixepoch')"
