"""Fleet overview: how much crashes, where, on what, and which signatures matter most."""

from __future__ import annotations

from typing import Any

from dashboards.common import JIRA_LINK, SIGNATURE_LINK, annotations, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Panel, Query, dashboard

UID = "crashreg-fleet"
BREAKDOWNS = (("kind", "Crashes per day by kind"), ("region", "Crashes per day by region"))


def build(dialect: Dialect, public_url: str) -> dict[str, Any]:
    d = dialect
    in_range = d.time_filter("crashed_at")
    breakdowns = tuple(
        Panel(
            title,
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('crashed_at')}, COALESCE({column}, 'unknown') AS {column}, "
                    f"COUNT(*) AS crashes FROM rpt_events WHERE {in_range} "
                    "GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
        )
        for column, title in BREAKDOWNS
    )
    panels = (
        Panel(
            "Crashes per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('crashed_at')}, COUNT(*) AS crashes FROM rpt_events "
                    f"WHERE {in_range} GROUP BY 1 ORDER BY 1"
                ),
            ),
        ),
        Panel(
            "Crashes per day per 1,000 hosts",
            "timeseries",
            (
                Query(
                    'SELECT c.time, c.crashes * 1000.0 / NULLIF(f.hosts, 0) AS "crashes per 1k hosts" '
                    f"FROM (SELECT {d.day('crashed_at')}, day, COUNT(*) AS crashes FROM rpt_events "
                    f"WHERE {in_range} GROUP BY 1, day) c "
                    "JOIN rpt_fleet_daily f ON f.day = c.day ORDER BY 1"
                ),
            ),
            description="Daily crashes divided by the fleet size that day (rpt_fleet_daily).",
        ),
        *breakdowns,
        Panel(
            "Crashes per day by kernel version (top 10)",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('crashed_at')}, kernel_version, COUNT(*) AS crashes "
                    f"FROM rpt_events WHERE {in_range} AND kernel_version IN ("
                    f"SELECT kernel_version FROM rpt_events WHERE {in_range} "
                    "GROUP BY kernel_version ORDER BY COUNT(*) DESC LIMIT 10) "
                    "GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
        ),
        Panel(
            "New signatures per week",
            "timeseries",
            (
                Query(
                    f'SELECT {d.week("first_seen")}, COUNT(*) AS "new signatures" '
                    f"FROM rpt_signatures WHERE {d.time_filter('first_seen')} "
                    "GROUP BY 1 ORDER BY 1"
                ),
            ),
        ),
        Panel(
            "Top signatures",
            "table",
            (
                Query(
                    "SELECT s.signature_id, s.title, s.kind, s.status, s.jira_key, "
                    "s.jira_status, COUNT(*) AS events, COUNT(DISTINCT e.hostname) AS hosts, "
                    f"{d.ts('s.first_seen')} AS first_seen, {d.ts('s.last_seen')} AS last_seen, "
                    "s.jira_url FROM rpt_events e "
                    "JOIN rpt_signatures s ON s.signature_id = e.signature_id "
                    f"WHERE {d.time_filter('e.crashed_at')} "
                    "GROUP BY s.signature_id, s.title, s.kind, s.status, s.jira_key, "
                    "s.jira_status, s.first_seen, s.last_seen, s.jira_url "
                    "ORDER BY events DESC LIMIT 50",
                    table=True,
                    time_columns=("first_seen", "last_seen"),
                ),
            ),
            width=24,
            height=12,
            links=(SIGNATURE_LINK, JIRA_LINK),
            description="Signatures by events in the time range; titles link to crashreg.",
        ),
    )
    return dashboard(
        UID,
        "Crash registry: fleet overview",
        "Crashes per day and per 1,000 hosts, by kind, region and kernel; top signatures.",
        panels,
        d,
        variables=(registry_url_variable(public_url),),
        annotations=annotations(),
    )
