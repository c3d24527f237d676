"""The rollups' place in the application: their tables and `crashreg rollups`."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.table_modules.append("registry.rollups.models")
    wiring.commands["rollups"] = "registry.rollups.commands:rollups"
