"""Manual merge and unmerge of signatures (triage), stored as alias rules.

`POST /api/v1/signatures/{id}/merge` with `{"other": <id or fingerprint>}` folds the other
signature into this one: its fingerprint becomes an alias of this signature, so its future
events land here and both fingerprints answer `GET /signatures/{fingerprint}`; its events and
counts move here. `POST /api/v1/signatures/{id}/unmerge` with the same body undoes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, g, jsonify
from marshmallow import Schema, fields, validate
from sqlalchemy import select

from registry.auth.tokens import human_decision, require_scope
from registry.core.signatures import Signature
from registry.core.wiring import app_listeners
from registry.errors import ApiError
from registry.ids import parse_id
from registry.openapi import documented
from registry.outbox import publish
from registry.requests import json_body, load
from registry.signatures.api import SignatureSchema
from registry.signatures.merging import merge, unmerge
from registry.signatures.service import detail, find_signature, signature_or_404
from registry.web import current_db

blueprint = Blueprint("signature_merges", __name__, url_prefix="/api/v1")


class MergeSchema(Schema):
    other = fields.String(
        required=True,
        validate=validate.Length(min=1, max=64),
        metadata={"description": "id or fingerprint of the other signature"},
    )


def _other(session: Any, key: str, *, follow_merges: bool) -> Signature:
    """The signature named by `other`: for an unmerge, the merged row itself, not its survivor."""
    if follow_merges:
        other = find_signature(session, key)
    else:
        other_id = parse_id(key)
        other = session.get(Signature, other_id) if other_id is not None else None
        other = other or session.scalar(select(Signature).where(Signature.fingerprint == key))
    if other is None:
        raise ApiError(404, "not_found", f"no signature with id or fingerprint {key!r}",
                       fields={"other": ["unknown signature"]})
    return other


def _change(key: str, change: Callable[[Any, Signature, Signature], None], *,
            follow_merges: bool, topic: str, listed_as: str) -> Any:
    body = load(MergeSchema(), json_body())
    with current_db().session() as session:
        survivor = signature_or_404(session, key)
        other = _other(session, body["other"], follow_merges=follow_merges)
        change(session, survivor, other)
        publish(session, topic, survivor.id, other=other.id, by=g.token.name)
        return jsonify(detail(session, survivor) | {listed_as: [str(other.id)]})


@blueprint.post("/signatures/<key>/merge")
@require_scope("triage")
@human_decision("merge signatures")
@documented(
    "Merge another signature into this one (an alias rule: its future events land here)",
    request=MergeSchema,
    responses={200: SignatureSchema},
    errors=(400, 401, 403, 404, 409),
    tag="signatures",
)
def merge_signature(key: str) -> Any:
    return _change(key, lambda session, survivor, other: merge(session, survivor, other,
                                                               g.token.name, app_listeners()),
                   follow_merges=True, topic="signature.merged", listed_as="merged")


@blueprint.post("/signatures/<key>/unmerge")
@require_scope("triage")
@human_decision("undo a merge")
@documented(
    "Undo a merge: the other signature and its events stand alone again",
    request=MergeSchema,
    responses={200: SignatureSchema},
    errors=(400, 401, 403, 404, 409),
    tag="signatures",
)
def unmerge_signature(key: str) -> Any:
    # the merged row itself, not the survivor its fingerprint now resolves to
    return _change(key, lambda session, survivor, other: unmerge(session, survivor, other,
                                                                 app_listeners()),
                   follow_merges=False, topic="signature.unmerged", listed_as="unmerged")
