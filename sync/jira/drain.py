"""Drain the transactional outbox into Jira: retries with backoff, 429 Retry-After honoured.

Each message is handled in its own transaction; a failure is recorded on the message (and
on the signature's link) in a second one, so a crash at any point loses nothing: the
message stays pending until a handler's changes and its `processed_at` commit together.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.db import Database
from registry.jira.state import JIRA_TOPICS, PERMANENT_ERROR_PREFIX
from registry.jira.webhook import ISSUE_CHANGED_TOPIC
from registry.outbox import OutboxMessage
from registry.signatures.service import canonical
from sync.jira.client import Failure, JiraClient, classify, issue_is_gone
from sync.jira.config import JiraOptions
from sync.jira.inbound import on_issue_changed
from sync.jira.outbound import (
    SyncContext,
    mark_gone,
    on_rca_confirmed,
    on_rca_flagged,
    on_signature_created,
    on_signature_merged,
    on_signature_regressed,
)

log = logging.getLogger("crashreg.jira")
Handler = Callable[[SyncContext, Signature | None, dict[str, Any]], None]

HANDLERS: dict[str, Handler] = {
    "signature.created": on_signature_created,
    "signature.regressed": on_signature_regressed,
    "signature.merged": on_signature_merged,
    "rca.confirmed": on_rca_confirmed,
    "rca.flagged": on_rca_flagged,
    ISSUE_CHANGED_TOPIC: on_issue_changed,
}

UNCONFIRMED_CREATE = "_create_unconfirmed_at"
BACKOFF_BASE = timedelta(seconds=30)
BACKOFF_MAX = timedelta(minutes=15)


def backoff(attempts: int) -> timedelta:
    """30 s, 1 min, 2 min, ... capped at 15 min: an hour-long outage costs a handful of tries."""
    return min(BACKOFF_MAX, BACKOFF_BASE * 2 ** max(0, attempts - 1))


@dataclass
class DrainReport:
    processed: int = 0
    failed: int = 0
    given_up: int = 0
    stopped: str | None = None
    pause_until: datetime | None = None  # Jira said 429 Retry-After: no calls before then
    errors: list[str] = field(default_factory=list)


def due_messages(database: Database, now: datetime, limit: int) -> list[int]:
    """Pending messages in order; never-tried ones are due whatever their publisher's clock said."""
    with database.session() as session:
        return list(session.scalars(
            select(OutboxMessage.id)
            .where(
                OutboxMessage.topic.in_(JIRA_TOPICS),
                OutboxMessage.processed_at.is_(None),
                or_(OutboxMessage.attempts == 0, OutboxMessage.next_attempt_at <= now),
            )
            .order_by(OutboxMessage.id)
            .limit(limit)
        ))


def handle(database: Database, client: JiraClient, options: JiraOptions, message_id: int,
           now: datetime) -> None:
    with database.session() as session:
        message = session.get_one(OutboxMessage, message_id)
        if message.processed_at is not None:
            return
        signature = session.get(Signature, message.signature_id) if message.signature_id else None
        if signature is not None:
            signature = canonical(session, signature)
        if wanted(message.topic, signature):
            payload = dict(message.payload or {})
            unconfirmed = payload.pop(UNCONFIRMED_CREATE, None)
            ctx = SyncContext(session, client, options, now,
                              datetime.fromisoformat(unconfirmed) if unconfirmed else None)
            HANDLERS[message.topic](ctx, signature, payload)
        message.processed_at, message.last_error = now, None


def wanted(topic: str, signature: Signature | None) -> bool:
    """Inbound hints need no signature; outbound news needs one that is not ignored-before-filing."""
    if topic == ISSUE_CHANGED_TOPIC:
        return True
    if signature is None:
        return False  # the signature was deleted since: nothing left to tell Jira
    return not (topic == "signature.created" and signature.status == "ignored")


def record_failure(database: Database, message_id: int, failure: Failure, now: datetime,
                   issue_gone: bool = False) -> None:
    """On the message (retry later, or refused) and on its signature's link; a 404 (the only
    issue a handler reads or writes is the link's) marks that link gone."""
    with database.session() as session:
        message = session.get_one(OutboxMessage, message_id)
        message.attempts += 1
        if failure.unconfirmed_create:  # remembered, so the retry does not trust search too soon
            message.payload = {**(message.payload or {}), UNCONFIRMED_CREATE: now.isoformat()}
        if failure.permanent:
            message.processed_at = now
            message.last_error = PERMANENT_ERROR_PREFIX + failure.message
        else:
            wait = (timedelta(seconds=failure.retry_after_s) if failure.retry_after_s is not None
                    else backoff(message.attempts))
            message.next_attempt_at = now + wait
            message.last_error = failure.message
        link = session.get(JiraLink, message.signature_id) if message.signature_id else None
        if link is not None and issue_gone:
            mark_gone(link, now)
        elif link is not None:
            link.last_error, link.failures = message.last_error, link.failures + 1


def drain(database: Database, client: JiraClient, options: JiraOptions,
          now: datetime) -> DrainReport:
    report = DrainReport()
    for message_id in due_messages(database, now, options.batch):
        try:
            handle(database, client, options, message_id, now)
            report.processed += 1
        except Exception as error:  # every failure is recorded on the message, none is lost
            failure = classify(error, now)
            record_failure(database, message_id, failure, now, issue_is_gone(error))
            report.failed += 1
            report.given_up += failure.permanent
            report.errors.append(failure.message)
            log.warning("Jira sync failed", extra={"fields": {
                "outbox_message": message_id, "error": failure.message, "permanent": failure.permanent}})
            if failure.stop_run:
                report.stopped = failure.message
                if failure.retry_after_s is not None:
                    report.pause_until = now + timedelta(seconds=failure.retry_after_s)
                break
    return report


def requeue_refused(database: Database) -> int:
    """Put the messages Jira refused permanently back in line (after fixing the cause)."""
    with database.session() as session:
        return session.execute(
            update(OutboxMessage)
            .where(
                OutboxMessage.topic.in_(JIRA_TOPICS),
                OutboxMessage.processed_at.is_not(None),
                OutboxMessage.last_error.like(f"{PERMANENT_ERROR_PREFIX}%"),
            )
            .values(processed_at=None, attempts=0, last_error=None)
        ).rowcount
