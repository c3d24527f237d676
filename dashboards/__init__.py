"""crashreg's Grafana dashboards as code: plain builders producing Grafana 11 JSON."""

from __future__ import annotations

from dashboards import captures, epidemiology, fleet, signature, triage
from dashboards.dialects import DIALECTS, Dialect
from dashboards.model import Dashboard

MODULES = (fleet, signature, captures, triage, epidemiology)
FOLDER_UID = "crashreg"
FOLDER_TITLE = "Crash registry"


def build_dashboards(dialect: Dialect | str, public_url: str) -> list[Dashboard]:
    """Every dashboard for one SQL dialect ("postgresql" or "sqlite")."""
    chosen = DIALECTS[dialect] if isinstance(dialect, str) else dialect
    return [module.build(chosen, public_url) for module in MODULES]
