"""Finding, creating and describing signatures."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime
from functools import cache
from typing import Any, TypedDict

from sqlalchemy import ColumnElement, Executable, Select, bindparam, func, select, update
from sqlalchemy.orm import Session

from registry.bounds import plausible
from registry.core.jira_links import JiraLink
from registry.core.signatures import COUNTER_SHARDS, Signature, SignatureAlias, SignatureCounter
from registry.db import UTCDateTime
from registry.direct import DirectStatement
from registry.errors import ApiError
from registry.ids import parse_id
from registry.signatures.identify import CrashSignature
from registry.upsert import insert_ignore, insert_or_increment_statement


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
    signature_id = parse_id(key)
    signature = session.get(Signature, signature_id) if signature_id is not None else None
    if signature is None:
        signature = session.scalar(select(Signature).where(Signature.fingerprint == key))
    if signature is None:
        alias = session.get(SignatureAlias, key)
        signature = session.get(Signature, alias.signature_id) if alias else None
    return canonical(session, signature) if signature else None


def signature_or_404(session: Session, key: str) -> Signature:
    signature = find_signature(session, key)
    if signature is None:
        raise ApiError(404, "not_found", f"no signature with id or fingerprint {key!r}")
    return signature


@dataclass(frozen=True)
class SignatureSnapshot:
    """What ingest needs of a signature, read as plain Core columns (no ORM entity per report)."""

    id: int
    fingerprint: str
    title: str
    kind: str
    labels: list[Any]
    status: str
    first_seen: datetime
    resolved_at: datetime | None
    fixed_in_kernel: str | None
    capture_policy: str
    capture_dump_level: int | None
    extra_full_captures: int
    merged_into_id: int | None


SNAPSHOT_FIELDS = tuple(field.name for field in fields(SignatureSnapshot))


def snapshot_of(values: Any) -> SignatureSnapshot:
    """From a row mapping or a Signature entity."""
    if isinstance(values, Signature):
        return SignatureSnapshot(**{name: getattr(values, name) for name in SNAPSHOT_FIELDS})
    return SignatureSnapshot(**{name: values[name] for name in SNAPSHOT_FIELDS})


# A crash's names as a signature's row holds them: a name past its column (a C++ template's
# instantiation, a module's long file name, a hostile log's function) keeps its head; the
# fingerprint keys the whole name.
NAME_COLUMNS = ("title", "function", "module")


def stored_names(crash: CrashSignature) -> dict[str, Any]:
    columns = Signature.__table__.c  # type: ignore[attr-defined]
    names = {name: getattr(crash, name) for name in NAME_COLUMNS}
    return {name: value[:columns[name].type.length] if isinstance(value, str) else value
            for name, value in names.items()}


def resolve_or_create(
    session: Session, crash: CrashSignature, seen_at: datetime, known: SignatureSnapshot | None
) -> tuple[SignatureSnapshot, bool]:
    """The signature for a fingerprint, created if it is new; race-safe across workers.

    `known`: what the caller already read for the fingerprint (by alias first, then by
    fingerprint; see `known_signature_id`), so the common case in a storm costs no statement."""
    if known is not None:
        return canonical_snapshot(session, known), False
    created = insert_ignore(
        session,
        Signature,
        {
            "fingerprint": crash.fingerprint,
            "algorithm_version": crash.algorithm_version,
            "kind": crash.kind,
            **stored_names(crash),
            "frames": list(crash.frames),
            "labels": list(crash.labels),
            "first_seen": seen_at,
        },
        ["fingerprint"],
        returning=SNAPSHOT_FIELDS,
    )
    if created is not None:
        return snapshot_of(created._mapping), True
    # Another worker created it first: read theirs.
    signature = session.scalar(select(Signature).where(Signature.fingerprint == crash.fingerprint))
    assert signature is not None
    return snapshot_of(canonical(session, signature)), False


def canonical_snapshot(session: Session, signature: SignatureSnapshot) -> SignatureSnapshot:
    if signature.merged_into_id is None:
        return signature
    return snapshot_of(canonical(session, session.get_one(Signature, signature.id)))


def known_signature_id(fingerprint: Any) -> ColumnElement[Any]:
    """SQL for the id a fingerprint routes to: its alias's signature, else its own (or NULL)."""
    aliases, signatures = SignatureAlias.__table__.c, Signature.__table__.c
    return func.coalesce(
        select(aliases.signature_id).where(aliases.fingerprint == fingerprint).scalar_subquery(),
        select(signatures.id).where(signatures.fingerprint == fingerprint).scalar_subquery(),
    )


_EARLIER = bindparam("crashed_at", type_=UTCDateTime())
# Conditional, so concurrent late reports leave the earliest of them whatever order they commit in.
SEEN_EARLIER = (
    update(Signature.__table__)
    .where(Signature.__table__.c.id == bindparam("signature_id"), Signature.__table__.c.first_seen > _EARLIER)
    .values(first_seen=_EARLIER)
)


def seen_at(session: Session, signature: SignatureSnapshot, crashed_at: datetime) -> SignatureSnapshot:
    """A new event of a known signature: one that crashed before the signature's first event (a
    post-boot resend, an import of old logs) moves `first_seen` earlier. first_seen never moves
    later and last_seen (the counters' maximum) never moves back, so the common case writes nothing."""
    if crashed_at >= signature.first_seen:
        return signature
    session.connection().execute(SEEN_EARLIER, {"signature_id": signature.id, "crashed_at": crashed_at})
    return replace(signature, first_seen=crashed_at)


