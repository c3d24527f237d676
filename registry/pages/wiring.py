"""The pages' place in the application: the HTML views and their session tables."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.pages.views import blueprint


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.table_modules.append("registry.pages.models")
