"""Per-link Jira sync state, for the API and for /metrics."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TypedDict

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.db import utcnow
from registry.jira.webhook import ISSUE_CHANGED_TOPIC
from registry.outbox import OutboxMessage

# Outbox topics the Jira sync consumes (sync/jira/drain.py has one handler per topic).
JIRA_TOPICS = (
    "signature.created",
    "signature.regressed",
    "signature.merged",
    "rca.confirmed",
    "rca.flagged",
    ISSUE_CHANGED_TOPIC,
)
PERMANENT_ERROR_PREFIX = "permanent: "


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


class LinkState(TypedDict):
    """A signature's Jira link and how its sync goes (GET /api/v1/integrations/jira/links)."""

    signature_id: str
    fingerprint: str
    issue_key: str
    url: str | None
    status_category: str | None
    last_synced_at: str | None
    facts_pushed_at: str | None
    jira_updated_at: str | None
    last_error: str | None
    failures: int


class JiraComment(TypedDict):
    """One of an issue's latest comments, as the Jira sync reads it back into the link."""

    author: str | None  # display name
    created: str | None
    body: str  # plain text, cut to sync.jira.inbound.COMMENT_CHARS


class OutboxState(TypedDict):
    pending: int
    oldest_pending: str | None
    failed: int


def link_state(link: JiraLink, fingerprint: str) -> LinkState:
    return {
        "signature_id": str(link.signature_id),
        "fingerprint": fingerprint,
        "issue_key": link.issue_key,
        "url": link.url,
        "status_category": link.status_category,
        "last_synced_at": _iso(link.last_synced_at),
        "facts_pushed_at": _iso(link.facts_pushed_at),
        "jira_updated_at": _iso(link.jira_updated_at),
        "last_error": link.last_error,
        "failures": link.failures,
    }


def list_links(session: Session, failing: bool, after: int, limit: int) -> list[LinkState]:
    query = (
        select(JiraLink, Signature.fingerprint)
        .join(Signature, Signature.id == JiraLink.signature_id)
        .where(JiraLink.signature_id > after)
        .order_by(JiraLink.signature_id)
        .limit(limit)
    )
    if failing:
        query = query.where(JiraLink.last_error.is_not(None))
    return [link_state(link, fingerprint) for link, fingerprint in session.execute(query)]


def outbox_state(session: Session) -> OutboxState:
    """Messages the Jira sync still owes, and those it gave up on (permanent errors)."""
    mine = OutboxMessage.topic.in_(JIRA_TOPICS)
    pending, oldest = session.execute(
        select(func.count(), func.min(OutboxMessage.created_at)).where(
            mine, OutboxMessage.processed_at.is_(None)
        )
    ).one()
    failed = session.scalar(
        select(func.count()).where(
            mine, OutboxMessage.last_error.like(f"{PERMANENT_ERROR_PREFIX}%"),
            OutboxMessage.processed_at.is_not(None),
        )
    )
    return {"pending": pending, "oldest_pending": _iso(oldest), "failed": failed}


def jira_metrics(session: Session) -> Iterable[Metric]:
    """Gauges read at scrape time: outbox backlog and each link's last sync and error state."""
    state = outbox_state(session)
    pending = GaugeMetricFamily("crashreg_jira_outbox_pending", "Jira changes not yet delivered")
    pending.add_metric([], state["pending"])
    failed = GaugeMetricFamily(
        "crashreg_jira_outbox_failed", "Jira changes refused permanently (HTTP 4xx), see the API"
    )
    failed.add_metric([], state["failed"])
    age = GaugeMetricFamily("crashreg_jira_outbox_oldest_pending_seconds", "Age of the oldest")
    oldest = session.scalar(
        select(func.min(OutboxMessage.created_at)).where(
            OutboxMessage.topic.in_(JIRA_TOPICS), OutboxMessage.processed_at.is_(None)
        )
    )
    age.add_metric([], (utcnow() - oldest).total_seconds() if oldest else 0.0)
    synced = GaugeMetricFamily(
        "crashreg_jira_link_last_synced_timestamp_seconds",
        "When each signature's Jira issue was last synced",
        labels=["issue_key"],
    )
    erroring = GaugeMetricFamily(
        "crashreg_jira_link_error", "1 when the link's last sync attempt failed", labels=["issue_key"]
    )
    for key, last, error in session.execute(
        select(JiraLink.issue_key, JiraLink.last_synced_at, JiraLink.last_error)
    ):
        synced.add_metric([key], last.timestamp() if last else 0.0)
        erroring.add_metric([key], 1.0 if error else 0.0)
    yield from (pending, failed, age, synced, erroring)
