"""The one seam between ingest and the capture policy: facts from the database, claims, answer.

Exactness under a crash storm. Each signature owns K *capture slots*, rows of
`capture_slots` keyed (signature_id, slot), slot in 1..K. A `full` answer from the auto
policy must win a slot inside the ingest transaction:

1. Read the signature's slot rows (at most K, one index range). If every slot is held (granted
   within GRANT_TIMEOUT, or completed inside the rolling window) the answer is `skip` and the
   request writes nothing here: this is the storm's common path.
2. Otherwise try the free slots lowest first. A slot never used is taken with
   `INSERT ... ON CONFLICT DO NOTHING`; a used one (released, aged out of the window, or a
   grant no capture followed) with a compare-and-swap `UPDATE ... WHERE event_id = <seen>
   AND state = <seen>`. Both are decided by the database's row locks: a second transaction
   racing for the same slot waits for the first and then finds the row taken (PostgreSQL
   READ COMMITTED re-checks the WHERE on the new row version; SQLite's BEGIN IMMEDIATE
   serialises writers), so each slot has exactly one winner, and a winner that rolls back
   leaves the slot to the next. K slots, at most K `full` answers; no row written per request.
3. Lost every race: fall through to the policy's next rule (`skip`).

Captures settle their event's slot (registry.capture.service): completed keeps it held until
it leaves the window; failed, skipped or failed processing release it at once. "N more full
captures" is a conditional decrement of signatures.extra_full_captures (only written while
N > 0, so it is no storm-wide hot row either).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from registry.capture.models import CaptureSlot, NoSignatureSlot
from registry.capture.policy import (
    SLOT_GRANTED,
    CaptureDecision,
    Limits,
    SignatureFacts,
    Slot,
    claimable_slots,
    decision_if_no_claim_can_win,
    walk,
    window_start,
)
from registry.config import Settings
from registry.core.signatures import Signature
from registry.db import utcnow
from registry.signatures.regression import REGRESSED
from registry.signatures.service import SignatureSnapshot
from registry.upsert import insert_ignore

__all__ = ["NO_DUMP_DECISIONS", "CaptureDecision", "decide_capture"]

AnySignature = Signature | SignatureSnapshot


class EventRef(Protocol):
    """What the decision needs of the new event: an Event entity or ingest's plain record."""

    @property
    def id(self) -> int: ...

    @property
    def regression(self) -> str | None: ...


# The answer of an event opened by a report no dump can follow: a live host's oops or warning
# (the host runs on), a panic read back from pstore after the reboot.
NO_DUMP_DECISIONS = {
    "live_kernel": CaptureDecision("none", "reported by a running host: there is nothing to dump"),
    "pstore": CaptureDecision("none", "read from pstore after the reboot: the crashed memory is gone"),
}


def limits_of(settings: Settings) -> Limits:
    return Limits(settings.full_captures_per_window, timedelta(days=settings.capture_window_days))


def facts_of(signature: AnySignature, is_new: bool = False, regressed: bool = False) -> SignatureFacts:
    """`regressed`: this event regressed the signature, even if a concurrent report of the same
    storm flipped the status first (our loaded row may still say resolved)."""
    return SignatureFacts(
        mode=signature.capture_policy,
        status=REGRESSED if regressed else signature.status,
        is_new=is_new,
        dump_level=signature.capture_dump_level,
        extra_full_captures=signature.extra_full_captures,
        resolved_at=signature.resolved_at,
    )


def decide_capture(
    session: Session,
    signature: AnySignature,
    event: EventRef,
    settings: Settings,
    new_signature: bool = False,
    slots: list[Slot] | None = None,
) -> CaptureDecision:
    """The capture answer for a new event; claims a slot or an extra capture when it says full.

    `slots`: the signature's slot rows if the caller already read them (see SLOT_READ_COLUMNS);
    a stale read costs no exactness, since every claim is decided by the database. A report
    without a signature is decided by its own budget (registry.capture.no_signature)."""
    facts = facts_of(signature, new_signature, regressed=event.regression == REGRESSED)
    limits = limits_of(settings)
    decision = walk(
        facts, limits, lambda claim: CLAIMS[claim](session, signature, event, facts, limits, slots)
    )
    assert decision is not None  # the database settles every claim
    return decision


def decision_without_claim(
    signature: AnySignature | None,
    regressed: bool,
    settings: Settings,
    new_signature: bool,
    slots: list[Slot] | None,
) -> CaptureDecision | None:
    """What decide_capture would answer when, given the slots read, no claim can win (a storm's
    common `skip`), known before the event is stored, so it is stored with its answer. None when
    a claim might win (or the slots were not read): then only decide_capture can say. Both walk
    the one table (policy.walk). A report without a signature always claims from its budget."""
    if signature is None:
        return None
    facts = facts_of(signature, new_signature, regressed)
    return decision_if_no_claim_can_win(facts, limits_of(settings), slots, utcnow())


