"""Symbolication's place in the scheduler: the symbols-arrived job."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.job_modules.append("sync.symbolication.jobs")
