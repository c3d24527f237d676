"""The capture domain's place in the application: its API, the savings on /metrics, its
tables, and captures following their events when a rebuild moves them."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.capture.api:blueprint")
    wiring.collectors.append("registry.capture.api:savings_metrics")
    wiring.table_modules.append("registry.capture.models")
    wiring.signatures.events_moved.append("registry.capture.service:follow_events")
