"""The Jira jobs the scheduler runs: a frequent sync round and a slower full reconciliation."""

from __future__ import annotations

import threading

from sync.jira.config import JiraOptions
from sync.jira.run import SyncReport, sync_once
from sync.scheduler import JobContext, register_job

# One Jira round at a time in this process (the leader lock covers other processes).
ROUND = threading.Lock()


def summarize(report: SyncReport) -> dict[str, object]:
    return {
        "paused_until": report.paused_until and report.paused_until.isoformat(),
        "processed": report.drain.processed,
        "failed": report.drain.failed,
        "given_up": report.drain.given_up,
        "facts_pushed": report.facts_pushed,
        "created": report.created,
        "reconciled": report.reconcile and report.reconcile.applied,
        "errors": report.errors[:3] + report.drain.errors[:3],
    }


@register_job("jira-sync", seconds=30, enabled=lambda settings: settings.jira.enabled)
def jira_sync(context: JobContext) -> dict[str, object]:
    options = JiraOptions.from_settings(context.settings)
    with ROUND:
        return summarize(sync_once(context.database, options, context.clock, with_reconcile=False))


@register_job("jira-reconcile", seconds=600, enabled=lambda settings: settings.jira.enabled)
def jira_reconcile(context: JobContext) -> dict[str, object]:
    options = JiraOptions.from_settings(context.settings)
    with ROUND:
        return summarize(sync_once(context.database, options, context.clock, with_reconcile=True))
