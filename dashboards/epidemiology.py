"""Epidemiology: single-host suspects, hardware-configuration findings, kernel regressions."""

from __future__ import annotations

from dashboards.common import SIGNATURE_LINK, annotations, registry_url_variable
from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Panel, Query, dashboard

UID = "crashreg-epidemiology"


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
        Panel(
            "Crash rate by kernel version (per 1,000 hosts running it)",
            "table",
            (
                Query(
                    "SELECT b.value AS kernel_version, SUM(b.events) AS crashes, k.hosts, "
                    "SUM(b.events) * 1000.0 / NULLIF(k.hosts, 0) AS crashes_per_1k_hosts "
                    "FROM rpt_daily_breakdown b "
                    "LEFT JOIN rpt_kernel_fleet k ON k.kernel_version = b.value "
                    f"WHERE b.dimension = 'kernel_version' AND {d.time_filter('b.day')} "
                    "GROUP BY b.value, k.hosts ORDER BY crashes_per_1k_hosts DESC",
                    table=True,
                    time_columns=(),
                ),
            ),
            width=24,
        ),
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
