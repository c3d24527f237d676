"""The jira domain's place in the application: the webhook and link state, the sync state on
/metrics, its tables, and a merged signature's issue link carried in a rebuild."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.jira.api import blueprint
from registry.jira.service import carry_link
from registry.jira.state import jira_metrics


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.collectors.append(jira_metrics)
    wiring.table_modules.append("registry.jira.models")
    wiring.signatures.folded.append(carry_link)
