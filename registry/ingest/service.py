"""Ingest: a validated crash report in, a stored event and a capture answer out.

Idempotent on report_id (replays answer what the first answer said), and race-safe: every
insert is ON CONFLICT DO NOTHING, and a transaction that loses the report_id race rolls back
whole and replays the winner's answer, so nothing is stored twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Row, bindparam, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.capture.decide import (
    SLOT_READ_COLUMNS,
    CaptureDecision,
    decide_capture,
    decision_without_claim,
    slots_in,
)
from registry.capture.models import CaptureSlot
from registry.config import Settings
from registry.core.events import Event, Report
from registry.core.hosts import HOST_ATTRIBUTES, Host
from registry.core.signatures import Signature
from registry.db import Database, utcnow
from registry.errors import ApiError
from registry.outbox import publish
from registry.signatures.identify import CrashSignature, identify
from registry.signatures.regression import REGRESSED, regression_verdict
from registry.signatures.service import (
    SNAPSHOT_FIELDS,
    SignatureSnapshot,
    count_event,
    known_signature_id,
    resolve_or_create,
    seen_at,
    snapshot_of,
    stats_columns,
    summary,
)
from registry.upsert import insert_ignore


@dataclass(frozen=True)
class IngestResult:
    answer: dict[str, Any]
    created: bool


def payload_digest(raw: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class OpenEvent:
    """The crash event a report belongs to, as ingest read or wrote it (plain Core columns)."""

    id: int
    crashed_at: Any
    kernel_version: str | None
    sources: list[str]
    signature_id: int | None
    capture: CaptureDecision | None  # None: a new event whose answer needs a claim first
    regression: str | None = None
    counted: bool = False  # this report added the event to its signature's count


REPORTS, HOSTS, EVENTS, SIGNATURES = (
    model.__table__.c for model in (Report, Host, Event, Signature)  # type: ignore[attr-defined]
)
HOST_FIELDS = (*HOST_ATTRIBUTES, "labels")
# Everything ingest reads before it writes, in one round trip: the stored report (a replay),
# the host, the signature its fingerprint routes to with its counts and Jira key, and that
# signature's capture slots (one row per slot). Built once; values are parameters.
CONTEXT = (
    select(
        REPORTS.payload_sha256.label("report_sha256"),
        REPORTS.answer.label("report_answer"),
        HOSTS.id.label("host_id"),
        *(HOSTS[name].label(f"host_{name}") for name in HOST_FIELDS),
        *(SIGNATURES[name].label(f"signature_{name}") for name in SNAPSHOT_FIELDS),
        *stats_columns(SIGNATURES.id),
        *SLOT_READ_COLUMNS,
    )
    .select_from(select(literal(1).label("one")).subquery("anchor"))
    .outerjoin(Report.__table__, REPORTS.report_id == bindparam("report_id"))
    .outerjoin(Host.__table__, HOSTS.hostname == bindparam("hostname"))
    .outerjoin(Signature.__table__, SIGNATURES.id == known_signature_id(bindparam("fingerprint")))
    .outerjoin(CaptureSlot.__table__, CaptureSlot.__table__.c.signature_id == SIGNATURES.id)
)
STORED_REPORT = select(*CONTEXT.selected_columns[:2]).where(REPORTS.report_id == bindparam("report_id"))
HOST_BY_NAME = select(*CONTEXT.selected_columns[2 : 3 + len(HOST_FIELDS)]).where(
    HOSTS.hostname == bindparam("hostname")
)
LOCKED_EVENT = (
    select(
        EVENTS.id,
        EVENTS.crashed_at,
        EVENTS.kernel_version,
        EVENTS.sources,
        EVENTS.signature_id,
        EVENTS.capture_action,
        EVENTS.capture_reason,
        EVENTS.capture_dump_level,
        EVENTS.regression,
    )
    .where(EVENTS.host_id == bindparam("host_id"), EVENTS.boot_key == bindparam("boot_key"))
    # Concurrent reports of the same crash append to one sources list. Only reports of one
    # crash ever contend for it, so this is no storm-wide hot row.
    .with_for_update()
)
DECIDED = (
    update(Event.__table__)
    .where(EVENTS.id == bindparam("event_id"))
    .values(
        capture_action=bindparam("action"),
        capture_reason=bindparam("reason"),
        capture_dump_level=bindparam("dump_level"),
    )
)
STORE_REPORT = insert(Report.__table__)


def ingest_report(
    db: Database, settings: Settings, report: dict[str, Any], raw: dict[str, Any]
) -> IngestResult:
    digest = payload_digest(raw)
    crash = identify(report.get("console_log"), report.get("stack"))  # pure: outside the transaction
    try:
        # One transaction for the replay check and the store: each session costs a pool
        # checkout (pre-ping), BEGIN, COMMIT and a reset, which dominate a storm's latency.
        with db.session() as session:
            context = session.connection().execute(
                CONTEXT,
                {
                    "report_id": report["report_id"],
                    "hostname": report["host"]["hostname"],
                    "fingerprint": crash.fingerprint if crash else None,
                },
            ).all()
            replay = replayed_answer(context[0], digest)
            if replay is not None:
                return IngestResult(replay, created=False)
            return IngestResult(store(session, settings, report, raw, digest, crash, context), created=True)
    except IntegrityError:
        # Another worker stored this report_id between our check and our commit.
        with db.session() as session:
            stored = session.connection().execute(
                STORED_REPORT, {"report_id": report["report_id"]}
            ).one_or_none()
            replay = replayed_answer(stored, digest) if stored is not None else None
        if replay is None:
            raise
        return IngestResult(replay, created=False)


def replayed_answer(stored: Row[Any], digest: str) -> dict[str, Any] | None:
    """The first answer for a resent report_id (None if it is new); 409 if the body differs."""
    if stored.report_sha256 is None:
        return None
    if stored.report_sha256 != digest:
        raise ApiError(
            409,
            "conflict",
            "report_id was already used for a different report",
            fields={"report_id": ["already used with a different body"]},
        )
    return stored.report_answer | {"duplicate": True}


def store(
    session: Session,
    settings: Settings,
    report: dict[str, Any],
    raw: dict[str, Any],
    digest: str,
    crash: CrashSignature | None,
    context_rows: list[Row[Any]],
) -> dict[str, Any]:
    context = context_rows[0]
    host_id, host_attributes = host_seen_in_crash(session, report["host"], context)
    known = snapshot_of(prefixed(context, "signature_")) if context.signature_id is not None else None
    signature, new_signature = (
        resolve_or_create(session, crash, report["crashed_at"], known) if crash else (None, False)
    )
    # The context row describes this signature unless the fingerprint led to a merged one.
    read_with_context = signature is not None and signature.id == context.signature_id
    signature_context = context if read_with_context else None
    attributes = snapshot(host_attributes, report["host"])
    regression = regression_of(signature, attributes["kernel_version"], report["crashed_at"])
    slots = [] if new_signature else slots_in(context_rows) if read_with_context else None
    # When no claim can win, the answer is stored by the event's insert (no update after it).
    planned = decision_without_claim(signature, regression == REGRESSED, settings, new_signature, slots)
    event, created = find_or_open_event(
        session, host_id, attributes, report, signature, crash, planned, regression
    )
    if created:
        if signature is not None:
            count_event(session, signature.id, event.id, event.crashed_at)
            event.counted = True
            if new_signature:
                publish(session, "signature.created", signature.id)
            else:
                signature = seen_at(session, signature, event.crashed_at)
            if not new_signature and regression == REGRESSED:
                signature = flip_to_regressed(session, signature, event.id)
        if planned is None:
            event.capture = decide_capture(session, signature, event, settings, new_signature, slots)
            session.connection().execute(
                DECIDED,
                {
                    "event_id": event.id,
                    "action": event.capture.action,
                    "reason": event.capture.reason,
                    "dump_level": event.capture.dump_level,
                },
            )
    decision = event.capture
    assert decision is not None
    answer = {
        "event_id": str(event.id),
        "duplicate": False,
        "known": signature is not None and not new_signature,
        "signature": (
            signature_summary(session, signature, new_signature, signature_context, event)
            if signature is not None
            else None
        ),
        "capture": decision.as_dict(),
    }
    session.connection().execute(
        STORE_REPORT,
        {
            "report_id": report["report_id"],
            "event_id": event.id,
            "source": report["source"],
            "payload_sha256": digest,
            "payload": {k: v for k, v in raw.items() if k != "console_log"},
            "console_log": report.get("console_log"),
            "answer": answer,
        },
    )
    return answer


def signature_summary(
    session: Session,
    signature: SignatureSnapshot,
    new_signature: bool,
    context: Row[Any] | None,
    event: OpenEvent,
) -> dict[str, Any]:
    """The answer's signature object. Its counts are the ones read before the writes plus this
    event (what a read after them would see, without the round trip); a signature the context
    did not read (a merged one's survivor) is read now."""
    if new_signature:
        stats, jira_key = (1 if event.counted else 0, event.crashed_at if event.counted else None), None
    elif context is not None:
        events, last_seen = int(context.stats_events), context.stats_last_seen
        if event.counted:
            events, last_seen = events + 1, max(last_seen or event.crashed_at, event.crashed_at)
        stats, jira_key = (events, last_seen), context.jira_key
    else:
        return summary(session, signature)
    return summary(session, signature, stats, jira_key)


def prefixed(row: Row[Any], prefix: str) -> dict[str, Any]:
    return {
        name.removeprefix(prefix): value for name, value in row._mapping.items() if name.startswith(prefix)
    }


def host_seen_in_crash(
    session: Session, host_fields: dict[str, Any], context: Row[Any]
) -> tuple[int, dict[str, Any]]:
    """The host's id and inventory attributes; hosts first seen in a crash join the inventory
    with the attributes they reported."""
    if context.host_id is not None:
        return context.host_id, prefixed(context, "host_")
    values = {name: host_fields.get(name) for name in HOST_ATTRIBUTES}
    values["labels"] = host_fields.get("labels") or {}
    created_id = insert_ignore(session, Host, values | {"hostname": host_fields["hostname"]}, ["hostname"])
    if created_id is not None:
        return created_id, values
    # Another report of the same host created it first.
    row = session.connection().execute(HOST_BY_NAME, {"hostname": host_fields["hostname"]}).one()
    return row.host_id, prefixed(row, "host_")


def snapshot(inventory: dict[str, Any], reported: dict[str, Any]) -> dict[str, Any]:
    """Attributes at crash time: what the report says, else what the inventory knows."""
    values = {name: inventory.get(name) for name in HOST_ATTRIBUTES}
    for name in HOST_ATTRIBUTES:
        if reported.get(name) is not None:
            values[name] = reported[name]
    values["labels"] = dict(inventory.get("labels") or {}) | (reported.get("labels") or {})
    return values


def find_or_open_event(
    session: Session,
    host_id: int,
    attributes: dict[str, Any],
    report: dict[str, Any],
    signature: SignatureSnapshot | None,
    crash: CrashSignature | None,
    planned: CaptureDecision | None,
    regression: str | None,
) -> tuple[OpenEvent, bool]:
    """One event per crash: reports with the same hostname and boot_id join it (False)."""
    boot_key = report.get("boot_id") or f"report:{report['report_id']}"
    fingerprinted = {
        "signature_id": signature.id if signature else None,
        "fingerprint": crash.fingerprint if crash else None,
        "algorithm_version": crash.algorithm_version if crash else None,
        "title": crash.title[:512] if crash else None,
        "explanation": crash.explanation if crash else None,
    }
    values = attributes | fingerprinted | {
        "host_id": host_id,
        "hostname": report["host"]["hostname"],
        "boot_key": boot_key,
        "boot_id": report.get("boot_id"),
        "crashed_at": report["crashed_at"],
        "uptime_s": report.get("uptime_s"),
        "first_source": report["source"],
        "sources": [report["source"]],
        "capture_action": planned.action if planned else "pending",
        "capture_reason": planned.reason if planned else "",
        "capture_dump_level": planned.dump_level if planned else None,
        "regression": regression,
    }
    created_id = insert_ignore(session, Event, values, ["host_id", "boot_key"])
    if created_id is not None:
        event = OpenEvent(
            created_id,
            values["crashed_at"],
            values["kernel_version"],
            values["sources"],
            values["signature_id"],
            planned,
            regression,
        )
        return event, True
    row = session.connection().execute(LOCKED_EVENT, {"host_id": host_id, "boot_key": boot_key}).one()
    event = OpenEvent(
        row.id,
        row.crashed_at,
        row.kernel_version,
        list(row.sources),
        row.signature_id,
        CaptureDecision(row.capture_action, row.capture_reason, row.capture_dump_level),
        row.regression,
    )
    changes: dict[str, Any] = {}
    if event.signature_id is None and signature is not None:
        # The first source could not fingerprint (e.g. a DPU with no log); this one can.
        changes |= fingerprinted
        count_event(session, signature.id, event.id, event.crashed_at)
        event.counted = True
    if report["source"] not in event.sources:
        changes["sources"] = [*event.sources, report["source"]]
    if changes:
        session.connection().execute(update(Event.__table__).where(EVENTS.id == event.id).values(**changes))
    return event, False


def regression_of(
    signature: SignatureSnapshot | None, kernel_version: str | None, crashed_at: Any
) -> str | None:
    """How a new event bears on a resolved signature: regressed, unless it predates the fix."""
    if signature is None or signature.status != "resolved":
        return None
    return regression_verdict(kernel_version, crashed_at, signature.fixed_in_kernel, signature.resolved_at)


def flip_to_regressed(session: Session, signature: SignatureSnapshot, event_id: int) -> SignatureSnapshot:
    """A resolved signature with a regressed event: regressed (once, even in a storm)."""
    flipped = session.execute(
        update(Signature)
        .where(Signature.id == signature.id, Signature.status == "resolved")
        .values(status="regressed", updated_at=utcnow())
    ).rowcount
    if not flipped:  # a concurrent report of the same storm flipped it first: answer what it is now
        now = session.scalar(select(Signature.status).where(Signature.id == signature.id))
        return replace(signature, status=now)
    publish(session, "signature.regressed", signature.id, event_id=event_id)
    return replace(signature, status="regressed")
