"""Periodic reconciliation: catch what webhooks missed, by JQL on `updated`, bounded.

The cursor is kept in Jira's own time (the newest `updated` applied), never the registry's
clock, so clock skew cannot open a gap; JQL has minute precision, so each scan overlaps
the last by a couple of minutes and re-applies (idempotently) what it already saw.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import DataError

from registry.db import Database
from registry.jira.models import JiraSyncCursor
from sync.jira.client import JiraClient
from sync.jira.config import JiraOptions
from sync.jira.content import CRASHREG_LABEL, parse_jira_time
from sync.jira.inbound import INBOUND_FIELDS, apply_issue
from sync.jira.outbound import SyncContext

CURSOR = "reconcile.updated"
log = logging.getLogger("crashreg.jira.reconcile")
# What an issue of an unexpected shape raises when read as the sync expects: a field missing
# from the search answer (projected differently, a custom workflow), a null, another type;
# or, past the text the sync cleans, a value the database refuses to store.
ODD_ISSUE = (KeyError, TypeError, AttributeError, ValueError, DataError)


@dataclass
class ReconcileReport:
    seen: int = 0
    applied: int = 0
    skipped: int = 0  # issues the sync cannot read or store: logged, never a stop
    since: datetime | None = None
    complete: bool = True


def reconcile(database: Database, client: JiraClient, options: JiraOptions,
              now: datetime) -> ReconcileReport:
    with database.session() as session:
        cursor = session.get(JiraSyncCursor, CURSOR)
        since = cursor.position if cursor else now - options.reconcile_lookback
    since -= options.reconcile_overlap
    jql = (
        f'project = "{options.project}" AND labels = "{CRASHREG_LABEL}" '
        f'AND updated >= "{client.jql_time(since)}" ORDER BY updated ASC'
    )
    report = ReconcileReport(since=since)
    newest = None
    for issue in client.search(jql, [*INBOUND_FIELDS, "key"], limit=options.reconcile_limit):
        report.seen += 1
        try:
            with database.session() as session:
                report.applied += apply_issue(SyncContext(session, client, options, now), issue)
            updated = parse_jira_time(issue["fields"].get("updated"))
        except ODD_ISSUE as error:
            report.skipped += 1
            key = issue.get("key") if isinstance(issue, dict) else None
            log.warning("skipped Jira issue %s of an unexpected shape: %s: %s",
                        key, type(error).__name__, error)
            continue
        newest = max(newest, updated) if newest and updated else updated or newest
    report.complete = report.seen < options.reconcile_limit
    if newest is not None:
        with database.session() as session:
            row = session.get(JiraSyncCursor, CURSOR)
            if row is None:
                session.add(JiraSyncCursor(name=CURSOR, position=newest))
            elif newest > row.position:
                row.position = newest
    return report
