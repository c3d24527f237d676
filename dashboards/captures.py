"""Captures and downtime: what was dumped, what dedup saved, how long capture takes."""

from __future__ import annotations

from typing import Any

from dashboards.common import annotations, percentiles, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Panel, Query, dashboard

UID = "crashreg-captures"


def build(dialect: Dialect, public_url: str) -> dict[str, Any]:
    d = dialect
    events_in_range = d.time_filter("crashed_at")
    skipped = f"FROM rpt_events WHERE capture_action = 'skip' AND {events_in_range}"
    panels = (
        Panel(
            "Capture decisions per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('crashed_at')}, capture_action, COUNT(*) AS events "
                    f"FROM rpt_events WHERE {events_in_range} GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
            width=16,
        ),
        Panel(
            "Full vs filtered vs skipped",
            "piechart",
            (
                Query(
                    "SELECT capture_action, COUNT(*) AS events FROM rpt_events "
                    f"WHERE {events_in_range} GROUP BY 1 ORDER BY 1",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            options={"reduceOptions": {"values": True, "calcs": ["lastNotNull"]}},
        ),
        Panel(
            "Saved by dedup",
            "stat",
            (
                Query(
                    f"SELECT (SELECT COALESCE(SUM(memory_gb), 0) {skipped}) + "
                    "(SELECT COALESCE(SUM(memory_gb - gb), 0) FROM rpt_captures "
                    "WHERE capture_action = 'filtered' AND status = 'completed' "
                    f'AND memory_gb IS NOT NULL AND {events_in_range}) AS "GB not dumped", '
                    f"(SELECT COUNT(*) {skipped}) * "
                    "(SELECT COALESCE(AVG(downtime_s), 0) FROM rpt_captures "
                    "WHERE capture_action = 'full' AND status = 'completed' "
                    f'AND {events_in_range}) / 3600.0 AS "downtime hours saved"',
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            description=(
                "A skipped capture saves a full dump (the host's memory) and the downtime "
                "of an average completed full capture; a filtered one saves memory minus "
                "the filtered dump."
            ),
        ),
        Panel(
            "Capture duration p50/p95 by host memory (GB)",
            "table",
            (
                Query(
                    percentiles(
                        "duration_s",
                        "memory_gb",
                        "FROM rpt_captures WHERE status = 'completed' "
                        f"AND duration_s IS NOT NULL AND {events_in_range}",
                    ),
                    table=True,
                    time_columns=(),
                ),
            ),
            width=16,
            unit="s",
        ),
        Panel(
            "Failed captures per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('crashed_at')}, method, COUNT(*) AS failed "
                    f"FROM rpt_captures WHERE status = 'failed' AND {events_in_range} "
                    "GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
        ),
        Panel(
            "Failed captures",
            "table",
            (
                Query(
                    f"SELECT {d.ts('crashed_at')} AS time, hostname, signature_id, method, "
                    "dump_level, memory_gb, duration_s FROM rpt_captures "
                    f"WHERE status = 'failed' AND {events_in_range} "
                    "ORDER BY crashed_at DESC LIMIT 200",
                    table=True,
                ),
            ),
        ),
    )
    return dashboard(
        UID,
        "Crash registry: captures and downtime",
        "Full vs filtered vs skipped captures, what dedup saved, capture durations, failures.",
        panels,
        d,
        variables=(registry_url_variable(public_url),),
        annotations=annotations(),
    )
