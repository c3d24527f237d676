"""The storage domain's place in the application: dump uploads and downloads, their tables."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.storage.api:blueprint")
    wiring.table_modules.append("registry.storage.models")
