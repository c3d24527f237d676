"""The Grafana sync's place in the application: `crashreg grafana` and its scheduler jobs."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.commands["grafana"] = "sync.grafana.commands:grafana"
    wiring.job_modules.append("sync.grafana.jobs")
