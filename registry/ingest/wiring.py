"""The ingest domain's place in the application: POST /reports, events, `crashreg import`."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.ingest.api import blueprint
from registry.ingest.commands import import_command
from registry.ingest.unfingerprinted import unfingerprinted_metrics


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.commands.append(import_command)
    wiring.collectors.append(unfingerprinted_metrics)
