"""The facts a signature's Jira issue shows, read from the registry's tables."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.capture.models import Capture
from registry.core.events import Event
from registry.core.signatures import Signature
from registry.epidemiology.models import EpidemiologyVerdict
from registry.signatures.service import signature_stats
from sync.jira.content import Facts

TOP = 5


def registry_url(public_url: str, signature: Signature) -> str:
    return f"{public_url}/signatures/{signature.id}"


def _top(session: Session, column: Any, signature_id: int) -> list[tuple[str, int]]:
    rows = session.execute(
        select(column, func.count())
        .where(Event.signature_id == signature_id, column.is_not(None))
        .group_by(column)
        .order_by(func.count().desc(), column)
        .limit(TOP)
    )
    return [(str(value), int(count)) for value, count in rows]


def host_count(signature_id: Any) -> Any:
    """The number of hosts a signature crashed on, as a scalar subquery (correlated when
    `signature_id` is a column)."""
    return select(func.count(func.distinct(Event.host_id))).where(
        Event.signature_id == signature_id).scalar_subquery()


def collect_facts(session: Session, signature: Signature, public_url: str) -> Facts:
    events, last_seen = signature_stats(session, signature.id)
    hosts = session.scalar(select(host_count(signature.id)))
    captures = session.execute(
        select(Capture.status, func.count())
        .where(Capture.signature_id == signature.id)
        .group_by(Capture.status)
        .order_by(Capture.status)
    )
    verdict = session.get(EpidemiologyVerdict, signature.id)
    return Facts(
        title=signature.title,
        fingerprint=signature.fingerprint,
        status=signature.status,
        first_seen=signature.first_seen.isoformat(),
        last_seen=(last_seen or signature.first_seen).isoformat(),
        events=events,
        hosts=int(hosts or 0),
        registry_url=registry_url(public_url, signature),
        kernels=_top(session, Event.kernel_version, signature.id),
        regions=_top(session, Event.region, signature.id),
        skus=_top(session, Event.sku, signature.id),
        captures=[(status, int(count)) for status, count in captures],
        verdict=f"{verdict.verdict}: {verdict.reason}" if verdict else None,
    )
