"""Captures, dedup savings and the offline policy bundle over HTTP."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flask import Blueprint, Response, jsonify, request
from marshmallow import Schema, fields, validate
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy.orm import Session

from registry.auth.tokens import require_scope
from registry.capture.bundle import build_bundle
from registry.capture.models import CAPTURE_METHODS, CAPTURE_STATUSES, PROCESSING_STATES
from registry.capture.savings import MAX_CAPTURE_BYTES, MAX_CAPTURE_SECONDS, totals
from registry.capture.service import (
    MAX_REMOVED_KEYS,
    capture_dict,
    load_savings,
    mark_removed,
    record_capture,
    update_capture,
)
from registry.openapi import documented
from registry.requests import WholeNumber, json_body, load, load_query
from registry.signatures.service import signature_or_404
from registry.web import current_db, current_settings

blueprint = Blueprint("capture", __name__, url_prefix="/api/v1")

_BYTES = validate.Range(min=0, max=MAX_CAPTURE_BYTES)
_SECONDS = validate.Range(min=0, max=MAX_CAPTURE_SECONDS)


class CaptureFields(Schema):
    """What can be said about a capture, at creation or later."""

    dump_level = WholeNumber(validate=validate.Range(min=0, max=31), allow_none=True)
    bytes = WholeNumber(validate=_BYTES, allow_none=True)
    duration_s = fields.Float(validate=_SECONDS, allow_none=True)
    downtime_s = fields.Float(validate=_SECONDS, allow_none=True)
    target = fields.String(validate=validate.Length(max=512), allow_none=True)
    uri = fields.String(validate=validate.Length(max=4096), allow_none=True)
    processing_state = fields.String(
        validate=validate.OneOf(PROCESSING_STATES),
        metadata={"description": "for raw captures transformed later (decoupled capture)"},
    )


class CaptureCreateSchema(CaptureFields):
    method = fields.String(required=True, validate=validate.OneOf(CAPTURE_METHODS))
    status = fields.String(required=True, validate=validate.OneOf(CAPTURE_STATUSES))
    capture_key = fields.String(
        validate=validate.Length(min=1, max=128),
        metadata={"description": "idempotency key: a resend with the same key is stored once"},
    )


class CapturePatchSchema(CaptureFields):
    status = fields.String(validate=validate.OneOf(CAPTURE_STATUSES))


class CaptureSchema(CaptureCreateSchema):
    capture_key = fields.String(allow_none=True)
    processing_state = fields.String(validate=validate.OneOf(PROCESSING_STATES), allow_none=True)
    removed_at = fields.AwareDateTime(
        allow_none=True, metadata={"description": "when the captured file was removed from its target"}
    )
    removed_reason = fields.String(allow_none=True, metadata={"description": "why, as the reporter said"})
    id = fields.String()
    event_id = fields.String()
    signature_id = fields.String(allow_none=True)
    created_at = fields.AwareDateTime()
    updated_at = fields.AwareDateTime()


class SavingsQuery(Schema):
    signature = fields.String(
        validate=validate.Length(min=1, max=64), metadata={"description": "signature id or fingerprint"}
    )
    limit = WholeNumber(load_default=50, validate=validate.Range(min=1, max=1000))


class SavingsSchema(Schema):
    totals = fields.Dict(
        metadata={"description": "dumps_skipped, bytes_avoided, downtime_hours_avoided, ..."}
    )
    signatures = fields.List(fields.Dict(), metadata={"description": "per signature, most downtime first"})


class BundleQuery(Schema):
    format = fields.String(load_default="json", validate=validate.OneOf(["json", "text"]))
    host = fields.String(validate=validate.Length(min=1, max=255), metadata={
        "description": "the hostname the bundle is for: `no_signature` then counts its own budget too"})


class BundleSchema(Schema):
    format = fields.String()
    format_version = fields.Integer()
    version = fields.String()
    generated_at = fields.AwareDateTime()
    unknown = fields.Dict()
    no_signature = fields.Dict(metadata={"description": "the answer for a report with no recognisable crash"})
    entries = fields.List(fields.Dict())


@blueprint.post("/events/<id:event_id>/captures")
@require_scope("report")
@documented(
    "Record a capture of an event (a resend with the same capture_key is stored once)",
    request=CaptureCreateSchema,
    responses={201: CaptureSchema, 200: CaptureSchema},
    errors=(400, 401, 403, 404),
    tag="captures",
)
def post_capture(event_id: int) -> Any:
    values = load(CaptureCreateSchema(), json_body())
    with current_db().session(bounded=True) as session:
        capture, created = record_capture(session, event_id, values)
        return jsonify(capture_dict(capture)), 201 if created else 200


@blueprint.patch("/captures/<id:capture_id>")
@require_scope("report")
@documented(
    "Update a capture: status, processing state (raw now, processed later), sizes, URI",
    request=CapturePatchSchema,
    responses={200: CaptureSchema},
    errors=(400, 401, 403, 404, 409),
    tag="captures",
)
def patch_capture(capture_id: int) -> Any:
    changes = load(CapturePatchSchema(), json_body())
    with current_db().session(bounded=True) as session:
        return jsonify(capture_dict(update_capture(session, capture_id, changes)))


class CapturesRemovedSchema(Schema):
    capture_keys = fields.List(
        fields.String(validate=validate.Length(min=1, max=128)),
        required=True,
        validate=validate.Length(min=1, max=MAX_REMOVED_KEYS),
        metadata={"description": "the captures' capture_key (as recorded)"},
    )
    reason = fields.String(required=True, validate=validate.Length(min=1, max=255))


class CapturesRemovedAnswerSchema(Schema):
    removed = fields.List(fields.String(), metadata={"description": "keys of captures now marked removed"})
    unknown = fields.List(fields.String(), metadata={"description": "keys that name no capture"})


@blueprint.post("/captures/removed")
@require_scope("report")
@documented(
    "Say that captured files are gone from their target (a core handler's directory cap deleted "
    "them): each capture is marked once and its event's capture slot is freed",
    request=CapturesRemovedSchema,
    responses={200: CapturesRemovedAnswerSchema},
    errors=(400, 401, 403),
    tag="captures",
)
def post_captures_removed() -> Any:
    notice = load(CapturesRemovedSchema(), json_body())
    with current_db().session(bounded=True) as session:
        removed, unknown = mark_removed(session, notice["capture_keys"], notice["reason"])
    return jsonify({"removed": removed, "unknown": unknown})


@blueprint.get("/captures/savings")
@require_scope("read")
@documented(
    "What dedup saved: dumps skipped, bytes and downtime avoided (skipped x median full capture)",
    query=SavingsQuery,
    responses={200: SavingsSchema},
    errors=(400, 401, 403, 404),
    tag="captures",
)
def get_savings() -> Any:
    args = load_query(SavingsQuery())
    with current_db().session() as session:
        signature_id = signature_or_404(session, args["signature"]).id if "signature" in args else None
        savings = load_savings(session, signature_id)
    return jsonify(
        {"totals": totals(savings), "signatures": [s.as_dict() for s in savings[: args["limit"]]]}
    )


@blueprint.get("/policy-bundle")
@require_scope("report", "read")
@documented(
    "Offline capture decisions for the kdump initramfs (ETag; If-None-Match gives 304)",
    query=BundleQuery,
    responses={
        200: {"application/json": BundleSchema, "text/plain": {"type": "string"}},
        304: "unchanged since the ETag sent in If-None-Match",
    },
    errors=(400, 401, 403),
    tag="captures",
)
def get_policy_bundle() -> Any:
    args = load_query(BundleQuery())
    with current_db().session() as session:
        bundle = build_bundle(session, current_settings(), args.get("host"))
    as_text = args["format"] == "text"
    etag = f"{bundle.version}-text" if as_text else bundle.version
    if request.if_none_match.contains_weak(etag):
        response = Response(status=304)
    elif as_text:
        response = Response(bundle.as_text(), content_type="text/plain; charset=utf-8")
    else:
        response = jsonify(bundle.as_json())
    response.set_etag(etag)
    response.headers["Cache-Control"] = "no-cache"
    return response


def savings_metrics(session: Session) -> Iterable[Metric]:
    """Dedup savings for Prometheus, read from the database at scrape time."""
    summed = totals(load_savings(session))
    figures = (
        ("crashreg_capture_dumps_skipped", "Dumps skipped: the signature was known", "dumps_skipped"),
        ("crashreg_capture_bytes_avoided", "Dump bytes avoided (skipped x median)", "bytes_avoided"),
        (
            "crashreg_capture_downtime_hours_avoided",
            "Estimated host downtime avoided in hours (skipped x median)",
            "downtime_hours_avoided",
        ),
    )
    for name, documentation, key in figures:
        yield GaugeMetricFamily(name, documentation, value=float(summed[key]))  # type: ignore[arg-type]

