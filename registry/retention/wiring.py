"""Retention's place in the application: the pins API and its tables."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.retention.api import blueprint


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.table_modules.append("registry.retention.models")
