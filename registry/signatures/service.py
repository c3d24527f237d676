"""Finding, creating and describing signatures."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.jira.models import JiraLink
from registry.signatures.identify import CrashSignature
from registry.signatures.models import COUNTER_SHARDS, Signature, SignatureAlias, SignatureCounter
from registry.upsert import insert_ignore, insert_or_increment


def canonical(session: Session, signature: Signature) -> Signature:
    """Follow manual merges to the signature that now stands for the bug."""
    seen = {signature.id}
    while signature.merged_into_id is not None:
        signature = session.get_one(Signature, signature.merged_into_id)
        if signature.id in seen:  # a cycle would be a bug elsewhere; stop rather than spin
            break
        seen.add(signature.id)
    return signature


def find_signature(session: Session, key: str) -> Signature | None:
    """By numeric id, fingerprint, or an alias fingerprint (merged and rebuilt signatures)."""
    signature = None
    if key.isdigit() and len(key) < 19:
        signature = session.get(Signature, int(key))
    if signature is None:
        signature = session.scalar(select(Signature).where(Signature.fingerprint == key))
    if signature is None:
        alias = session.get(SignatureAlias, key)
        signature = session.get(Signature, alias.signature_id) if alias else None
    return canonical(session, signature) if signature else None


def resolve_or_create(session: Session, crash: CrashSignature, seen_at: datetime) -> tuple[Signature, bool]:
    """The signature for a fingerprint, created if it is new; race-safe across workers."""
    alias = session.get(SignatureAlias, crash.fingerprint)
    if alias is not None:
        return canonical(session, session.get_one(Signature, alias.signature_id)), False
    known = session.scalar(select(Signature).where(Signature.fingerprint == crash.fingerprint))
    if known is not None:  # the common case in a storm: no insert attempt
        return canonical(session, known), False
    created = insert_ignore(
        session,
        Signature,
        {
            "fingerprint": crash.fingerprint,
            "algorithm_version": crash.algorithm_version,
            "title": crash.title[:512],
            "kind": crash.kind,
            "function": crash.function,
            "module": crash.module,
            "frames": list(crash.frames),
            "labels": list(crash.labels),
            "first_seen": seen_at,
        },
        ["fingerprint"],
    )
    signature = session.scalar(select(Signature).where(Signature.fingerprint == crash.fingerprint))
    assert signature is not None
    return canonical(session, signature), created is not None


def count_event(session: Session, signature_id: int, event_id: int, crashed_at: datetime) -> None:
    """Add one event to a shard of the signature's counter (no single hot row in a storm)."""
    greatest = func.max if session.get_bind().dialect.name == "sqlite" else func.greatest
    insert_or_increment(
        session,
        SignatureCounter,
        {
            "signature_id": signature_id,
            "shard": event_id % COUNTER_SHARDS,
            "events": 1,
            "last_seen": crashed_at,
        },
        ["signature_id", "shard"],
        {
            "events": lambda excluded: SignatureCounter.events + excluded.events,
            "last_seen": lambda excluded: greatest(SignatureCounter.last_seen, excluded.last_seen),
        },
    )


def stats_subquery() -> Any:
    """Per-signature event count and last sighting, summed over counter shards."""
    return (
        select(
            SignatureCounter.signature_id.label("signature_id"),
            func.sum(SignatureCounter.events).label("event_count"),
            func.max(SignatureCounter.last_seen).label("last_seen"),
        )
        .group_by(SignatureCounter.signature_id)
        .subquery("signature_stats")
    )


def signature_stats(session: Session, signature_id: int) -> tuple[int, datetime | None]:
    row = session.execute(
        select(
            func.coalesce(func.sum(SignatureCounter.events), 0), func.max(SignatureCounter.last_seen)
        ).where(SignatureCounter.signature_id == signature_id)
    ).one()
    return int(row[0]), row[1]


def stats_and_jira_key(session: Session, signature_id: int) -> tuple[tuple[int, datetime | None], str | None]:
    """Event count, last sighting and Jira key in one round trip (ingest answers with all three)."""
    link = select(JiraLink.issue_key).where(JiraLink.signature_id == signature_id).scalar_subquery()
    row = session.execute(
        select(
            func.coalesce(func.sum(SignatureCounter.events), 0), func.max(SignatureCounter.last_seen), link
        ).where(SignatureCounter.signature_id == signature_id)
    ).one()
    return (int(row[0]), row[1]), row[2]


def summary(
    session: Session,
    signature: Signature,
    stats: tuple[int, datetime | None] | None = None,
    jira_key: str | None = None,
    with_jira: bool = True,
) -> dict[str, Any]:
    """The contract's signature object."""
    if stats is None:
        stats, linked_key = stats_and_jira_key(session, signature.id)
        jira_key = jira_key or linked_key
    elif with_jira and jira_key is None:
        jira_key = session.scalar(select(JiraLink.issue_key).where(JiraLink.signature_id == signature.id))
    event_count, last_seen = stats
    return {
        "id": str(signature.id),
        "fingerprint": signature.fingerprint,
        "title": signature.title,
        "kind": signature.kind,
        "labels": list(signature.labels or []),
        "status": signature.status,
        "first_seen": signature.first_seen.isoformat(),
        "last_seen": (last_seen or signature.first_seen).isoformat(),
        "event_count": event_count,
        "jira_key": jira_key,
    }


def detail(session: Session, signature: Signature) -> dict[str, Any]:
    """The summary plus what an engineer or a policy needs to know."""
    aliases = session.scalars(
        select(SignatureAlias.fingerprint).where(SignatureAlias.signature_id == signature.id)
    ).all()
    return summary(session, signature) | {
        "function": signature.function,
        "module": signature.module,
        "frames": list(signature.frames or []),
        "algorithm_version": signature.algorithm_version,
        "owner": signature.owner,
        "resolved_at": signature.resolved_at.isoformat() if signature.resolved_at else None,
        "resolution": signature.resolution,
        "fix_versions": list(signature.fix_versions or []),
        "fixed_in_kernel": signature.fixed_in_kernel,
        "capture_policy": {
            "mode": signature.capture_policy,
            "dump_level": signature.capture_dump_level,
            "extra_full_captures": signature.extra_full_captures,
        },
        "aliases": sorted(aliases),
    }
