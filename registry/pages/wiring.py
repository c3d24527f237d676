"""The pages' place in the application: the HTML views and their session tables."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.pages.views:blueprint")
    wiring.table_modules.append("registry.pages.models")
