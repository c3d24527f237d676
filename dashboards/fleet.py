"""Fleet overview: how much crashes, where, on what, and which signatures matter most."""

from __future__ import annotations

from dashboards.common import JIRA_LINK, SIGNATURE_LINK, annotations, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Panel, Query, dashboard

UID = "crashreg-fleet"
BREAKDOWNS = (
    ("kind", "Crashes per day by kind"),
    ("region", "Crashes per day by region"),
    ("source", "Crashes per day by source (live_kernel: oopses and warnings hosts survived)"),
)


def build(dialect: Dialect, public_url: str) -> Dashboard:
    d = dialect
    in_range = d.time_filter("day")

    def per_day(dimension: str, extra: str = "") -> str:
        return (
            f"SELECT {d.day('day')}, value AS {dimension}, SUM(events) AS crashes "
            f"FROM rpt_daily_breakdown WHERE dimension = '{dimension}' AND {in_range}{extra} "
            "GROUP BY 1, 2 ORDER BY 1"
        )

    breakdowns = tuple(Panel(title, "timeseries", (Query(per_day(column)),)) for column, title in BREAKDOWNS)
    top_kernels = (
        " AND value IN (SELECT value FROM rpt_daily_breakdown WHERE dimension = 'kernel_version' "
        f"AND {in_range} GROUP BY value ORDER BY SUM(events) DESC LIMIT 10)"
    )
    panels = (
        Panel(
            "Crashes per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('day')}, SUM(events) AS crashes FROM rpt_daily_breakdown "
                    f"WHERE dimension = 'kind' AND {in_range} GROUP BY 1 ORDER BY 1"
                ),
            ),
        ),
        Panel(
            "Crashes per day per 1,000 hosts",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('b.day')}, "
                    'SUM(b.events) * 1000.0 / NULLIF(MAX(f.hosts), 0) AS "crashes per 1k hosts" '
                    "FROM rpt_daily_breakdown b JOIN rpt_fleet_daily f ON f.day = b.day "
                    f"WHERE b.dimension = 'kind' AND {d.time_filter('b.day')} GROUP BY 1 ORDER BY 1"
                ),
            ),
            description="Daily crashes divided by the fleet size that day (rpt_fleet_daily).",
        ),
        *breakdowns,
        Panel(
            "Crashes per day by kernel version (top 10)",
            "timeseries",
            (Query(per_day("kernel_version", top_kernels)),),
        ),
        Panel(
            "Live kernel reports per day, with their repeats",
            "timeseries",
            (
                Query(
                    f'SELECT {d.day("day")}, SUM(events) AS "reports (events)", '
                    'SUM(events) + SUM(repeats) AS "times printed" FROM rpt_daily_breakdown '
                    f"WHERE dimension = 'source' AND value = 'live_kernel' AND {in_range} "
                    "GROUP BY 1 ORDER BY 1"
                ),
            ),
            description="Oopses and warnings of running hosts (the kernel log watcher): one event "
            "per report, and how many times they were printed in all (a WARN_ON in a hot path "
            "is reported once, then its count once a minute).",
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
                    "s.jira_status, SUM(r.events) AS events, MAX(r.hosts) AS peak_hosts_per_day, "
                    f"{d.ts('s.first_seen')} AS first_seen, {d.ts('s.last_seen')} AS last_seen, "
                    "s.jira_url FROM rpt_signature_daily r "
                    "JOIN rpt_signatures s ON s.signature_id = r.signature_id "
                    f"WHERE {d.time_filter('r.day')} "
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
            description="Signatures by events in the time range; rows link to crashreg and Jira.",
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
