"""Events the signature engine failed on (stored with `fingerprint_error`, no signature): the
page that lists them and the /metrics gauge that counts them read them here, through the
partial index `ix_events_unfingerprinted`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.core.events import Event

UNFINGERPRINTED = Event.fingerprint_error.is_not(None)


def unfingerprinted_events(session: Session, limit: int = 200) -> list[dict[str, Any]]:
    """The latest events the engine failed on, newest first."""
    rows = session.execute(
        select(Event.id, Event.hostname, Event.crashed_at, Event.first_source, Event.fingerprint_error)
        .where(UNFINGERPRINTED)
        .order_by(Event.id.desc())
        .limit(limit)
    )
    return [row._asdict() for row in rows]


def unfingerprinted_metrics(session: Session) -> Iterable[Metric]:
    waiting = GaugeMetricFamily(
        "crashreg_events_unfingerprinted",
        "Events the signature engine failed on, waiting for `crashreg signatures rebuild`",
    )
    count = session.scalar(select(func.count()).select_from(Event).where(UNFINGERPRINTED))
    waiting.add_metric([], count or 0)
    return [waiting]
