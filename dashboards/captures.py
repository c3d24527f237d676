"""Captures and downtime: what was dumped, what dedup saved, how long capture takes."""

from __future__ import annotations

from typing import Any

from dashboards.common import annotations, percentiles, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Panel, Query, dashboard

UID = "crashreg-captures"


def build(dialect: Dialect, public_url: str) -> dict[str, Any]:
    d = dialect
    # Captures belong to events the registry asked to capture: the decision narrows the scan.
    captured = f"capture_action IN ('full', 'filtered') AND {d.time_filter('crashed_at')}"
    decisions = f"FROM rpt_daily_breakdown WHERE dimension = 'capture_action' AND {d.time_filter('day')}"
    skipped = f"{decisions} AND value = 'skip'"
    panels = (
        Panel(
            "Capture decisions per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('day')}, value AS capture_action, SUM(events) AS events "
                    f"{decisions} GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
            width=16,
        ),
        Panel(
            "Full vs filtered vs skipped",
            "piechart",
            (
                Query(
                    f"SELECT value AS capture_action, SUM(events) AS events {decisions} "
                    "GROUP BY 1 ORDER BY 1",
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
                    f'AND memory_gb IS NOT NULL AND {captured}) AS "GB not dumped", '
                    f"(SELECT COALESCE(SUM(events), 0) {skipped}) * "
                    "(SELECT COALESCE(AVG(downtime_s), 0) FROM rpt_captures "
                    "WHERE capture_action = 'full' AND status = 'completed' "
                    f'AND {captured}) / 3600.0 AS "downtime hours saved"',
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
                        f"AND duration_s IS NOT NULL AND {captured}",
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
                    f"FROM rpt_captures WHERE status = 'failed' AND {captured} "
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
                    f"WHERE status = 'failed' AND {captured} "
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
