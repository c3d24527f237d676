"""Retention's place in the application: the pins API, its figures on /metrics, its tables
(the gc itself runs from sync/retention: a scheduled job and `crashreg storage gc`)."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.retention.api:blueprint")
    wiring.collectors.append("registry.retention.metrics:retention_metrics")
    wiring.table_modules.append("registry.retention.models")
