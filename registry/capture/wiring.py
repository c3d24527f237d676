"""The capture domain's place in the application: its API, the savings on /metrics, its
tables, and captures following their events when a rebuild moves them."""

from __future__ import annotations

from registry.capture.api import blueprint, savings_metrics
from registry.capture.service import follow_events
from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.collectors.append(savings_metrics)
    wiring.table_modules.append("registry.capture.models")
    wiring.signatures.events_moved.append(follow_events)
