"""HTTP: a signature's epidemiology and the fleet-wide suspect hosts (scope read)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from marshmallow import Schema, fields, validate
from sqlalchemy import func, select

from registry.auth.tokens import require_scope
from registry.openapi import documented
from registry.requests import load_query
from registry.signatures.api import SignatureSchema, signature_or_404
from registry.web import current_db

from .models import EpidemiologySuspectHost, EpidemiologyVerdict
from .service import signature_epidemiology, suspects

blueprint = Blueprint("epidemiology", __name__, url_prefix="/api/v1")


class FindingSchema(Schema):
    attribute = fields.String()
    value = fields.String()
    in_signature = fields.Float()
    overall = fields.Float()
    lift = fields.Float()
    p_value = fields.Float()
    log10_p = fields.Float()
    events = fields.Integer()
    explained_by = fields.String(allow_none=True)


class OnsetSchema(Schema):
    first_seen = fields.String(allow_none=True)
    change_point = fields.String(allow_none=True)
    shape = fields.String(metadata={"description": "clear start | slow rise | step up | ..."})
    lined_up = fields.List(fields.Dict(), metadata={"description": "inventory changes that day"})
    rate_before = fields.Float(allow_none=True, metadata={"description": "crashes per 1000 hosts a day"})
    rate_after = fields.Float(allow_none=True)


class EpidemiologySchema(Schema):
    signature = fields.Nested(SignatureSchema)
    events = fields.Integer()
    hosts = fields.Integer()
    verdict = fields.String(
        metadata={"description": "single-host | hardware-config | software | inconclusive"}
    )
    verdict_detail = fields.Dict()
    baseline = fields.String(metadata={"description": "fleet | crashes: the baseline that decided"})
    findings = fields.List(fields.Nested(FindingSchema), metadata={"description": "strongest first"})
    explained = fields.List(fields.Nested(FindingSchema))
    views = fields.Dict(metadata={"description": "the same analysis against other baselines"})
    onset = fields.Nested(OnsetSchema)
    uptime = fields.Dict()
    stored_at = fields.String(allow_none=True, metadata={"description": "when the stored view was computed"})


class EpidemiologyQuery(Schema):
    crash_view = fields.String(
        load_default="auto",
        validate=validate.OneOf(["auto", "live", "stored"]),
        metadata={
            "description": "the all-crashes view (a full scan of the events): live = computed now, "
            "stored = from the last refresh, auto = stored when there is one"
        },
    )


class SuspectsQuery(Schema):
    limit = fields.Integer(load_default=20, validate=validate.Range(min=1, max=200))


class SuspectsSchema(Schema):
    hosts = fields.List(fields.Dict())
    stored_at = fields.String(allow_none=True)


@blueprint.get("/signatures/<key>/epidemiology")
@require_scope("read")
@documented(
    "Which hosts, firmware or software a signature concentrates on; verdict, onset, uptime",
    query=EpidemiologyQuery,
    responses={200: EpidemiologySchema},
    errors=(400, 401, 403, 404),
    tag="epidemiology",
)
def get_signature_epidemiology(key: str) -> Any:
    """The main view (fleet inventory where known) is always computed now; the all-crashes
    view comes from the last refresh unless asked for live."""
    args = load_query(EpidemiologyQuery())
    with current_db().session() as session:
        signature = signature_or_404(session, key)
        stored = session.get(EpidemiologyVerdict, signature.id)
        stored_view = stored.analysis.get("views", {}).get("crashes") if stored else None
        live = args["crash_view"] == "live" or (args["crash_view"] == "auto" and stored_view is None)
        body = signature_epidemiology(session, signature, crash_view=live)
    if not live and stored_view is not None and body.get("baseline") != "crashes":
        body.setdefault("views", {})["crashes"] = stored_view | {"stored_at": stored.computed_at.isoformat()}
    body["stored_at"] = stored.computed_at.isoformat() if stored else None
    return jsonify(body)


@blueprint.get("/epidemiology/hosts")
@require_scope("read")
@documented(
    "Fleet-wide suspect hosts: crashes improbable across signatures, ranked, with evidence",
    query=SuspectsQuery,
    responses={200: SuspectsSchema},
    errors=(400, 401, 403),
    tag="epidemiology",
)
def get_suspect_hosts() -> Any:
    args = load_query(SuspectsQuery())
    with current_db().session() as session:
        ranked = suspects(session, args["limit"])
        stored_at = session.scalar(select(func.max(EpidemiologySuspectHost.computed_at)))
    return jsonify({"hosts": ranked, "stored_at": stored_at.isoformat() if stored_at else None})