SLOTS = CaptureSlot.__table__.c
ALL_SLOTS = select(SLOTS.signature_id, SLOTS.slot, SLOTS.state, SLOTS.since, SLOTS.event_id)
ONE_SIGNATURES_SLOTS = ALL_SLOTS.where(SLOTS.signature_id == bindparam("signature_id"))


# For a caller that reads the slots inside a bigger read (one row per slot, NULLs for none).
SLOT_READ_COLUMNS = (
    SLOTS.slot.label("slot_number"),
    SLOTS.state.label("slot_state"),
    SLOTS.since.label("slot_since"),
    SLOTS.event_id.label("slot_event_id"),
)


def slots_in(rows: list[dict[str, Any]]) -> list[Slot]:
    """The slots of rows read with SLOT_READ_COLUMNS (as mappings)."""
    return [
        Slot(row["slot_number"], row["slot_state"], row["slot_since"], row["slot_event_id"])
        for row in rows
        if row["slot_number"] is not None
    ]


def read_slots(session: Session, signature_id: int) -> list[Slot]:
    return read_all_slots(session, signature_id).get(signature_id, [])


def read_all_slots(session: Session, signature_id: int | None = None) -> dict[int, list[Slot]]:
    """Slot rows by signature (one signature's, or every signature's for the bundle)."""
    # Core statements built once, on the session's connection: this read runs for every report.
    if signature_id is None:
        rows = session.connection().execute(ALL_SLOTS)
    else:
        rows = session.connection().execute(ONE_SIGNATURES_SLOTS, {"signature_id": signature_id})
    slots: dict[int, list[Slot]] = {}
    for row in rows:
        slots.setdefault(row.signature_id, []).append(Slot(row.slot, row.state, row.since, row.event_id))
    return slots


def claim_slot(
    session: Session,
    signature_id: int,
    event_id: int,
    facts: SignatureFacts,
    limits: Limits,
    seen_slots: list[Slot] | None = None,
) -> int | None:
    """Win one free slot for this event (the slot number), or None when all are held."""
    now = utcnow()
    if seen_slots is None:
        seen_slots = read_slots(session, signature_id)
    won = claim_free_slot(session, CaptureSlot, {"signature_id": signature_id}, event_id, limits,
                          window_start(now, limits, facts), seen_slots)
    return won[0] if won else None


def claim_free_slot(
    session: Session,
    model: type[CaptureSlot] | type[NoSignatureSlot],
    key: dict[str, Any],
    event_id: int,
    limits: Limits,
    since: datetime,
    seen_slots: list[Slot],
) -> tuple[int, Slot | None] | None:
    """Win one free slot of the slots `key` names (a signature's, a budget's) for this event:
    the slot number and the row it replaced (None: a new row), or None when all are held."""
    now = utcnow()
    slots = {slot.number: slot for slot in seen_slots}
    granted = {"event_id": event_id, "state": SLOT_GRANTED, "since": now}
    columns = model.__table__.c
    for number in claimable_slots(slots.values(), limits, now, since):
        seen = slots.get(number)
        if seen is None:
            won = insert_ignore(session, model, key | {"slot": number} | granted, [*key, "slot"]) is not None
        else:
            won = session.execute(
                update(model)
                .where(
                    *(columns[name] == value for name, value in key.items()),
                    columns.slot == number,
                    columns.event_id == seen.event_id,
                    columns.state == seen.state,
                )
                .values(**granted)
                .execution_options(synchronize_session=False)
            ).rowcount == 1
        if won:
            return number, seen
    return None


def claim_extra(session: Session, signature: AnySignature) -> int | None:
    """Take one of the engineer's "N more" captures: how many are left after it, or None."""
    return session.execute(
        update(Signature)
        .where(Signature.id == signature.id, Signature.extra_full_captures > 0)
        .values(extra_full_captures=Signature.extra_full_captures - 1)
        .returning(Signature.extra_full_captures)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()


Claim = Callable[[Session, AnySignature, EventRef, SignatureFacts, Limits, "list[Slot] | None"], "int | None"]
# rule.claim -> how to win it: the slot number, or the "N more" captures left.
CLAIMS: dict[str, Claim] = {
    "slot": lambda session, signature, event, facts, limits, slots: claim_slot(
        session, signature.id, event.id, facts, limits, slots
    ),
    "extra": lambda session, signature, event, facts, limits, slots: claim_extra(session, signature),
}
