"""The Grafana sync's place in the application: `crashreg grafana` and its scheduler jobs."""

from __future__ import annotations

from registry.core.wiring import Wiring
from sync.grafana.commands import grafana


def register(wiring: Wiring) -> None:
    wiring.commands.append(grafana)
    wiring.job_modules.append("sync.grafana.jobs")
