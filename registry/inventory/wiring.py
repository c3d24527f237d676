"""The inventory domain's place in the application: POST /hosts and the fleet's reads."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.inventory.api:blueprint")
