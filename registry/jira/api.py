"""Jira's way in: the webhook endpoint, and the per-link sync state for operators."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from marshmallow import Schema, fields, validate

from registry.auth.tokens import require_scope
from registry.errors import ApiError
from registry.jira.state import list_links, outbox_state
from registry.jira.webhook import record_delivery, signature_is_valid
from registry.openapi import documented
from registry.requests import WholeNumber, id_field, json_object, load_query
from registry.web import current_db, current_settings

blueprint = Blueprint("jira", __name__, url_prefix="/api/v1/integrations/jira")
IDENTIFIER_HEADER = "X-Atlassian-Webhook-Identifier"


class LinkListQuery(Schema):
    failing = fields.Boolean(load_default=False, metadata={"description": "only links in error"})
    after = id_field(load_default=0, metadata={"description": "signature id to page from"})
    limit = WholeNumber(load_default=100, validate=validate.Range(min=1, max=1000))


@blueprint.post("/webhook")
@documented(
    "Jira webhook (authenticated by X-Hub-Signature: sha256=<HMAC of the body>)",
    responses={202: "accepted", 200: "a redelivery, already accepted"},
    errors=(400, 401, 403, 413),
    tag="integrations",
)
def webhook() -> Any:
    secret = current_settings().jira.webhook_secret
    if not secret:
        raise ApiError(403, "forbidden", "Jira webhooks are off: set CRASHREG_JIRA_WEBHOOK_SECRET")
    body = request.get_data(cache=True)
    if not signature_is_valid(secret, body, request.headers.get("X-Hub-Signature")):
        raise ApiError(
            401, "unauthorized", "X-Hub-Signature is missing or is not the HMAC of this body"
        )
    identifier = request.headers.get(IDENTIFIER_HEADER, "").strip()
    if not identifier or len(identifier) > 128:
        raise ApiError(
            400, "invalid", f"{IDENTIFIER_HEADER} is required (at most 128 characters)",
            fields={IDENTIFIER_HEADER: ["missing or too long"]},
        )
    # the same bytes the HMAC was checked over (request data is cached); Jira's text as it is:
    # a NUL in a comment must not make a 400, which Jira would not retry
    payload = json_object()
    with current_db().session() as session:
        accepted = record_delivery(session, identifier, payload)
    return jsonify({"accepted": True, "duplicate": not accepted}), 202 if accepted else 200


@blueprint.get("/links")
@require_scope("read")
@documented(
    "Per-signature Jira link and sync state, and the sync's backlog",
    query=LinkListQuery,
    errors=(400, 401, 403),
    tag="integrations",
)
def links() -> Any:
    args = load_query(LinkListQuery())
    with current_db().session() as session:
        page = list_links(session, args["failing"], args["after"], args["limit"])
        outbox = outbox_state(session)
    next_after = page[-1]["signature_id"] if len(page) == args["limit"] else None
    return jsonify({"links": page, "next_after": next_after, "outbox": outbox})
