"""The jira domain's place in the application: the webhook and link state, the sync state on
/metrics, its tables, and a merged signature's issue link carried in a rebuild."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.jira.api:blueprint")
    wiring.collectors.append("registry.jira.state:jira_metrics")
    wiring.table_modules.append("registry.jira.models")
    wiring.signatures.folded.append("registry.jira.service:carry_link")
