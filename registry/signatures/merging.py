"""Manual merge and unmerge of signatures, and the per-signature counters they move.

A merge is an alias rule: the merged signature's fingerprint routes to the survivor, so
future events of either fingerprint land on one signature, and both fingerprints answer
lookups. Its events move with it, and the other domains' rows that follow events (captures
and their slots) are moved by the signature listeners, as in a rebuild. An unmerge removes the
rule and moves back exactly the events carrying the merged signature's fingerprints (events
keep their own fingerprint).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from registry.core.events import Event
from registry.core.signatures import (
    ARCHIVED_SHARD,
    COUNTER_SHARDS,
    Signature,
    SignatureAlias,
    SignatureCounter,
)
from registry.core.wiring import SignatureListeners
from registry.db import utcnow
from registry.errors import ApiError
from registry.signatures.service import canonical

MERGE = "merge"
REBUILD = "rebuild"
MOVE_CHUNK = 500  # event ids per listener call: an IN list, bounded for SQLite's variables


def set_alias(session: Session, fingerprint: str, signature_id: int, reason: str,
              by: str | None = None) -> None:
    """Route a fingerprint to a signature (replacing an older route for it)."""
    alias = session.get(SignatureAlias, fingerprint)
    if alias is None:
        session.add(SignatureAlias(fingerprint=fingerprint, signature_id=signature_id,
                                   reason=reason, created_by=by))
    else:
        alias.signature_id, alias.reason, alias.created_by = signature_id, reason, by
    session.flush()


def recount(session: Session, signature_ids: Iterable[int]) -> None:
    """Rebuild the sharded counters of signatures from their events (after events moved). The
    archived events' shard stays as it is: they are counted, but no longer stored."""
    ids = sorted(set(signature_ids))
    if not ids:
        return
    session.execute(delete(SignatureCounter).where(SignatureCounter.signature_id.in_(ids),
                                                   SignatureCounter.shard != ARCHIVED_SHARD))
    shard = Event.id % COUNTER_SHARDS
    rows = session.execute(
        select(Event.signature_id, shard, func.count(), func.max(Event.crashed_at))
        .where(Event.signature_id.in_(ids))
        .group_by(Event.signature_id, shard)
    ).all()
    if rows:
        session.execute(insert(SignatureCounter), [
            {"signature_id": sid, "shard": int(s), "events": int(n), "last_seen": last}
            for sid, s, n, last in rows
        ])
    session.flush()


def own_fingerprints(session: Session, signature: Signature) -> set[str]:
    """A signature's fingerprint and the older ones a rebuild routed to it."""
    rebuilt = session.scalars(select(SignatureAlias.fingerprint).where(
        SignatureAlias.signature_id == signature.id, SignatureAlias.reason == REBUILD)).all()
    return {signature.fingerprint, *rebuilt}


def _move_events(session: Session, where: Any, signature_id: int, listeners: SignatureListeners) -> None:
    """The events matching `where` now belong to `signature_id`; the listeners carry theirs
    (exactly the events the UPDATE moved, also one live ingest stored a moment ago)."""
    moving: Sequence[int] = session.scalars(
        update(Event).where(where).values(signature_id=signature_id).returning(Event.id)
    ).all()
    for start in range(0, len(moving), MOVE_CHUNK):
        listeners.move_events(session, moving[start:start + MOVE_CHUNK], signature_id)


def merge(session: Session, survivor: Signature, other: Signature, by: str | None,
          listeners: SignatureListeners) -> None:
    """Fold `other` into `survivor`: alias rule, events (and what follows them), counters."""
    other = canonical(session, other)
    if other.id == survivor.id:
        raise ApiError(409, "conflict", "these signatures are already one signature",
                       fields={"other": ["already merged into this signature"]})
    other.merged_into_id = survivor.id
    survivor.first_seen = min(survivor.first_seen, other.first_seen)  # the bug was seen when either was
    survivor.updated_at = utcnow()  # its counts changed: readers of changes (Jira's facts) see it
    set_alias(session, other.fingerprint, survivor.id, MERGE, by)
    _move_events(session, Event.signature_id == other.id, survivor.id, listeners)
    recount(session, [survivor.id, other.id])
    listeners.merge(session, other.id, survivor.id)


def unmerge(session: Session, survivor: Signature, other: Signature, listeners: SignatureListeners) -> None:
    """Undo `merge(survivor, other)`: the rule goes, other's events go back to it."""
    if other.merged_into_id != survivor.id:
        raise ApiError(409, "conflict", f"signature {other.id} is not merged into {survivor.id}",
                       fields={"other": ["not merged into this signature"]})
    other.merged_into_id = None
    session.execute(delete(SignatureAlias).where(SignatureAlias.fingerprint == other.fingerprint,
                                                 SignatureAlias.reason == MERGE))
    theirs = (Event.signature_id == survivor.id) & Event.fingerprint.in_(own_fingerprints(session, other))
    _move_events(session, theirs, other.id, listeners)
    recount(session, [survivor.id, other.id])
