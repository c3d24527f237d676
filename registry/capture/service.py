"""Recording captures and their later processing, and settling the event's capture slot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from registry.capture.models import Capture, CaptureSlot, NoSignatureSlot
from registry.capture.policy import GRANT_TIMEOUT, SLOT_COMPLETED, SLOT_GRANTED, SLOT_RELEASED
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


class CaptureView(TypedDict):
    """A capture as the API returns it."""

    id: str
    event_id: str
    signature_id: str | None
    method: str
    status: str
    dump_level: int | None
    bytes: int | None
    duration_s: float | None
    downtime_s: float | None
    target: str | None
    uri: str | None
    processing_state: str | None
    capture_key: str | None
    removed_at: str | None
    removed_reason: str | None
    created_at: str
    updated_at: str


def capture_dict(capture: Capture) -> CaptureView:
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
        "removed_at": capture.removed_at.isoformat() if capture.removed_at else None,
        "removed_reason": capture.removed_reason,
        "created_at": capture.created_at.isoformat(),
        "updated_at": capture.updated_at.isoformat(),
    }


def follow_events(session: Session, event_ids: Sequence[int], signature_id: int) -> None:
    """Events moved to another signature (a rebuild): their captures go with them (capture
    history, savings and the dedup counts read captures by signature), and so do the capture
    slots they hold: a dump counts against the budget of the bug it shows, no longer against
    the signature an older engine had lumped it into (which would skip that bug's next dumps
    and give the split-off bug K more)."""
    session.execute(
        update(Capture)
        .where(Capture.event_id.in_(event_ids))
        .where(Capture.signature_id.is_(None) | (Capture.signature_id != signature_id))
        .values(signature_id=signature_id)
    )
    slots = CaptureSlot.__table__.c
    moving = session.execute(
        select(slots.signature_id, slots.slot, slots.event_id, slots.state, slots.since).where(
            slots.event_id.in_(event_ids), slots.signature_id != signature_id, slots.state != SLOT_RELEASED
        )
    ).all()
    for row in moving:
        _take_free_slot(session, signature_id, {"event_id": row.event_id, "state": row.state,
                                                "since": row.since})
        session.execute(
            delete(CaptureSlot)
            .where(slots.signature_id == row.signature_id, slots.slot == row.slot,
                   slots.event_id == row.event_id)
            .execution_options(synchronize_session=False)
        )


def _take_free_slot(session: Session, signature_id: int, values: dict[str, Any]) -> None:
    """Put a moved slot (event, state, since) on the signature's lowest slot number that is
    unused, released or an expired grant. Live ingest goes on claiming the slots of known
    signatures during a rebuild: an insert that finds its number taken, or a compare-and-swap
    that finds the row changed, goes on to the next number (a number past K never counts)."""
    slots = CaptureSlot.__table__.c
    rows = {row.slot: row for row in session.execute(
        select(slots.slot, slots.event_id, slots.state, slots.since).where(slots.signature_id == signature_id)
    )}
    expired = utcnow() - GRANT_TIMEOUT
    number = 0
    while True:
        number += 1
        row = rows.get(number)
        if row is None:
            if insert_ignore(session, CaptureSlot, {"signature_id": signature_id, "slot": number, **values},
                             ["signature_id", "slot"]) is not None:
                return
        elif row.state == SLOT_RELEASED or (row.state == SLOT_GRANTED and row.since < expired):
            swapped = session.execute(
                update(CaptureSlot)
                .where(slots.signature_id == signature_id, slots.slot == number,
                       slots.event_id == row.event_id, slots.state == row.state)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if swapped.rowcount:
                return


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


MAX_REMOVED_KEYS = 100


def mark_removed(session: Session, capture_keys: Sequence[str], reason: str) -> tuple[list[str], list[str]]:
    """Captures whose file is gone from its target, by capture key: marked once (a resent
    notice changes nothing), their event's slot freed. Returns the keys that name a capture
    and those that name none."""
    capture_keys = list(dict.fromkeys(capture_keys))
    captures = session.scalars(
        select(Capture).where(Capture.capture_key.in_(capture_keys)).with_for_update()
    ).all()
    now = utcnow()
    for capture in captures:
        if capture.removed_at is None:
            capture.removed_at, capture.removed_reason, capture.updated_at = now, reason, now
            session.flush()
            settle_slot(session, capture)
    found = {capture.capture_key for capture in captures}
    return [key for key in capture_keys if key in found], [key for key in capture_keys if key not in found]


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


def slot_claim(capture: Capture) -> str:
    """What a capture says about its event's slot: `kept` (completed, its processing not failed,
    its file not removed), `under_way` (started), or `let_go` (failed, skipped, removed)."""
    if capture.removed_at is not None or capture.processing_state == "failed":
        return "let_go"
    return {"completed": "kept", "started": "under_way"}.get(capture.status, "let_go")


def settle_slot(session: Session, capture: Capture) -> None:
    """The event's slot follows what the event keeps, not the last capture recorded. A kept
    capture holds it for the window (a grant turns completed; a slot the event's earlier failure
    released, and nobody claimed since, is taken back). A failed, skipped or removed capture
    frees it only when no other capture of the event is kept or still under way: a DPU's failed
    drgn attempt after a good makedumpfile changes nothing about what is kept. An event without
    a signature holds its host's and the fleet's no-signature slots instead, by the same rule
    (a released one is not taken back: the budget's window has moved on)."""
    claim = slot_claim(capture)
    if claim == "under_way":
        return
    slots, budget = CaptureSlot.__table__.c, NoSignatureSlot.__table__.c
    if claim == "kept":  # the grant, or the slot released for this event on its own signature
        taken_back = (slots.state == SLOT_RELEASED) & (slots.signature_id == capture.signature_id)
        held = {CaptureSlot: (slots.state == SLOT_GRANTED) | taken_back,
                NoSignatureSlot: budget.state == SLOT_GRANTED}
        state = SLOT_COMPLETED
    else:
        others = session.scalars(
            select(Capture).where(Capture.event_id == capture.event_id, Capture.id != capture.id)
        )
        if any(slot_claim(other) != "let_go" for other in others):
            return
        held = {table: table.__table__.c.state.in_((SLOT_GRANTED, SLOT_COMPLETED))
                for table in (CaptureSlot, NoSignatureSlot)}
        state = SLOT_RELEASED
    for table, condition in held.items():
        session.execute(
            update(table)
            .where(table.__table__.c.event_id == capture.event_id, condition)
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
