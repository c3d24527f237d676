"""The storage domain's place in the application: dump uploads and downloads, their tables."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.storage.api import blueprint


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.table_modules.append("registry.storage.models")