def count_event(session: Session, signature_id: int, event_id: int, crashed_at: datetime) -> None:
    """Add one event to a shard of the signature's counter (no single hot row in a storm)."""
    connection = session.connection()
    count_event_statement(connection.dialect.name).execute(
        connection,
        {
            "signature_id": signature_id,
            "shard": event_id % COUNTER_SHARDS,
            "events": 1,
            "last_seen": crashed_at,
        },
    )


@cache
def count_event_statement(dialect: str) -> DirectStatement:
    return DirectStatement(counting(dialect))


def counting(dialect: str, rows: tuple[list[str], Select[Any]] | None = None) -> Executable:
    """The counter shard's insert-or-add (`rows`: the counted rows come from this SELECT)."""
    greatest = func.max if dialect == "sqlite" else func.greatest
    return insert_or_increment_statement(
        dialect,
        SignatureCounter.__table__,
        ["signature_id", "shard"],
        {
            "events": lambda excluded: SignatureCounter.events + excluded.events,
            "last_seen": lambda excluded: greatest(SignatureCounter.last_seen, excluded.last_seen),
        },
        rows,
    )


COUNTERS = SignatureCounter.__table__.c
# A signature's event count and last sighting, over its counter shards (the rows selected).
EVENT_COUNT = func.coalesce(func.sum(COUNTERS.events), 0)
LAST_SEEN = func.max(plausible(COUNTERS.last_seen))


def stats_subquery() -> Any:
    """Per-signature event count and last sighting, summed over counter shards."""
    return (
        select(
            COUNTERS.signature_id.label("signature_id"),
            func.sum(COUNTERS.events).label("event_count"),
            LAST_SEEN.label("last_seen"),
        )
        .group_by(COUNTERS.signature_id)
        .subquery("signature_stats")
    )


def signature_stats(session: Session, signature_id: int) -> tuple[int, datetime | None]:
    row = session.execute(select(EVENT_COUNT, LAST_SEEN).where(COUNTERS.signature_id == signature_id)).one()
    return int(row[0]), row[1]


def _jira_key(signature_id: Any) -> ColumnElement[Any]:
    links = JiraLink.__table__.c
    return select(links.issue_key).where(links.signature_id == signature_id).scalar_subquery()


def stats_columns(signature_id: Any) -> tuple[ColumnElement[Any], ...]:
    """Event count, last sighting and Jira key of a signature as three scalar subqueries, to
    read alone or inside a bigger read (ingest's one read before it writes)."""
    shards = COUNTERS.signature_id == signature_id
    return (
        select(EVENT_COUNT).where(shards).scalar_subquery().label("stats_events"),
        select(LAST_SEEN).where(shards).scalar_subquery().label("stats_last_seen"),
        _jira_key(signature_id).label("jira_key"),
    )


def stats_row(signature_id: Any) -> Select[Any]:
    """The same three as one row (`events`, `last_seen`, `jira_key`), its counter shards read
    once: inside a bigger statement each of stats_columns' subqueries is evaluated wherever
    its value is used."""
    return select(
        EVENT_COUNT.label("events"), LAST_SEEN.label("last_seen"), _jira_key(signature_id).label("jira_key")
    ).where(COUNTERS.signature_id == signature_id)


# A Core statement built once, executed on the session's connection.
STATS_AND_JIRA_KEY = select(*stats_columns(bindparam("signature_id")))


def stats_and_jira_key(session: Session, signature_id: int) -> tuple[tuple[int, datetime | None], str | None]:
    events, last_seen, jira_key = (
        session.connection().execute(STATS_AND_JIRA_KEY, {"signature_id": signature_id}).one()
    )
    return (int(events), last_seen), jira_key


class SignatureSummary(TypedDict):
    """The contract's signature object (lists, ingest answers, events, epidemiology)."""

    id: str
    fingerprint: str
    title: str
    kind: str
    labels: list[str]
    status: str
    first_seen: str
    last_seen: str
    event_count: int
    jira_key: str | None


class CapturePolicyView(TypedDict):
    mode: str
    dump_level: int | None
    extra_full_captures: int


class SignatureDetail(SignatureSummary):
    """GET /api/v1/signatures/{key}: the summary, then what an engineer or a policy needs."""

    function: str | None
    module: str | None
    frames: list[str]
    algorithm_version: int | None
    owner: str | None
    resolved_at: str | None
    resolution: str | None
    fix_versions: list[str]
    fixed_in_kernel: str | None
    capture_policy: CapturePolicyView
    aliases: list[str]


def summary(
    session: Session | None,
    signature: Signature | SignatureSnapshot,
    stats: tuple[int, datetime | None] | None = None,
    jira_key: str | None = None,
) -> SignatureSummary:
    """The contract's signature object; callers that already know the counts pass them with
    the Jira key, others get both in one round trip."""
    if stats is None:
        assert session is not None
        stats, jira_key = stats_and_jira_key(session, signature.id)
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


def detail(session: Session, signature: Signature) -> SignatureDetail:
    """The summary plus what an engineer or a policy needs to know."""
    aliases = session.scalars(
        select(SignatureAlias.fingerprint).where(SignatureAlias.signature_id == signature.id)
    ).all()
    return {
        **summary(session, signature),
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
