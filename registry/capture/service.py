"""Recording captures and their later processing, and settling the event's capture slot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from registry.capture.models import Capture, CaptureSlot
from registry.capture.policy import SLOT_COMPLETED, SLOT_GRANTED, SLOT_RELEASED
from registry.capture.savings import FullCapture, SignatureSavings, per_signature
from registry.core.events import Event
from registry.db import utcnow
from registry.errors import ApiError
from registry.upsert import insert_ignore

# Allowed changes (current -> next); staying put is always allowed, so updates are idempotent.
STATUS_TRANSITIONS: dict[str, frozenset[str]] = {
    "started": frozenset({"completed", "failed", "skipped"}),
    "completed": frozenset({"failed"}),  # e.g. the dump turned out truncated
    "failed": frozenset(),
    "skipped": frozenset(),
}
PROCESSING_TRANSITIONS: dict[str | None, frozenset[str]] = {
    None: frozenset({"pending", "processing", "done", "failed"}),
    "pending": frozenset({"processing", "done", "failed"}),
    "processing": frozenset({"done", "failed"}),
    "failed": frozenset({"processing"}),  # retry the transformation
    "done": frozenset(),
}
UPDATABLE = ("status", "processing_state", "dump_level", "bytes", "duration_s", "downtime_s", "target", "uri")


def capture_dict(capture: Capture) -> dict[str, Any]:
    return {
        "id": str(capture.id),
        "event_id": str(capture.event_id),
        "signature_id": str(capture.signature_id) if capture.signature_id else None,
        "method": capture.method,
        "status": capture.status,
        "dump_level": capture.dump_level,
        "bytes": capture.bytes,
        "duration_s": capture.duration_s,
        "downtime_s": capture.downtime_s,
        "target": capture.target,
        "uri": capture.uri,
        "processing_state": capture.processing_state,
        "capture_key": capture.capture_key,
        "created_at": capture.created_at.isoformat(),
        "updated_at": capture.updated_at.isoformat(),
    }


def follow_events(session: Session, event_ids: Sequence[int], signature_id: int) -> None:
    """Events moved to another signature (a rebuild): their captures go with them (capture
    history, savings and the dedup counts read captures by signature)."""
    session.execute(
        update(Capture)
        .where(Capture.event_id.in_(event_ids))
        .where(Capture.signature_id.is_(None) | (Capture.signature_id != signature_id))
        .values(signature_id=signature_id)
    )


def record_capture(session: Session, event_id: int, fields: dict[str, Any]) -> tuple[Capture, bool]:
    """Store a capture of an event (once per capture_key); returns it and whether it is new."""
    event = session.get(Event, event_id)
    if event is None:
        raise ApiError(404, "not_found", f"no event {event_id}")
    values = dict(fields)
    if values["method"] == "raw" and values["status"] == "completed":
        values.setdefault("processing_state", "pending")  # decoupled: transformed after reboot
    now = utcnow()
    values |= {"event_id": event_id, "signature_id": event.signature_id, "created_at": now, "updated_at": now}
    created = insert_ignore(
        session,
        Capture,
        values,
        ["event_id", "capture_key"],
    )
    capture = session.scalar(
        select(Capture).where(Capture.id == created)
        if created is not None
        else select(Capture).where(Capture.event_id == event_id, Capture.capture_key == values["capture_key"])
    )
    assert capture is not None
    if created is not None:
        settle_slot(session, capture)
    return capture, created is not None


def update_capture(session: Session, capture_id: int, changes: dict[str, Any]) -> Capture:
    capture = session.scalar(select(Capture).where(Capture.id == capture_id).with_for_update())
    if capture is None:
        raise ApiError(404, "not_found", f"no capture {capture_id}")
    check_transition("status", capture.status, changes.get("status"), STATUS_TRANSITIONS)
    check_transition(
        "processing_state", capture.processing_state, changes.get("processing_state"), PROCESSING_TRANSITIONS
    )
    for name in UPDATABLE:
        if name in changes:
            setattr(capture, name, changes[name])
    capture.updated_at = utcnow()
    session.flush()
    settle_slot(session, capture)
    return capture


def check_transition(name: str, current: Any, wanted: Any, table: dict[Any, frozenset[str]]) -> None:
    if wanted is None or wanted == current or wanted in table[current]:
        return
    allowed = sorted(table[current]) or ["nothing: it is final"]
    raise ApiError(
        409,
        "conflict",
        f"{name} cannot change from {current!r} to {wanted!r}",
        fields={name: [f"from {current!r} allowed: {', '.join(allowed)}"]},
    )


def settle_slot(session: Session, capture: Capture) -> None:
    """A completed capture keeps its event's slot held for the window; a failed one frees it."""
    if capture.status in ("failed", "skipped") or capture.processing_state == "failed":
        held_in = (SLOT_GRANTED, SLOT_COMPLETED)
        state = SLOT_RELEASED
    elif capture.status == "completed":
        held_in, state = (SLOT_GRANTED,), SLOT_COMPLETED
    else:
        return
    session.execute(
        update(CaptureSlot)
        .where(CaptureSlot.event_id == capture.event_id, CaptureSlot.state.in_(held_in))
        .values(state=state, since=utcnow())
        .execution_options(synchronize_session=False)
    )


def load_savings(session: Session, signature_id: int | None = None) -> list[SignatureSavings]:
    """Skipped events and completed full captures per signature, from the database."""
    skipped_query = (
        select(Event.signature_id, func.count())
        .where(Event.capture_action == "skip", Event.signature_id.is_not(None))
        .group_by(Event.signature_id)
    )
    captures_query = (
        select(Capture.signature_id, Capture.bytes, Capture.downtime_s)
        .join(Event, Event.id == Capture.event_id)
        .where(
            Event.capture_action == "full",
            Capture.status == "completed",
            Capture.signature_id.is_not(None),
            or_(Capture.processing_state.is_(None), Capture.processing_state != "failed"),
        )
    )
    if signature_id is not None:
        skipped_query = skipped_query.where(Event.signature_id == signature_id)
        captures_query = captures_query.where(Capture.signature_id == signature_id)
    skipped = {row[0]: int(row[1]) for row in session.execute(skipped_query)}
    captures = [FullCapture(row[0], row[1], row[2]) for row in session.execute(captures_query)]
    return per_signature(skipped, captures)
