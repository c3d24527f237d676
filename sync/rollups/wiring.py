"""The rollups in the scheduler: the rollups job."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.job_modules.append("sync.rollups.jobs")
