"""POST /api/v1/reports, GET /api/v1/events/{id} and GET /api/v1/unfingerprinted."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TypedDict

from flask import Blueprint, jsonify
from marshmallow import Schema, fields, validate
from sqlalchemy import Connection, select
from werkzeug.exceptions import HTTPException

from registry.auth.tokens import accepted, admit, hash_token, load_caller, presented_token, require_scope
from registry.capture.models import Capture
from registry.capture.service import CaptureView, capture_dict
from registry.core.events import Event, EventSummary, Report, event_summary, userspace_stacks
from registry.core.signatures import Signature
from registry.core.wiring import app_engine, app_frame_names
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
from registry.ingest.unfingerprinted import CAUSES, LOG_TAIL_CHARS, STACK_FRAMES, unfingerprinted_events
from registry.metrics import (
    CAPTURE_ANSWERS,
    INGEST_LATENCY,
    NO_CRASH,
    REPORTS,
    UNFINGERPRINTED,
    UNKNOWN_FIELDS,
)
from registry.openapi import documented
from registry.requests import WholeNumber, json_body, load, load_query
from registry.schema_loader import compiled_loader
from registry.signatures.api import decode_cursor, encode_cursor
from registry.signatures.service import SignatureSummary, summary
from registry.signatures.userspace import CoreCommands, UserspaceCrash, core_commands, userspace_crash
from registry.storage.service import stored_dumps
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
    offset = fields.String(metadata={"description": "a userspace frame: the module offset of the stack frame "
                                                    "it was read from (the frame sent, as userspace.frames[] "
                                                    "has it)"})
    inlined = fields.Boolean(metadata={"description": "a call the debug info found inlined at that offset"})


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


class LabelProofSchema(Schema):
    label = fields.String()
    proof = fields.String(metadata={"description": "what the evidence showed, in words"})


class UserFrameSchema(Schema):
    index = fields.Integer(allow_none=True, metadata={
        "description": "position in the report's frames; null: read from the red zone"})
    address = fields.String(allow_none=True)
    module = fields.String(allow_none=True)
    build_id = fields.String(allow_none=True)
    offset = fields.String(allow_none=True, metadata={"description": "in the module (addr2line, debuginfod)"})
    function = fields.String(allow_none=True)
    function_offset = fields.String(allow_none=True)
    file = fields.String(allow_none=True, metadata={"description": "once symbols exist"})
    line = fields.Integer(allow_none=True)
    inlined = fields.List(fields.Raw(), allow_none=True, metadata={
        "description": "functions inlined at this address, innermost first"})
    signal_frame = fields.Boolean()
    decision = fields.String(allow_none=True, metadata={
        "enum": ["guilty", "used", "skipped", None], "description": "null: the engine did not read it"})
    rule = fields.String(allow_none=True, metadata={"description": "the skip class that skipped it"})
    note = fields.String(allow_none=True)


class MappingViewSchema(Schema):
    start = fields.String()
    end = fields.String()
    perms = fields.String(allow_none=True)
    path = fields.String(allow_none=True)


class FaultSchema(Schema):
    pc = fields.String(allow_none=True)
    pc_mapping = fields.Nested(MappingViewSchema, allow_none=True)
    si_addr = fields.String(allow_none=True)
    si_code = fields.Integer(allow_none=True)
    si_code_name = fields.String(allow_none=True, metadata={"description": "SEGV_MAPERR, SI_KERNEL, ..."})
    si_code_meaning = fields.String(allow_none=True)
    address_mapping = fields.Nested(MappingViewSchema, allow_none=True, metadata={
        "description": "the mapping si_addr falls in (null: none)"})
    address_reading = fields.String(allow_none=True, metadata={"description": "the fault address in words"})


class ProcessFactsSchema(Schema):
    executable = fields.String(allow_none=True)
    build_id = fields.String(allow_none=True, metadata={"description": "the executable's"})
    version = fields.String(allow_none=True)
    pid = fields.Integer(allow_none=True)
    tid = fields.Integer(allow_none=True)
    name = fields.String(allow_none=True)
    args = fields.String(allow_none=True)
    started_at = fields.String(allow_none=True)
    uptime_s = fields.Float(allow_none=True)


class ThreadViewSchema(Schema):
    tid = fields.Integer(allow_none=True)
    frames = fields.List(fields.Nested(UserFrameSchema))


class UserspaceCrashSchema(Schema):
    """What a core reader saw (docs/userspace.md), in an engineer's terms."""

    signal = fields.String(allow_none=True)
    signal_meaning = fields.String(allow_none=True)
    labels = fields.List(fields.Nested(LabelProofSchema))
    frames = fields.List(fields.Nested(UserFrameSchema), metadata={
        "description": "every frame of the crashing thread, with the engine's decision"})
    guilty = fields.Integer(allow_none=True, metadata={"description": "index of the guilty frame in frames"})
    registers = fields.Dict(keys=fields.String(), values=fields.String())
    fault = fields.Nested(FaultSchema)
    process = fields.Nested(ProcessFactsSchema)
    threads = fields.List(fields.Nested(ThreadViewSchema), metadata={
        "description": "the other threads, when the report carries them"})


