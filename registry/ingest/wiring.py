"""The ingest domain's place in the application: POST /reports, events, `crashreg import`."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.ingest.api:blueprint")
    wiring.commands["import"] = "registry.ingest.commands:import_command"
    wiring.collectors.append("registry.ingest.unfingerprinted:unfingerprinted_metrics")
    wiring.collectors.append("registry.partitions:partition_metrics")
