"""Epidemiology: single-host suspects, hardware-configuration findings, kernel regressions."""

from __future__ import annotations

from dashboards.common import SIGNATURE_LINK, annotations, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Panel, Query, dashboard

UID = "crashreg-epidemiology"
KERNEL_RATE_PANEL = "Crash rate by kernel version (crashes per 1,000 host-days)"


# A signature's findings from the analysis its verdict rests on (rpt_epidemiology_findings also
# holds the case-control view's, the same values again against another baseline).
OF_THE_VERDICT = (
    "JOIN rpt_epidemiology_verdicts v ON v.signature_id = f.signature_id AND f.baseline = v.baseline"
)


def _findings(d: Dialect, title: str, where: str, description: str) -> Panel:
    return Panel(
        title,
        "table",
        (
            Query(
                "SELECT f.signature_id, s.title, f.verdict, f.attribute, f.value, f.baseline, "
                "f.in_signature, f.overall, f.lift, f.p_value, f.events, f.hosts, "
                f"{d.ts('f.computed_at')} AS computed_at FROM rpt_epidemiology_findings f "
                f"JOIN rpt_signatures s ON s.signature_id = f.signature_id {OF_THE_VERDICT} "
                f"WHERE {where} ORDER BY f.p_value, f.lift DESC LIMIT 200",
                table=True,
                time_columns=("computed_at",),
            ),
        ),
        width=24,
        links=(SIGNATURE_LINK,),
        description=description,
    )


def _kernel_rates(d: Dialect) -> Panel:
    """Crashes per 1,000 host-days of each kernel: its crashes in the range over the time hosts
    ran it in the same range, never over the hosts running it now, which during a rollout makes
    the new kernel look better than the old one. The host-time is summed from the kernels' daily
    rollup in delta form (registry/rollups/kernels.py): over [a, b), (b - a) x the intervals
    started minus ended before b, less each day's (starts - ends) x (day - a) plus its moments;
    its hosts, the intervals started before b less those ended by a and the gaps inside."""
    w_from, w_to = d.range_days_epochs()
    day, ended, resumed = d.epoch("k.day"), d.epoch("g.ended_day"), d.epoch("g.resumed_day")
    window = f"CROSS JOIN (SELECT {w_from} AS w_from, {w_to} AS w_to) w"
    return Panel(
        KERNEL_RATE_PANEL,
        "table",
        (
            Query(
                "SELECT kernel_version, crashes, hosts, host_days, crashes_per_1k_host_days FROM ("
                "SELECT kernel_version, SUM(crashes) AS crashes, SUM(hosts) AS hosts, "
                "SUM(host_days) AS host_days, "
                "SUM(crashes) * 1000.0 / NULLIF(SUM(host_days), 0) AS crashes_per_1k_host_days FROM ("
                "SELECT b.value AS kernel_version, SUM(b.events) AS crashes, 0 AS hosts, 0 AS host_days "
                "FROM rpt_daily_breakdown b "
                f"WHERE b.dimension = 'kernel_version' AND {d.time_filter('b.day')} GROUP BY b.value "
                "UNION ALL "
                "SELECT k.kernel_version, 0, "
                f"SUM(k.starts) - SUM(CASE WHEN {day} < w.w_from THEN k.ends ELSE 0 END), "
                "((w.w_to - w.w_from) * SUM(k.starts - k.ends) "
                f"- SUM(CASE WHEN {day} >= w.w_from "
                f"THEN (k.starts - k.ends) * ({day} - w.w_from) + k.offset_s ELSE 0 END)) / 86400.0 "
                f"FROM rpt_kernel_daily k {window} WHERE {day} < w.w_to AND w.w_from < w.w_to "
                "GROUP BY k.kernel_version, w.w_from, w.w_to "
                "UNION ALL "
                f"SELECT g.kernel_version, 0, -SUM(g.gaps), 0 FROM rpt_kernel_gaps g {window} "
                f"WHERE {ended} >= w.w_from AND {resumed} < w.w_to GROUP BY g.kernel_version"
                ") r GROUP BY kernel_version) t WHERE crashes > 0 OR hosts > 0 "
                "ORDER BY CASE WHEN crashes_per_1k_host_days IS NULL THEN 1 ELSE 0 END, "
                "crashes_per_1k_host_days DESC, crashes DESC",
                table=True,
                time_columns=(),
            ),
        ),
        width=24,
        description=(
            "Each kernel's crashes in the time range per 1,000 host-days it ran in the same range "
            "(whole UTC days, as the daily panels count them; today's up to now): a host running "
            "a kernel for the whole range of 30 days adds 30 host-days. Host-days come from the "
            "inventory's history of kernel changes; hosts with no kernel recorded are left out. "
            "No rate: crashes of a kernel no host is recorded running."
        ),
    )


def build(dialect: Dialect, public_url: str) -> Dashboard:
    d = dialect
    panels = (
        Panel(
            "Single-host suspects",
            "table",
            (
                Query(
                    "SELECT v.signature_id, s.title, v.top_value AS physical_host, v.events, v.hosts, "
                    f"v.top_lift AS lift, v.top_p_value AS p_value, v.reason, {d.ts('v.computed_at')} "
                    "AS computed_at FROM rpt_epidemiology_verdicts v "
                    "JOIN rpt_signatures s ON s.signature_id = v.signature_id "
                    "WHERE v.verdict = 'single-host' ORDER BY v.events DESC LIMIT 100",
                    table=True,
                    time_columns=("computed_at",),
                ),
            ),
            width=24,
            links=(SIGNATURE_LINK,),
            description="Signatures whose crashes come from one physical host: suspect the hardware.",
        ),
        Panel(
            "Physical hosts crashing across signatures",
            "table",
            (
                Query(
                    "SELECT rank, physical_host, crashes, signatures, expected_signatures, p_value, "
                    f"evidence, {d.ts('computed_at')} AS computed_at FROM rpt_epidemiology_suspects "
                    "ORDER BY rank",
                    table=True,
                    time_columns=("computed_at",),
                ),
            ),
            width=24,
            description="Fleet-wide suspects: hosts with more distinct signatures than chance explains.",
        ),
        _findings(
            d,
            "Hardware-configuration findings",
            "f.verdict = 'hardware-config'",
            "Attribute values (SKU, CPU, BIOS, microcode...) over-represented in a signature.",
        ),
        _findings(
            d,
            "Kernel-version findings",
            "f.attribute = 'kernel_version'",
            "Kernel versions over-represented in a signature: candidate regressions.",
        ),
        _kernel_rates(d),
    )
    return dashboard(
        UID,
        "Crash registry: epidemiology",
        "Where crashes concentrate: single hosts, hardware configurations, kernel versions.",
        panels,
        d,
        variables=(registry_url_variable(public_url),),
        annotations=annotations(),
    )
