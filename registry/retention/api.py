"""Pins over HTTP: an engineer keeps a capture's dump from retention, and lets it go again."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify, request
from marshmallow import Schema, fields, validate

from registry.auth.tokens import human_decision, require_scope
from registry.openapi import documented
from registry.requests import json_body, load
from registry.retention.pins import pin, pin_dict, pin_history, unpin
from registry.web import current_db

blueprint = Blueprint("retention", __name__, url_prefix="/api/v1")


class PinRequestSchema(Schema):
    note = fields.String(
        validate=validate.Length(max=500),
        allow_none=True,
        metadata={"description": "why it is kept (shown with the pin)"},
    )


class PinSchema(Schema):
    id = fields.String()
    capture_id = fields.String()
    note = fields.String(allow_none=True)
    pinned_by = fields.String(metadata={"description": "the name of the token that pinned it"})
    pinned_at = fields.AwareDateTime()
    unpinned_by = fields.String(allow_none=True)
    unpinned_at = fields.AwareDateTime(allow_none=True)


class PinHistorySchema(Schema):
    pins = fields.List(fields.Nested(PinSchema), metadata={"description": "oldest first; the last may stand"})


@blueprint.put("/captures/<id:capture_id>/pin")
@require_scope("triage")
@documented(
    "Pin a capture's dump: retention never deletes it until it is unpinned (a repeat returns the "
    "standing pin, 200; 409 when retention is already deleting the dump)",
    request=PinRequestSchema,
    request_required=False,
    responses={201: PinSchema, 200: PinSchema},
    errors=(400, 401, 403, 404, 409),
    tag="retention",
)
def put_pin(capture_id: int) -> Any:
    values = load(PinRequestSchema(), json_body() if request.content_length else {})
    with current_db().session() as session:
        row, created = pin(session, capture_id, values.get("note"), g.token.name, g.token.id)
        return jsonify(pin_dict(row)), 201 if created else 200


@blueprint.delete("/captures/<id:capture_id>/pin")
@require_scope("triage")
@human_decision("unpin a dump")
@documented(
    "Unpin a capture's dump: retention's ordinary rules apply to it again (the pin is kept as history)",
    responses={200: PinSchema},
    errors=(401, 403, 404),
    tag="retention",
)
def delete_pin(capture_id: int) -> Any:
    with current_db().session() as session:
        return jsonify(pin_dict(unpin(session, capture_id, g.token.name, g.token.id)))


@blueprint.get("/captures/<id:capture_id>/pins")
@require_scope("read")
@documented(
    "Who pinned and unpinned a capture's dump, when and why",
    responses={200: PinHistorySchema},
    errors=(401, 403, 404),
    tag="retention",
)
def get_pins(capture_id: int) -> Any:
    with current_db().session() as session:
        return jsonify({"pins": [pin_dict(row) for row in pin_history(session, capture_id)]})
