"""Retention's gc in the application: `crashreg storage gc` and the scheduler's storage-gc job."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.commands["storage"] = "sync.retention.commands:storage"
    wiring.job_modules.append("sync.retention.jobs")
