"""Retention's place in the application: the pins API, its figures on /metrics, its tables
(the gc itself runs from sync/retention: a scheduled job and `crashreg storage gc`)."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.retention.api import blueprint
from registry.retention.metrics import retention_metrics


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.collectors.append(retention_metrics)
    wiring.table_modules.append("registry.retention.models")
