"""Captures and downtime: what was dumped, what dedup saved, how long capture takes, what the
dump store holds and what retention freed."""

from __future__ import annotations

from dashboards.common import PIE_OPTIONS, annotations, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Panel, Query, dashboard

UID = "crashreg-captures"
NO_SIGNATURE_PANEL = "Reports without a signature per day"


def build(dialect: Dialect, public_url: str) -> Dashboard:
    d = dialect
    # Captures belong to events the registry asked to capture: the decision narrows the scan.
    captured = f"capture_action IN ('full', 'filtered') AND {d.time_filter('crashed_at')}"
    decisions = f"FROM rpt_daily_breakdown WHERE dimension = 'capture_action' AND {d.time_filter('day')}"
    skipped = f"{decisions} AND value = 'skip'"
    captures_in_range = d.time_filter("day")
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
            options=PIE_OPTIONS,
        ),
        Panel(
            "Saved by dedup",
            "stat",
            (
                Query(
                    f"SELECT (SELECT COALESCE(SUM(memory_gb), 0) {skipped}) + "
                    "(SELECT COALESCE(SUM(memory_gb_total - gb), 0) FROM rpt_capture_daily "
                    "WHERE capture_action = 'filtered' AND status = 'completed' "
                    f'AND memory_gb IS NOT NULL AND {captures_in_range}) AS "GB not dumped", '
                    f"(SELECT COALESCE(SUM(events), 0) {skipped}) * "
                    "(SELECT COALESCE(SUM(downtime_s) / NULLIF(SUM(captures), 0), 0) "
                    "FROM rpt_capture_daily WHERE capture_action = 'full' AND status = 'completed' "
                    f'AND downtime_s IS NOT NULL AND {captures_in_range}) / 3600.0 AS "downtime hours saved"',
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
                    "WITH h AS (SELECT memory_gb, duration_s, SUM(captures) AS n "
                    "FROM rpt_capture_daily WHERE status = 'completed' AND duration_s IS NOT NULL "
                    f"AND {captures_in_range} GROUP BY memory_gb, duration_s), "
                    "c AS (SELECT memory_gb, duration_s, "
                    "SUM(n) OVER (PARTITION BY memory_gb ORDER BY duration_s) AS cum, "
                    "SUM(n) OVER (PARTITION BY memory_gb) AS total FROM h) "
                    "SELECT memory_gb, MIN(CASE WHEN cum >= 0.5 * total THEN duration_s END) AS p50, "
                    "MIN(CASE WHEN cum >= 0.95 * total THEN duration_s END) AS p95, "
                    "MAX(total) AS samples FROM c GROUP BY memory_gb ORDER BY memory_gb",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=16,
            unit="s",
            description="Nearest-rank percentiles of completed captures (PostgreSQL: within 5%).",
        ),
        Panel(
            "Dump store by state",
            "bargauge",
            (
                Query(
                    "SELECT state, COALESCE(SUM(bytes), 0) AS bytes FROM rpt_dumps "
                    "GROUP BY state ORDER BY state",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            unit="bytes",
            description=(
                "Bytes of dumps in the store now: stored, being uploaded, being deleted, and deleted by "
                "retention (kept as history). Not limited to the time range."
            ),
        ),
        Panel(
            "Dump bytes freed by retention per day",
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('deleted_at')}, SUM(bytes) AS freed FROM rpt_dumps "
                    f"WHERE state = 'deleted' AND {d.time_filter('deleted_at')} GROUP BY 1 ORDER BY 1"
                ),
            ),
            width=16,
            unit="bytes",
            description="What retention's gc deleted (docs/retention.md): old dumps, fixed bugs' dumps.",
        ),
        Panel(
            NO_SIGNATURE_PANEL,
            "timeseries",
            (
                Query(
                    f"SELECT {d.day('crashed_at')}, cause, COUNT(*) AS reports "
                    f"FROM rpt_unfingerprinted_events WHERE {d.time_filter('crashed_at')} "
                    "GROUP BY 1, 2 ORDER BY 1"
                ),
            ),
            width=16,
            description=(
                "Crash events whose reports hold no crash the engine recognises (no_crash: garbled, "
                "truncated, crash-free) or that it failed on (engine_failed). They are captured within "
                "their own budget (docs/capture.md); their text is on the registry's /unfingerprinted page."
            ),
        ),
        Panel(
            "Reports without a signature: capture answers",
            "piechart",
            (
                Query(
                    "SELECT capture_action, COUNT(*) AS reports FROM rpt_unfingerprinted_events "
                    f"WHERE {d.time_filter('crashed_at')} GROUP BY 1 ORDER BY 1",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=8,
            options=PIE_OPTIONS,
            description="full: within the budget; skip: past it; none: a live or pstore report.",
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
