"""Partition maintenance's place in the application: its scheduler job."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.job_modules.append("sync.partitions.jobs")
