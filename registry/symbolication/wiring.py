"""The symbolication domain's place in the application: the step before the engine, its table."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.symbolication = "registry.symbolication.service:install"
    wiring.symbolication_on_demand = "registry.symbolication.service:on_demand"
    wiring.frame_names_on_demand = "registry.symbolication.service:names_on_demand"
    wiring.table_modules.append("registry.symbolication.models")
