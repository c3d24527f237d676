"""The Jira sync's place in the application: `crashreg jira` and its scheduler jobs."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.commands["jira"] = "sync.jira.commands:jira"
    wiring.job_modules.append("sync.jira.jobs")
