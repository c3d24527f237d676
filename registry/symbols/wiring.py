"""The symbols domain's place in the application: the symbol store's API, the registry's
debuginfod, `crashreg symbols`, the store's figures on /metrics, its tables."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.symbols.api:blueprint")
    wiring.commands["symbols"] = "registry.symbols.commands:symbols"
    wiring.collectors.append("registry.symbols.metrics:symbol_metrics")
    wiring.table_modules.append("registry.symbols.models")
