"""HTTP: a signature's epidemiology and the fleet-wide suspect hosts (scope read)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from marshmallow import Schema, fields, validate
from sqlalchemy import func, select

from registry.auth.tokens import require_scope
from registry.core.schemas import SignatureSummarySchema
from registry.openapi import documented
from registry.requests import WholeNumber, load_query
from registry.signatures.service import signature_or_404
from registry.web import current_reads, current_settings, replica_fallback

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
    baseline = fields.String(
        metadata={"description": "fleet (host-time) | crashes (case-control) | exposure (start date)"}
    )


class TimeFindingSchema(FindingSchema):
    attribute = fields.String(metadata={"description": "uptime | start_date"})
    statement = fields.String()


class ComponentSchema(Schema):
    kind = fields.String(metadata={"description": "concentrated | spread"})
    attribute = fields.String(metadata={"description": "physical_host | hostname | cluster (concentrated)"})
    value = fields.String()
    events = fields.Integer()
    share = fields.Float()
    expected_events = fields.Float(metadata={"description": "what the spread part predicts for it"})
    lift = fields.Float(metadata={"description": "concentrated: events over the spread part's prediction"})
    p_value = fields.Float()
    log10_p = fields.Float()
    baseline = fields.String(metadata={"description": "concentrated: what it is compared with"})
    hosts = fields.Integer()
    hostnames = fields.List(fields.String(), metadata={"description": "concentrated: its first 20 hosts"})
    first_seen = fields.String(allow_none=True)
    last_seen = fields.String(allow_none=True)
    since = fields.String(allow_none=True)
    onset = fields.Nested(lambda: OnsetSchema(), metadata={"description": "concentrated: when it began"})
    verdict = fields.String(metadata={"description": "the spread part's verdict"})
    reason = fields.String(metadata={"description": "spread: why that verdict"})
    findings = fields.List(fields.Nested(FindingSchema), metadata={"description": "spread: the strongest 5"})
    uptime = fields.Dict()
    statement = fields.String()


class PopulationSchema(Schema):
    kind = fields.String(metadata={"description": "fleet | program"})
    program = fields.String(allow_none=True)
    hosts = fields.Integer(allow_none=True)
    source = fields.String(metadata={"description": "how the program's hosts are known"})


class OnsetSchema(Schema):
    first_seen = fields.String(allow_none=True)
    change_point = fields.String(allow_none=True)
    shape = fields.String(metadata={"description": "clear start | slow rise | step up | ..."})
    lined_up = fields.List(fields.Dict(), metadata={"description": "inventory changes that day"})
    rate_before = fields.Float(allow_none=True, metadata={"description": "crashes per 1000 hosts a day"})
    rate_after = fields.Float(allow_none=True)


class EpidemiologySchema(Schema):
    signature = fields.Nested(SignatureSummarySchema)
    events = fields.Integer()
    hosts = fields.Integer()
    verdict = fields.String(
        metadata={"description": "single-host | hardware-config | software | inconclusive"}
    )
    verdict_detail = fields.Dict()
    baseline = fields.String(
        metadata={
            "description": "fleet | crashes | fleet+crashes (changing values case-control): what decided"
        }
    )
    population = fields.Nested(PopulationSchema)
    findings = fields.List(fields.Nested(FindingSchema), metadata={"description": "strongest first"})
    components = fields.List(
        fields.Nested(ComponentSchema),
        metadata={"description": "a mixture: its concentrated parts, then the spread part (else empty)"},
    )
    time_findings = fields.List(fields.Nested(TimeFindingSchema))
    statements = fields.List(fields.String(), metadata={"description": "the analysis in sentences"})
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
            "description": "the case-control view (a scan of the window's events): live = computed now, "
            "stored = from the last refresh, auto = stored when there is one"
        },
    )


class SuspectsQuery(Schema):
    limit = WholeNumber(load_default=20, validate=validate.Range(min=1, max=200))


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
@replica_fallback
def get_signature_epidemiology(key: str) -> Any:
    """The main view (fleet inventory where known) is always computed now; the case-control
    view comes from the last refresh unless asked for live."""
    args = load_query(EpidemiologyQuery())
    with current_reads() as session:
        signature = signature_or_404(session, key)
        stored = session.get(EpidemiologyVerdict, signature.id)
        stored_view = stored.analysis.get("views", {}).get("crashes") if stored else None
        live = args["crash_view"] == "live" or (args["crash_view"] == "auto" and stored_view is None)
        label = current_settings().epidemiology_program_label
        body = signature_epidemiology(session, signature, crash_view=live, program_label=label)
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
@replica_fallback
def get_suspect_hosts() -> Any:
    args = load_query(SuspectsQuery())
    with current_reads() as session:
        ranked = suspects(session, args["limit"])
        stored_at = session.scalar(select(func.max(EpidemiologySuspectHost.computed_at)))
    return jsonify({"hosts": ranked, "stored_at": stored_at.isoformat() if stored_at else None})