class CoreCommandsSchema(Schema):
    capture_id = fields.String()
    method = fields.String(metadata={"enum": ["core", "core_filtered"]})
    download = fields.String(allow_none=True, metadata={
        "description": "GET with a read token: a short-lived link to the stored core (null: not stored)"})
    file = fields.String()
    fetch = fields.String(allow_none=True, metadata={"description": "shell lines that download it"})
    open = fields.String(metadata={"description": "gdb on the core, symbols from the registry's debuginfod"})
    on_host = fields.String(allow_none=True)


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
    userspace = fields.Nested(UserspaceCrashSchema, allow_none=True, metadata={
        "description": "a userspace crash: what its core reader saw (null: a kernel crash)"})
    core_commands = fields.List(fields.Nested(CoreCommandsSchema), metadata={
        "description": "how to open each core captured for it"})


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
        admit(load_caller(REPORTER_SCOPES), REPORTER_SCOPES)
        raise
    warnings = report_warnings(REPORT_SCHEMA, raw)
    result = ingest_report(current_db(), current_settings(), report, raw, caller, app_engine())
    INGEST_LATENCY.observe(time.perf_counter() - started)
    REPORTS.labels(report["source"], "new" if result.created else "replay").inc()
    if result.created:
        CAPTURE_ANSWERS.labels(result.answer["capture"]["action"]).inc()
        if result.unfingerprinted:
            UNFINGERPRINTED.labels(report["source"]).inc()
        if result.no_crash:
            NO_CRASH.labels(report["source"]).inc()
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


class UserspaceDetail(TypedDict):
    userspace: UserspaceCrash | None
    core_commands: list[CoreCommands]


class EventDetail(EventSummary, UserspaceDetail):
    """GET /api/v1/events/{id}: the summary, then its signature, reports, captures, explanation,
    and for a userspace crash what its core reader saw."""

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
        **userspace_detail(session, event, captures),
    }


class UnfingerprintedQuery(Schema):
    cause = fields.String(
        validate=validate.OneOf(list(CAUSES)),
        metadata={"description": "no_crash: the engine found no crash in the report; engine_failed: it "
                  "raised on it"},
    )
    limit = WholeNumber(load_default=50, validate=validate.Range(min=1, max=200))
    cursor = fields.String(validate=validate.Length(max=100))


class ReportTextSchema(Schema):
    source = fields.String()
    console_log_tail = fields.String(allow_none=True, metadata={
        "description": f"the console log's last {LOG_TAIL_CHARS} characters"})
    console_log_chars = fields.Integer(allow_none=True, metadata={"description": "the whole log's length"})
    stack = fields.Dict(allow_none=True, metadata={
        "description": f"the report's stack: its first {STACK_FRAMES} frames, no memory mappings"})


class UnfingerprintedEventSchema(Schema):
    id = fields.String()
    hostname = fields.String()
    crashed_at = fields.AwareDateTime()
    received_at = fields.AwareDateTime()
    source = fields.String()
    cause = fields.String(metadata={"description": "no_crash | engine_failed"})
    fingerprint_error = fields.String(allow_none=True)
    capture = fields.Dict(metadata={"description": "the capture answer the event was given"})
    text = fields.Nested(ReportTextSchema, allow_none=True, metadata={
        "description": "what the engine read in the event's first report"})


class UnfingerprintedPageSchema(Schema):
    events = fields.List(fields.Nested(UnfingerprintedEventSchema))
    next_cursor = fields.String(allow_none=True)


@blueprint.get("/unfingerprinted")
@require_scope("read")
@documented(
    "Events stored without a signature (no crash found, or the engine failed), newest first, with "
    "their text: cursor pagination",
    query=UnfingerprintedQuery,
    responses={200: UnfingerprintedPageSchema},
    errors=(400, 401, 403),
    tag="events",
)
def list_unfingerprinted() -> Any:
    args = load_query(UnfingerprintedQuery())
    before = decode_cursor(args["cursor"], "id")[1] if args.get("cursor") else None
    with current_db().session() as session:
        events, more = unfingerprinted_events(session, args.get("cause"), before, args["limit"])
    next_cursor = encode_cursor([None, int(events[-1]["id"])]) if more else None
    return jsonify({"events": events, "next_cursor": next_cursor})

def userspace_detail(session: Any, event: Event, captures: Sequence[Capture]) -> UserspaceDetail:
    """What the first core reader's report says, and how to open the event's cores (None and
    [] for a crash no core reader reported: a kernel's)."""
    stack = userspace_stacks(session, [event.id]).get(event.id) if "userspace" in event.sources else None
    if stack is None:
        return {"userspace": None, "core_commands": []}
    crash = userspace_crash(stack, event.crashed_at, event.program_version, event.explanation,
                            app_frame_names())
    stored = {capture_id: dump.encoding
              for capture_id, dump in stored_dumps(session, [c.id for c in captures]).items()}
    commands = core_commands(current_settings().public_url, event.id, crash["process"], event.hostname,
                             [capture_dict(c) for c in captures], stored)
    return {"userspace": crash, "core_commands": commands}
