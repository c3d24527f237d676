"""Push crashreg's events to Grafana as annotations: first sightings, regressions, rollouts.

The source is the `rpt_annotations` view (one row per mark, named by `annotation_key`);
each key is pushed once and remembered in `grafana_annotations`, so a rerun or a retry
after Grafana was down pushes only what is missing. Annotations are organisation-wide and
tagged (`crashreg` plus the kind), which is how every crashreg dashboard shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from grafana_client import GrafanaApi
from sqlalchemy import select, text

from registry.db import Database, utcnow
from registry.grafana.models import GrafanaAnnotation

DEFAULT_LOOKBACK = timedelta(days=90)


@dataclass(frozen=True)
class Mark:
    key: str
    time: datetime
    text: str
    tags: tuple[str, ...]

    @property
    def epoch_ms(self) -> int:
        return int(self.time.timestamp() * 1000)


def pending_marks(database: Database, since: datetime) -> list[Mark]:
    """Marks at or after `since` that were not pushed yet, oldest first."""
    with database.session() as session:
        pushed = set(session.scalars(select(GrafanaAnnotation.annotation_key)))
        rows = session.execute(
            text("SELECT annotation_key, time, text, tags FROM rpt_annotations ORDER BY time")
        ).all()
    marks = []
    for key, moment, body, tags in rows:
        when = _utc(moment)
        if key in pushed or when < since:
            continue
        marks.append(Mark(key, when, body, tuple(tag for tag in tags.split(",") if tag)))
    return marks


def _utc(value: datetime | str) -> datetime:
    """A view's timestamp as aware UTC (SQLite returns text without a zone: it is UTC)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def push_annotations(
    api: GrafanaApi,
    database: Database,
    lookback: timedelta = DEFAULT_LOOKBACK,
    progress: Callable[[Mark], None] | None = None,
) -> list[Mark]:
    """Push every pending mark; each is recorded as soon as Grafana accepted it."""
    pushed = []
    for mark in pending_marks(database, utcnow() - lookback):
        answer = api.annotations.add_annotation(
            time_from=mark.epoch_ms, time_to=mark.epoch_ms, tags=list(mark.tags), text=mark.text
        )
        with database.session() as session:
            session.add(GrafanaAnnotation(annotation_key=mark.key, grafana_id=int(answer["id"])))
        pushed.append(mark)
        if progress:
            progress(mark)
    return pushed
