"""POST /api/v1/hosts: the fleet inventory, upserted in bulk."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, jsonify, request
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from registry.auth.tokens import require_scope
from registry.bounds import time_problem
from registry.core.schemas import HostSchema
from registry.inventory.service import upsert_hosts
from registry.openapi import documented
from registry.requests import json_body, load
from registry.web import current_db

blueprint = Blueprint("inventory", __name__, url_prefix="/api/v1")
MAX_HOSTS_PER_CALL = 20_000
MAX_INVENTORY_BODY_BYTES = 64 * 1024 * 1024


class HostsUpsertSchema(Schema):
    hosts = fields.List(
        fields.Nested(HostSchema), required=True, validate=validate.Length(min=1, max=MAX_HOSTS_PER_CALL)
    )
    observed_at = fields.AwareDateTime(
        default_timezone=UTC,
        load_default=None,
        metadata={"description": "when this inventory was true: between 2000-01-01 and one day from now"},
    )

    @validates_schema
    def _plausible_times(self, data: dict[str, Any], **_: Any) -> None:
        """observed_at and each host's booted_at within the crash-time bounds (registry.bounds):
        a year-9999 observation would date every attribute change after every crash. booted_at
        is checked here, not in HostSchema: a crash report's host carries it too, ignored, and
        a crash must not be refused for it."""
        now = datetime.now(UTC)
        problems: dict[str, Any] = {}
        if data.get("observed_at") and (problem := time_problem("observed_at", data["observed_at"], now)):
            problems["observed_at"] = [problem]
        for index, host in enumerate(data.get("hosts") or []):
            if host.get("booted_at") and (problem := time_problem("booted_at", host["booted_at"], now)):
                problems.setdefault("hosts", {})[index] = {"booted_at": [problem]}
        if problems:
            raise ValidationError(problems)


class HostsUpsertAnswerSchema(Schema):
    created = fields.Integer()
    updated = fields.Integer()
    unchanged = fields.Integer()
    attribute_changes = fields.Integer()


@blueprint.post("/hosts")
@require_scope("report", "admin")
@documented(
    "Upsert the fleet inventory (denominators of every rate)",
    request=HostsUpsertSchema,
    responses={200: HostsUpsertAnswerSchema},
    errors=(400, 401, 403, 422, 503),
    tag="inventory",
)
def post_hosts() -> Any:
    request.max_content_length = MAX_INVENTORY_BODY_BYTES  # 10,000+ hosts exceed the 2 MiB default
    body = load(HostsUpsertSchema(), json_body())
    with current_db().session() as session:
        outcome = upsert_hosts(session, body["hosts"], body["observed_at"])
    return jsonify(outcome.as_dict())
