"""The epidemiology domain's place in the application: its API, `crashreg epidemiology`, its tables."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.epidemiology.api import blueprint
from registry.epidemiology.commands import epidemiology


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.commands.append(epidemiology)
    wiring.table_modules.append("registry.epidemiology.models")
