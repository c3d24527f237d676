"""The Jira sync's place in the application: `crashreg jira` and its scheduler jobs."""

from __future__ import annotations

from registry.core.wiring import Wiring
from sync.jira.commands import jira


def register(wiring: Wiring) -> None:
    wiring.commands.append(jira)
    wiring.job_modules.append("sync.jira.jobs")
