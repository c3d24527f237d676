"""Events stored without a signature, and why: the engine found no crash in their reports
(`no_crash`: a garbled, truncated or crash-free log or stack) or failed on them
(`engine_failed`). The page and the API that list them with their text, so an engineer sees
what the engine missed, and the /metrics gauges that count them read them here, through the
partial indexes `ix_events_without_signature` and `ix_events_unfingerprinted`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from registry.capture.policy import ENGINE_FAILED, NO_CRASH
from registry.core.events import CaptureAnswer, Event, Report

WITHOUT_SIGNATURE = Event.signature_id.is_(None)
CAUSES: dict[str, ColumnElement[bool]] = {
    NO_CRASH: Event.fingerprint_error.is_(None),
    ENGINE_FAILED: Event.fingerprint_error.is_not(None),
}
# How the page names each cause.
CAUSE_NAMES = {NO_CRASH: "no crash found", ENGINE_FAILED: "engine failed"}
LOG_TAIL_CHARS = 4000  # of a console log: where a truncated log stops, and what it said last
STACK_FRAMES = 64
# The last n characters of a text column (PostgreSQL's substr takes no negative start).
TAIL: dict[str, Callable[[Any, int], ColumnElement[str]]] = {
    "sqlite": lambda column, n: func.substr(column, -n),
    "postgresql": lambda column, n: func.right(column, n),
}


class ReportText(TypedDict):
    """The text the engine read in an event's first report: its console log's tail, its stack."""

    source: str
    console_log_tail: str | None
    console_log_chars: int | None  # the whole log's length: the tail is all of it when equal
    stack: dict[str, Any] | None  # frames cut at STACK_FRAMES, memory mappings left out


class UnfingerprintedEvent(TypedDict):
    id: str
    hostname: str
    crashed_at: str
    received_at: str
    source: str
    cause: str  # no_crash | engine_failed
    fingerprint_error: str | None
    capture: CaptureAnswer
    text: ReportText | None


def cause_of(fingerprint_error: str | None) -> str:
    return NO_CRASH if fingerprint_error is None else ENGINE_FAILED


def unfingerprinted_events(
    session: Session, cause: str | None = None, before_id: int | None = None, limit: int = 50
) -> tuple[list[UnfingerprintedEvent], bool]:
    """Events without a signature (of one cause, or both), newest first, older than `before_id`,
    with their text; and whether there are more."""
    query = select(
        Event.id, Event.hostname, Event.crashed_at, Event.received_at, Event.first_source,
        Event.fingerprint_error, Event.capture_action, Event.capture_reason, Event.capture_dump_level,
    ).where(WITHOUT_SIGNATURE)
    if cause is not None:
        query = query.where(CAUSES[cause])
    if before_id is not None:
        query = query.where(Event.id < before_id)
    rows = session.execute(query.order_by(Event.id.desc()).limit(limit + 1)).all()
    page = rows[:limit]
    texts = report_texts(session, [row.id for row in page])
    events: list[UnfingerprintedEvent] = [
        {
            "id": str(row.id),
            "hostname": row.hostname,
            "crashed_at": row.crashed_at.isoformat(),
            "received_at": row.received_at.isoformat(),
            "source": row.first_source,
            "cause": cause_of(row.fingerprint_error),
            "fingerprint_error": row.fingerprint_error,
            "capture": {"action": row.capture_action, "reason": row.capture_reason,
                        "dump_level": row.capture_dump_level},
            "text": texts.get(row.id),
        }
        for row in page
    ]
    return events, len(rows) > len(page)


def report_texts(session: Session, event_ids: list[int]) -> dict[int, ReportText]:
    """Each event's first report's text, in one read that never loads a whole log."""
    if not event_ids:
        return {}
    tail = TAIL[session.get_bind().dialect.name]
    rows = session.execute(
        select(
            Report.event_id, Report.source, tail(Report.console_log, LOG_TAIL_CHARS).label("tail"),
            func.length(Report.console_log).label("chars"), Report.payload,
        )
        .where(Report.event_id.in_(event_ids))
        .order_by(Report.received_at.desc(), Report.id.desc())
    )
    texts: dict[int, ReportText] = {}
    for row in rows:  # the last written is the first report
        stack = (row.payload or {}).get("stack") if isinstance(row.payload, dict) else None
        texts[row.event_id] = {
            "source": row.source,
            "console_log_tail": row.tail,
            "console_log_chars": row.chars,
            "stack": shown_stack(stack) if isinstance(stack, dict) else None,
        }
    return texts


def shown_stack(stack: dict[str, Any]) -> dict[str, Any]:
    frames = stack.get("frames")
    shown = {key: value for key, value in stack.items() if key != "mappings"}
    if isinstance(frames, list):
        shown["frames"] = frames[:STACK_FRAMES]
    return shown


def unfingerprinted_counts(session: Session) -> dict[str, int]:
    """Events without a signature, per cause (every cause named)."""
    rows = session.execute(
        select(Event.fingerprint_error.is_(None), func.count()).where(WITHOUT_SIGNATURE)
        .group_by(Event.fingerprint_error.is_(None))
    )
    counts = dict.fromkeys(CAUSES, 0)
    for no_crash, count in rows:
        counts[NO_CRASH if no_crash else ENGINE_FAILED] += int(count)
    return counts


def unfingerprinted_metrics(session: Session) -> Iterable[Metric]:
    counts = unfingerprinted_counts(session)
    waiting = GaugeMetricFamily(
        "crashreg_events_unfingerprinted",
        "Events the signature engine failed on, waiting for `crashreg signatures rebuild`",
    )
    waiting.add_metric([], counts[ENGINE_FAILED])
    without_crash = GaugeMetricFamily(
        "crashreg_events_without_crash",
        "Events whose reports hold no crash the signature engine recognises (garbled, truncated, "
        "crash-free), listed on /unfingerprinted",
    )
    without_crash.add_metric([], counts[NO_CRASH])
    return [waiting, without_crash]
