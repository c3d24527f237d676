"""POST /api/v1/reports and GET /api/v1/events/{id}."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from flask import Blueprint, jsonify
from marshmallow import Schema, fields
from sqlalchemy import Connection, select
from werkzeug.exceptions import HTTPException

from registry.auth.tokens import accepted, admit, hash_token, load_caller, presented_token, require_scope
from registry.capture.models import Capture
from registry.capture.service import CaptureView, capture_dict
from registry.core.events import Event, EventSummary, Report, event_summary
from registry.core.signatures import Signature
from registry.core.wiring import app_engine
from registry.errors import ApiError
from registry.fingerprint import ExplanationRecord
from registry.ingest.schemas import (
    NOTHING_TO_FINGERPRINT,
    ReportAnswerSchema,
    ReportSchema,
    report_warnings,
    unknown_field_problems,
)
from registry.ingest.service import Caller, ReportAnswer, ingest_report
from registry.metrics import CAPTURE_ANSWERS, INGEST_LATENCY, REPORTS, UNFINGERPRINTED, UNKNOWN_FIELDS
from registry.openapi import documented
from registry.requests import json_body, load
from registry.schema_loader import compiled_loader
from registry.signatures.service import SignatureSummary, summary
from registry.web import current_db, current_settings

blueprint = Blueprint("ingest", __name__, url_prefix="/api/v1")
REPORT_SCHEMA = ReportSchema()
LOAD_REPORT = compiled_loader(REPORT_SCHEMA)


class ExplainedFrameSchema(Schema):
    function = fields.String(allow_none=True)
    module = fields.String(allow_none=True)
    decision = fields.String(metadata={"enum": ["guilty", "used", "skipped"]})
    rule = fields.String(allow_none=True, metadata={"description": "the skip class that skipped it"})
    file = fields.String(metadata={"description": "the source file the debug info puts it in (a userspace "
                                                  "frame symbolicated by the registry)"})
    line = fields.Integer(metadata={"description": "its line in that file"})


class ExplanationSchema(Schema):
    """The engine's record of how the event's fingerprint was made (keys may be added)."""

    v = fields.Integer(metadata={"description": "ALGORITHM_VERSION of the engine that explained it"})
    kind = fields.String()
    kind_rule = fields.String(allow_none=True, metadata={"description": "the rule recognising the report"})
    headline = fields.String(allow_none=True, metadata={"description": "the normalised headline"})
    section = fields.String(allow_none=True, metadata={"description": "where in the report frames came from"})
    frames = fields.List(fields.Nested(ExplainedFrameSchema))
    guilty = fields.Integer(allow_none=True, metadata={"description": "index of the guilty frame in frames"})
    flags = fields.List(fields.String(), metadata={"description": "corrupted, interleaved, truncated"})
    unsymbolicated = fields.List(fields.String(), metadata={
        "description": "build-ids of the stack's modules the registry had no symbols for when it "
                       "fingerprinted it: symbolicated again when they arrive"})


class EventSchema(Schema):
    id = fields.String()
    hostname = fields.String()
    boot_id = fields.String(allow_none=True)
    crashed_at = fields.AwareDateTime()
    received_at = fields.AwareDateTime()
    uptime_s = fields.Integer(allow_none=True)
    repeats = fields.Integer(metadata={"description": "further occurrences in the same boot (live_kernel)"})
    sources = fields.List(fields.String())
    host = fields.Dict(metadata={"description": "host attributes at crash time"})
    signature = fields.Dict(allow_none=True)
    signature_id = fields.String(allow_none=True)
    fingerprint = fields.String(allow_none=True)
    title = fields.String(allow_none=True)
    algorithm_version = fields.Integer(allow_none=True)
    fingerprint_error = fields.String(allow_none=True, metadata={
        "description": "the signature engine failed on this event's report (the exception): stored "
        "without a signature until `crashreg signatures rebuild` fingerprints it"})
    explanation = fields.Nested(ExplanationSchema, allow_none=True,
                                metadata={"description": "null: no crash, or stored before explanations "
                                          "(crashreg signatures rebuild fills it)"})
    capture = fields.Dict()
    regression = fields.String(allow_none=True)
    reports = fields.List(fields.Dict())
    captures = fields.List(fields.Dict())


REPORTER_SCOPES = ("report",)


@blueprint.post("/reports")
@require_scope(*REPORTER_SCOPES, checked_by_view=True)
@documented(
    "Report a crash and learn whether to capture a dump",
    request=ReportSchema,
    responses={201: ReportAnswerSchema, 200: ReportAnswerSchema},
    errors=(400, 401, 403, 409, 422, 503),
    tag="ingest",
)
def post_report() -> Any:
    started = time.perf_counter()
    # The token is checked inside ingest's one read (or its one write, planned on an earlier
    # read); a request refused before it is checked on a lookup of its own first, so a bad
    # token is a 401 whatever the body.
    caller = Caller(hash_token(presented_token()), admit_reporter)
    try:
        raw, report = validated_report()
    except (ApiError, HTTPException):
        admit(load_caller(), REPORTER_SCOPES)
        raise
    warnings = report_warnings(REPORT_SCHEMA, raw)
    result = ingest_report(current_db(), current_settings(), report, raw, caller, app_engine())
    INGEST_LATENCY.observe(time.perf_counter() - started)
    REPORTS.labels(report["source"], "new" if result.created else "replay").inc()
    if result.created:
        CAPTURE_ANSWERS.labels(result.answer["capture"]["action"]).inc()
        if result.unfingerprinted:
            UNFINGERPRINTED.labels(report["source"]).inc()
        if warnings:
            UNKNOWN_FIELDS.labels(report["source"]).inc()
    body: ReportResponse = {**result.answer, "warnings": warnings}
    return jsonify(body), 201 if result.created else 200


def admit_reporter(connection: Connection, token: dict[str, Any] | None) -> None:
    admit(accepted(connection, token), REPORTER_SCOPES)


def validated_report() -> tuple[dict[str, Any], dict[str, Any]]:
    """The body as sent and as the schema loads it, or the 400 saying what is wrong."""
    raw = json_body()
    report = LOAD_REPORT(raw)  # the schema's own load for what this one gives up on: its errors
    if report is not None:
        return raw, report
    try:
        return raw, load(REPORT_SCHEMA, raw)
    except ApiError as error:
        # Nothing to fingerprint is most often a misspelt console_log: name the typo too.
        nothing = NOTHING_TO_FINGERPRINT in error.fields.get("console_log", ())
        if nothing and (unknown := unknown_field_problems(REPORT_SCHEMA, raw)):
            error.fields |= unknown
            error.message += f"; unknown fields: {', '.join(unknown)}"
        raise


@blueprint.get("/events/<id:event_id>")
@require_scope("read")
@documented(
    "One crash event: host at crash time, reports, captures",
    responses={200: EventSchema},
    errors=(401, 403, 404),
    tag="events",
)
def get_event(event_id: int) -> Any:
    with current_db().session() as session:
        event = session.get(Event, event_id)
        if event is None:
            raise ApiError(404, "not_found", f"no event {event_id}")
        return jsonify(event_detail(session, event))


class ReportResponse(ReportAnswer):
    """POST /api/v1/reports: the stored answer and what this request's report had that was ignored."""

    warnings: list[str]


class ReportReceipt(TypedDict):
    report_id: str
    source: str
    received_at: str


class EventDetail(EventSummary):
    """GET /api/v1/events/{id}: the summary, then its signature, reports, captures, explanation."""

    signature: SignatureSummary | None
    reports: list[ReportReceipt]
    captures: list[CaptureView]
    explanation: ExplanationRecord | None


def event_detail(session: Any, event: Event) -> EventDetail:
    signature = session.get(Signature, event.signature_id) if event.signature_id else None
    reports = session.execute(
        select(Report.report_id, Report.source, Report.received_at)
        .where(Report.event_id == event.id)
        .order_by(Report.received_at)
    ).all()
    captures = session.scalars(select(Capture).where(Capture.event_id == event.id)).all()
    return {
        **event_summary(event),
        "signature": summary(session, signature) if signature else None,
        "reports": [
            {"report_id": r.report_id, "source": r.source, "received_at": r.received_at.isoformat()}
            for r in reports
        ],
        "captures": [capture_dict(c) for c in captures],
        "explanation": event.explanation,
    }
