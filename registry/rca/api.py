"""RCAs over HTTP: propose, list, read, review; and the triage bundle an agent works from."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify
from marshmallow import Schema, fields
from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.auth.tokens import require_scope
from registry.errors import ApiError
from registry.openapi import documented
from registry.rca.bundle import triage_bundle
from registry.rca.models import Rca
from registry.rca.schemas import RcaCreateSchema, RcaListSchema, RcaSchema, ReviewSchema
from registry.rca.service import RcaView, propose, rca_dict, review, reviews_of, signature_rcas
from registry.requests import json_body, load
from registry.signatures.service import signature_or_404
from registry.storage.api import current_store
from registry.storage.service import link_maker
from registry.web import current_db, current_settings

blueprint = Blueprint("rca", __name__, url_prefix="/api/v1")


class TriageBundleSchema(Schema):
    signature = fields.Dict()
    facts = fields.Dict()
    events = fields.List(fields.Dict())
    debuginfo = fields.List(fields.Dict())
    dumps = fields.List(fields.Dict(), metadata={
        "description": "the sampled events' completed dumps as the triage workspace lays them out "
                       "(dump and vmlinux paths, the drgn command, a short-lived download_url when the "
                       "dump store holds it)"})
    rcas = fields.List(fields.Dict())
    jira = fields.Dict(allow_none=True)
    similar_signatures = fields.List(fields.Dict())
    epidemiology = fields.Dict()
    evidence_format = fields.Dict()
    agents_md = fields.String()
    generated_at = fields.AwareDateTime()
    registry_url = fields.String()
    budget = fields.Dict(metadata={"description": "what an agent may spend on this bundle"})
    debuginfod = fields.Dict(metadata={
        "description": "the registry's debuginfod for userspace symbols by build-id: `urls` "
                       "(DEBUGINFOD_URLS) and `headers_file` (DEBUGINFOD_HEADERS_FILE, written by setup.sh "
                       "from $CRASHREG_TOKEN)"})


def rca_or_404(session: Session, rca_id: int, lock: bool = False) -> Rca:
    query = select(Rca).where(Rca.id == rca_id)
    rca = session.scalars(query.with_for_update() if lock else query).one_or_none()
    if rca is None:
        raise ApiError(404, "not_found", f"no RCA {rca_id}")
    return rca


def one_rca(session: Session, rca: Rca) -> RcaView:
    return rca_dict(rca, reviews_of(session, [rca.id])[rca.id])


@blueprint.post("/signatures/<key>/rcas")
@require_scope("triage")
@documented(
    "Propose an RCA; its evidence is checked against the registry and the results stored (409 when "
    "a dump it cites is being deleted by retention)",
    request=RcaCreateSchema,
    responses={201: RcaSchema},
    errors=(400, 401, 403, 404, 409),
    tag="rcas",
)
def post_rca(key: str) -> Any:
    data = load(RcaCreateSchema(), json_body())
    with current_db().session() as session:
        signature = signature_or_404(session, key)
        rca = propose(session, signature, data, g.token, current_settings().public_url)
        return jsonify(one_rca(session, rca)), 201


@blueprint.get("/signatures/<key>/rcas")
@require_scope("read")
@documented(
    "A signature's RCAs with their checks and reviews, newest first",
    responses={200: RcaListSchema},
    errors=(401, 403, 404),
    tag="rcas",
)
def list_rcas(key: str) -> Any:
    with current_db().session() as session:
        return jsonify({"rcas": signature_rcas(session, signature_or_404(session, key))})


@blueprint.get("/rcas/<id:rca_id>")
@require_scope("read")
@documented(
    "One RCA with its checks and reviews", responses={200: RcaSchema}, errors=(401, 403, 404), tag="rcas"
)
def get_rca(rca_id: int) -> Any:
    with current_db().session() as session:
        return jsonify(one_rca(session, rca_or_404(session, rca_id)))


@blueprint.post("/rcas/<id:rca_id>/review")
@require_scope("triage")
@documented(
    "Confirm or reject a proposed RCA (humans only, never the author); confirming supersedes "
    "the signature's confirmed RCA and sets its fixed_in_kernel",
    request=ReviewSchema,
    responses={200: RcaSchema},
    errors=(400, 401, 403, 404, 409),
    tag="rcas",
)
def review_rca(rca_id: int) -> Any:
    data = load(ReviewSchema(), json_body())
    with current_db().session() as session:
        rca = rca_or_404(session, rca_id, lock=True)
        review(session, rca, data, g.token, current_settings().public_url)
        return jsonify(one_rca(session, rca))


@blueprint.get("/signatures/<key>/triage-bundle")
@require_scope("read")
@documented(
    "Everything an agent needs to work one signature, with AGENTS.md (rules and evidence format)",
    responses={200: TriageBundleSchema},
    errors=(401, 403, 404),
    tag="rcas",
)
def get_triage_bundle(key: str) -> Any:
    with current_db().session() as session:
        signature = signature_or_404(session, key)
        settings = current_settings()
        link = link_maker(session, current_store(), settings.dump_store.download_ttl_s, g.token.name,
                          g.token.id, "bundle")
        return jsonify(triage_bundle(session, signature, settings.public_url,
                                     settings.epidemiology_program_label, link))
