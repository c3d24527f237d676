"""Ingest: a validated crash report in, a stored event and a capture answer out.

Idempotent on report_id (replays answer what the first answer said), and race-safe: every
insert is ON CONFLICT DO NOTHING, and a transaction that loses the report_id race rolls back
whole and replays the winner's answer, so nothing is stored twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.capture.decide import CaptureDecision, decide_capture
from registry.config import Settings
from registry.db import Database, utcnow
from registry.errors import ApiError
from registry.ingest.models import Event, Report
from registry.inventory.models import HOST_ATTRIBUTES, Host
from registry.outbox import publish
from registry.signatures.identify import CrashSignature, identify
from registry.signatures.models import Signature
from registry.signatures.regression import REGRESSED, regression_verdict
from registry.signatures.service import count_event, resolve_or_create, summary
from registry.upsert import insert_ignore


@dataclass(frozen=True)
class IngestResult:
    answer: dict[str, Any]
    created: bool


def payload_digest(raw: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def ingest_report(
    db: Database, settings: Settings, report: dict[str, Any], raw: dict[str, Any]
) -> IngestResult:
    digest = payload_digest(raw)
    crash = identify(report.get("console_log"), report.get("stack"))  # pure: outside the transaction
    try:
        # One transaction for the replay check and the store: each session costs a pool
        # checkout (pre-ping), BEGIN, COMMIT and a reset, which dominate a storm's latency.
        with db.session() as session:
            replay = replayed_answer(session, report["report_id"], digest)
            if replay is not None:
                return IngestResult(replay, created=False)
            return IngestResult(store(session, settings, report, raw, digest, crash), created=True)
    except IntegrityError:
        # Another worker stored this report_id between our check and our commit.
        with db.session() as session:
            replay = replayed_answer(session, report["report_id"], digest)
        if replay is None:
            raise
        return IngestResult(replay, created=False)


def replayed_answer(session: Session, report_id: str, digest: str) -> dict[str, Any] | None:
    stored = session.execute(
        select(Report.payload_sha256, Report.answer).where(Report.report_id == report_id)
    ).one_or_none()
    if stored is None:
        return None
    if stored.payload_sha256 != digest:
        raise ApiError(
            409,
            "conflict",
            "report_id was already used for a different report",
            fields={"report_id": ["already used with a different body"]},
        )
    return stored.answer | {"duplicate": True}


def store(
    session: Session,
    settings: Settings,
    report: dict[str, Any],
    raw: dict[str, Any],
    digest: str,
    crash: CrashSignature | None,
) -> dict[str, Any]:
    host = upsert_host_seen_in_crash(session, report["host"])
    signature, new_signature = (
        resolve_or_create(session, crash, report["crashed_at"]) if crash else (None, False)
    )
    event, new_event = find_or_open_event(session, host, report, signature, crash)
    if new_event:
        if signature is not None:
            count_event(session, signature.id, event.id, event.crashed_at)
            if new_signature:
                publish(session, "signature.created", signature.id)
            elif signature.status == "resolved":
                mark_regressed(session, signature, event)
        decision = decide_capture(session, signature, event, settings, new_signature)
        event.capture_action, event.capture_reason = decision.action, decision.reason
        event.capture_dump_level = decision.dump_level
    else:
        decision = CaptureDecision(event.capture_action, event.capture_reason, event.capture_dump_level)
        if report["source"] not in event.sources:
            event.sources = [*event.sources, report["source"]]
    answer = {
        "event_id": str(event.id),
        "duplicate": False,
        "known": signature is not None and not new_signature,
        "signature": summary(session, signature) if signature is not None else None,
        "capture": decision.as_dict(),
    }
    session.add(
        Report(
            report_id=report["report_id"],
            event_id=event.id,
            source=report["source"],
            payload_sha256=digest,
            payload={k: v for k, v in raw.items() if k != "console_log"},
            console_log=report.get("console_log"),
            answer=answer,
        )
    )
    session.flush()
    return answer


def upsert_host_seen_in_crash(session: Session, host_fields: dict[str, Any]) -> Host:
    """Hosts first seen in a crash join the inventory with the attributes they reported."""
    hostname = host_fields["hostname"]
    host = session.scalar(select(Host).where(Host.hostname == hostname))
    if host is None:
        values = {name: host_fields.get(name) for name in HOST_ATTRIBUTES}
        insert_ignore(
            session,
            Host,
            values | {"hostname": hostname, "labels": host_fields.get("labels") or {}},
            ["hostname"],
        )
        host = session.scalar(select(Host).where(Host.hostname == hostname))
        assert host is not None
    return host


def snapshot(host: Host, reported: dict[str, Any]) -> dict[str, Any]:
    """Attributes at crash time: what the report says, else what the inventory knows."""
    values = host.attributes()
    for name in HOST_ATTRIBUTES:
        if reported.get(name) is not None:
            values[name] = reported[name]
    values["labels"] = values["labels"] | (reported.get("labels") or {})
    return values


def find_or_open_event(
    session: Session,
    host: Host,
    report: dict[str, Any],
    signature: Signature | None,
    crash: CrashSignature | None,
) -> tuple[Event, bool]:
    """One event per crash: reports with the same hostname and boot_id join it."""
    boot_key = report.get("boot_id") or f"report:{report['report_id']}"
    values = snapshot(host, report["host"]) | {
        "host_id": host.id,
        "hostname": host.hostname,
        "boot_key": boot_key,
        "boot_id": report.get("boot_id"),
        "crashed_at": report["crashed_at"],
        "uptime_s": report.get("uptime_s"),
        "first_source": report["source"],
        "sources": [report["source"]],
        "capture_action": "pending",
        "capture_reason": "",
        "signature_id": signature.id if signature else None,
        "fingerprint": crash.fingerprint if crash else None,
        "algorithm_version": crash.algorithm_version if crash else None,
        "title": crash.title[:512] if crash else None,
    }
    created_id = insert_ignore(session, Event, values, ["host_id", "boot_key"])
    # Lock the row: concurrent reports of the same crash append to one sources list. Only
    # reports of one crash ever contend for it, so this is no storm-wide hot row.
    event = session.scalar(
        select(Event).where(Event.host_id == host.id, Event.boot_key == boot_key).with_for_update()
    )
    assert event is not None
    if created_id is None and event.signature_id is None and signature is not None:
        # The first source could not fingerprint (e.g. a DPU with no log); this one can.
        event.signature_id, event.fingerprint = signature.id, crash.fingerprint if crash else None
        event.algorithm_version = crash.algorithm_version if crash else None
        event.title = crash.title[:512] if crash else None
        count_event(session, signature.id, event.id, event.crashed_at)
    return event, created_id is not None


def mark_regressed(session: Session, signature: Signature, event: Event) -> None:
    """A new event on a resolved signature: regressed, unless it predates the fix (see regression)."""
    event.regression = regression_verdict(
        event.kernel_version, event.crashed_at, signature.fixed_in_kernel, signature.resolved_at
    )
    if event.regression != REGRESSED:
        return
    flipped = session.execute(
        update(Signature)
        .where(Signature.id == signature.id, Signature.status == "resolved")
        .values(status="regressed", updated_at=utcnow())
    ).rowcount
    if flipped:
        signature.status = "regressed"
        publish(session, "signature.regressed", signature.id, event_id=event.id)
