"""Signature drill-down: one signature's events, hosts, configurations and captures."""

from __future__ import annotations

from typing import Any

from dashboards.common import PIE_OPTIONS, annotations, bucket_panel, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Panel, Query, dashboard

UID = "crashreg-signature"
BREAKDOWNS = (
    ("kernel_version", "Kernel versions"),
    ("region", "Regions"),
    ("sku", "SKUs"),
    ("bios_version", "BIOS versions"),
)
UPTIME_BUCKETS: tuple[tuple[float | None, str], ...] = (
    (600, "< 10 min"),
    (3600, "10 min - 1 h"),
    (86400, "1 h - 1 day"),
    (7 * 86400, "1 - 7 days"),
    (30 * 86400, "7 - 30 days"),
    (None, "> 30 days"),
)


def signature_variable(dialect: Dialect) -> dict[str, Any]:
    return {
        "type": "query",
        "name": "signature",
        "label": "Signature",
        "datasource": dialect.datasource,
        "query": dialect.signature_variable_query(),
        "definition": dialect.signature_variable_query(),
        "refresh": 2,
        "multi": False,
        "includeAll": False,
        "sort": 0,
        "options": [],
    }


def build(dialect: Dialect, public_url: str) -> Dashboard:
    d = dialect
    mine = f"signature_id = $signature AND {d.time_filter('crashed_at')}"
    breakdowns = tuple(
        Panel(
            title,
            "piechart",
            (
                Query(
                    f"SELECT COALESCE({column}, 'unknown') AS {column}, COUNT(*) AS events "
                    f"FROM rpt_events WHERE {mine} GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=6,
            options=PIE_OPTIONS,
        )
        for column, title in BREAKDOWNS
    )
    panels = (
        Panel(
            "Events per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('day')}, SUM(events) AS events, SUM(hosts) AS hosts "
                    f"FROM rpt_signature_daily WHERE signature_id = $signature "
                    f"AND {d.time_filter('day')} GROUP BY 1 ORDER BY 1"
                ),
            ),
            width=16,
        ),
        bucket_panel(
            "Uptime at crash", "uptime_s", UPTIME_BUCKETS, f"FROM rpt_events WHERE {mine}", "uptime", "events"
        ),
        *breakdowns,
        Panel(
            "Hosts",
            "table",
            (
                Query(
                    "SELECT hostname, physical_host, region, sku, COUNT(*) AS events, "
                    f"{d.ts('MIN(crashed_at)')} AS first_crash, "
                    f"{d.ts('MAX(crashed_at)')} AS last_crash FROM rpt_events WHERE {mine} "
                    "GROUP BY hostname, physical_host, region, sku "
                    "ORDER BY events DESC LIMIT 200",
                    table=True,
                    time_columns=("first_crash", "last_crash"),
                ),
            ),
        ),
        Panel(
            "Captures",
            "table",
            (
                Query(
                    f"SELECT {d.ts('created_at')} AS time, hostname, method, status, "
                    "dump_level, gb, duration_s, downtime_s FROM rpt_captures "
                    f"WHERE {mine} ORDER BY created_at DESC LIMIT 200",
                    table=True,
                ),
            ),
        ),
        Panel(
            "Epidemiology findings",
            "table",
            (
                Query(
                    "SELECT f.attribute, f.value, f.baseline, f.in_signature, f.overall, f.lift, "
                    f"f.p_value, f.verdict, {d.ts('f.computed_at')} AS computed_at "
                    "FROM rpt_epidemiology_findings f LEFT JOIN rpt_epidemiology_verdicts v "
                    "ON v.signature_id = f.signature_id WHERE f.signature_id = $signature "
                    "AND (f.baseline = v.baseline OR f.baseline = 'timing') ORDER BY f.p_value, f.lift DESC",
                    table=True,
                    time_columns=("computed_at",),
                ),
            ),
            width=24,
            description="Attribute values over-represented among this signature's hosts.",
        ),
    )
    return dashboard(
        UID,
        "Crash registry: signature drill-down",
        "One signature: events over time, hosts, kernels, regions, SKUs, BIOS, uptime, "
        "captures and epidemiology findings.",
        panels,
        d,
        variables=(signature_variable(d), registry_url_variable(public_url)),
        annotations=annotations(),
    )
