"""The epidemiology domain's place in the application: its API, `crashreg epidemiology`, its tables."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.epidemiology.api:blueprint")
    wiring.commands["epidemiology"] = "registry.epidemiology.commands:epidemiology"
    wiring.table_modules.append("registry.epidemiology.models")
