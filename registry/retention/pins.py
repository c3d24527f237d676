"""Engineers' pins: a pinned capture's dump is never deleted by retention, until unpinned.

A pin and gc's mark (registry.retention.gc) serialise on the dump's row: pinning locks it and
refuses a dump retention has begun deleting; gc locks the rows it marks and reads the pins
after the lock, so a pin is either seen by gc or refused, never lost between the two.
"""

from __future__ import annotations

from typing import TypedDict

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.capture.models import Capture
from registry.db import utcnow
from registry.errors import ApiError
from registry.retention.models import DumpPin
from registry.storage.models import Dump as StoredDump

# A dump in these states is going or gone (registry.retention.gc): a pin could not keep it.
GONE = {"deleting": "being deleted by retention", "deleted": "deleted by retention"}


class PinView(TypedDict):
    """A pin as the API returns it (a standing one has no unpinned_*)."""

    id: str
    capture_id: str
    note: str | None
    pinned_by: str
    pinned_at: str
    unpinned_by: str | None
    unpinned_at: str | None


def pin_dict(pin: DumpPin) -> PinView:
    return {
        "id": str(pin.id),
        "capture_id": str(pin.capture_id),
        "note": pin.note,
        "pinned_by": pin.pinned_by,
        "pinned_at": pin.pinned_at.isoformat(),
        "unpinned_by": pin.unpinned_by,
        "unpinned_at": pin.unpinned_at.isoformat() if pin.unpinned_at else None,
    }


def standing_pin(session: Session, capture_id: int) -> DumpPin | None:
    return session.scalar(
        select(DumpPin).where(DumpPin.capture_id == capture_id, DumpPin.unpinned_at.is_(None))
    )


def standing_pins(session: Session, capture_ids: list[int]) -> dict[int, PinView]:
    """The standing pin of each of these captures that has one."""
    rows = session.scalars(
        select(DumpPin).where(DumpPin.capture_id.in_(capture_ids), DumpPin.unpinned_at.is_(None))
    )
    return {row.capture_id: pin_dict(row) for row in rows}


def pin(
    session: Session, capture_id: int, note: str | None, actor: str, token_id: int | None
) -> tuple[DumpPin, bool]:
    """Pin a capture's dump; the standing pin and whether this call made it (a repeat is a no-op)."""
    if session.get(Capture, capture_id) is None:
        raise ApiError(404, "not_found", f"no capture {capture_id}")
    dump = session.scalar(select(StoredDump).where(StoredDump.capture_id == capture_id).with_for_update())
    if dump is not None and dump.state in GONE:
        raise ApiError(
            409, "conflict", f"capture {capture_id}'s dump is {GONE[dump.state]}: nothing left to pin"
        )
    if (standing := standing_pin(session, capture_id)) is not None:
        return standing, False
    row = DumpPin(
        capture_id=capture_id, note=note, pinned_by=actor, pinned_token_id=token_id, pinned_at=utcnow()
    )
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # pinned by someone else a moment ago: theirs stands
        standing = standing_pin(session, capture_id)
        assert standing is not None
        return standing, False
    return row, True


def unpin(session: Session, capture_id: int, actor: str, token_id: int | None) -> DumpPin:
    standing = standing_pin(session, capture_id)
    if standing is None:
        raise ApiError(404, "not_found", f"capture {capture_id} is not pinned")
    standing.unpinned_by, standing.unpinned_token_id, standing.unpinned_at = actor, token_id, utcnow()
    session.flush()
    return standing


def pin_history(session: Session, capture_id: int) -> list[DumpPin]:
    if session.get(Capture, capture_id) is None:
        raise ApiError(404, "not_found", f"no capture {capture_id}")
    return list(
        session.scalars(
            select(DumpPin).where(DumpPin.capture_id == capture_id).order_by(DumpPin.pinned_at, DumpPin.id)
        )
    )
