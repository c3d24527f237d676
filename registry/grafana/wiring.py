"""The grafana domain's place in the application: the tables the Grafana sync keeps."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.table_modules.append("registry.grafana.models")
