"""One round of Jira sync: outbox, throttled facts updates, threshold creations, reconciliation."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.db import Database
from registry.jira.models import JiraSyncCursor
from sync.jira.client import JiraClient, classify, issue_is_gone
from sync.jira.config import JiraOptions
from sync.jira.drain import DrainReport, drain
from sync.jira.facts import collect_facts
from sync.jira.outbound import (
    SyncContext,
    ensure_issue,
    links_due_for_facts,
    mark_gone,
    push_facts,
    unlinked_signatures_meeting_rule,
)
from sync.jira.reconcile import ReconcileReport, reconcile

log = logging.getLogger("crashreg.jira")
PAUSE = "throttled.until"
Clock = Callable[[], datetime]


@dataclass
class SyncReport:
    paused_until: datetime | None = None
    drain: DrainReport = field(default_factory=DrainReport)
    facts_pushed: int = 0
    created: int = 0
    reconcile: ReconcileReport | None = None
    errors: list[str] = field(default_factory=list)


def paused_until(database: Database, now: datetime) -> datetime | None:
    with database.session() as session:
        row = session.get(JiraSyncCursor, PAUSE)
        return row.position if row is not None and row.position > now else None


def pause(database: Database, until: datetime) -> None:
    with database.session() as session:
        row = session.get(JiraSyncCursor, PAUSE)
        if row is None:
            session.add(JiraSyncCursor(name=PAUSE, position=until))
        else:
            row.position = max(row.position, until)


def refresh_facts(database: Database, client: JiraClient, options: JiraOptions, now: datetime,
                  report: SyncReport) -> None:
    """At most one description update per signature per interval, however many events came."""
    with database.session() as session:
        due = [link.signature_id for link in links_due_for_facts(session, options, now, options.batch)]
    for signature_id in due:
        try:
            with database.session() as session:
                link = session.get_one(JiraLink, signature_id)
                signature = session.get_one(Signature, signature_id)
                report.facts_pushed += push_facts(SyncContext(session, client, options, now),
                                                  signature, link)
        except Exception as error:
            if issue_is_gone(error):
                with database.session() as session:
                    mark_gone(session.get_one(JiraLink, signature_id), now)
                continue
            failure = classify(error, now)
            report.errors.append(failure.message)
            with database.session() as session:
                link = session.get_one(JiraLink, signature_id)
                link.last_error, link.failures = failure.message, link.failures + 1
            if failure.retry_after_s is not None:
                pause(database, now + timedelta(seconds=failure.retry_after_s))
            if failure.stop_run:
                return


def create_by_rule(database: Database, client: JiraClient, options: JiraOptions, now: datetime,
                   report: SyncReport) -> None:
    """Threshold rules (events>=N, hosts>=N): file the signatures that have now earned it."""
    if options.create_rule.every:
        return  # every signature is filed from its signature.created message
    with database.session() as session:
        candidates = [s.id for s in unlinked_signatures_meeting_rule(session, options, options.batch)]
    for signature_id in candidates:
        try:
            with database.session() as session:
                signature = session.get_one(Signature, signature_id)
                facts = collect_facts(session, signature, options.public_url)
                if options.create_rule.allows(facts.events, facts.hosts):
                    ensure_issue(SyncContext(session, client, options, now), signature)
                    report.created += 1
        except Exception as error:
            failure = classify(error, now)
            report.errors.append(failure.message)
            if failure.stop_run:
                return


def sync_once(database: Database, options: JiraOptions, clock: Clock, with_reconcile: bool = True,
              client: JiraClient | None = None) -> SyncReport:
    """Everything a sync round does. Raises only when Jira cannot be reached at all."""
    now = clock()
    report = SyncReport(paused_until=paused_until(database, now))
    if report.paused_until is not None:
        log.info("Jira asked us to wait", extra={"fields": {"until": report.paused_until.isoformat()}})
        return report
    client = client or JiraClient(options)
    report.drain = drain(database, client, options, now)
    if report.drain.pause_until is not None:
        pause(database, report.drain.pause_until)
    if report.drain.stopped is not None:
        return report
    refresh_facts(database, client, options, now, report)
    create_by_rule(database, client, options, now, report)
    if with_reconcile and paused_until(database, now) is None:
        report.reconcile = reconcile(database, client, options, now)
    return report
