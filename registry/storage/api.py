"""Dump uploads and downloads over HTTP, and the local store's own pre-signed endpoints."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from flask import Blueprint, current_app, g, jsonify, request, send_file
from flask.blueprints import BlueprintSetupState
from marshmallow import Schema, fields, validate

from registry.auth.tokens import require_scope
from registry.capture.savings import MAX_CAPTURE_BYTES
from registry.config import Settings
from registry.dump_encodings import ENCODINGS
from registry.errors import ApiError
from registry.openapi import documented
from registry.requests import WholeNumber, json_body, load
from registry.storage.local import OBJECTS_PREFIX, PARTS_PREFIX, LocalStore, SigningKeyUnsafe
from registry.storage.models import DUMP_STATES
from registry.storage.parts import MAX_PART_BYTES, MAX_PARTS
from registry.storage.service import (
    MAX_URLS_PER_REQUEST,
    capture_dump,
    complete_upload,
    download_link,
    dump_dict,
    start_upload,
    stored_dump,
)
from registry.storage.store import DumpStore, local_root, open_store
from registry.web import current_db, current_settings

blueprint = Blueprint("storage", __name__)
STORE = "crashreg.dump_store"
STORE_RETRY_AFTER_S = 30


@blueprint.app_errorhandler(BotoCoreError)
@blueprint.app_errorhandler(ClientError)
def _store_failed(error: Exception) -> Any:
    """The S3 store unreachable or failing (refused connection, its own 5xx, credentials it
    refuses): nothing changed here, so the reporter may retry; a 503 naming the store, not a
    500. For every route: the store keeps symbol files too."""
    current_app.logger.warning("dump store failed: %s", error)
    return ApiError(
        503,
        "unavailable",
        f"the dump store is unavailable ({type(error).__name__}); retry shortly",
        headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
    ).to_response()


@blueprint.app_errorhandler(SigningKeyUnsafe)
def _key_unsafe(error: SigningKeyUnsafe) -> Any:
    """The local store's key became readable by others while the registry ran: nothing is
    signed or accepted with it until an operator fixes it (a 503 the reporters retry)."""
    current_app.logger.error("%s", error)
    return ApiError(
        503, "unavailable", "the dump store's signing key is unsafe; an operator must rotate it",
        headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
    ).to_response()


@blueprint.record_once
def _open_store_at_start(state: BlueprintSetupState) -> None:
    """A local store opened with the app, so a registry whose signing key others can read
    refuses to start (registry.storage.local.SigningKey) instead of serving with it. (An S3
    store opens on first use: boto3 reads its endpoint and credentials then.)"""
    settings: Settings = state.app.extensions["crashreg.settings"]
    if local_root(settings.dump_store.url) is not None:
        state.app.extensions[STORE] = open_store(settings.dump_store, settings.public_url)


def current_store() -> DumpStore:
    """The app's dump store, opened on first use. A local store without a public endpoint
    signs URLs for the registry as this request reached it (a crash kernel and a booted
    host may know it by different addresses)."""
    if STORE not in current_app.extensions:
        settings = current_settings()
        current_app.extensions[STORE] = open_store(settings.dump_store, settings.public_url)
    store: DumpStore = current_app.extensions[STORE]
    if isinstance(store, LocalStore) and not current_settings().dump_store.public_endpoint:
        return store.at(request.host_url.rstrip("/"))
    return store


class UploadRequestSchema(Schema):
    bytes = WholeNumber(
        required=True,
        validate=validate.Range(min=0, max=MAX_CAPTURE_BYTES),
        metadata={"description": "the object's size as uploaded (after compression)"},
    )
    raw_bytes = WholeNumber(
        validate=validate.Range(min=0, max=MAX_CAPTURE_BYTES),
        allow_none=True,
        metadata={"description": "the dump file's size before the reporter compressed it"},
    )
    encoding = fields.String(load_default="identity", validate=validate.OneOf(tuple(ENCODINGS)))
    parts = fields.List(
        WholeNumber(validate=validate.Range(min=1, max=MAX_PARTS)),
        validate=validate.Length(max=MAX_URLS_PER_REQUEST),
        metadata={
            "description": "the part numbers to sign URLs for (default: the first "
            f"{MAX_URLS_PER_REQUEST}); a resumed upload asks for the missing ones"
        },
    )


class DumpSchema(Schema):
    id = fields.String()
    capture_id = fields.String()
    state = fields.String(
        validate=validate.OneOf(DUMP_STATES),
        metadata={"description": "uploading (parts still coming), stored (complete and verified: the "
                  "only state handed out), deleting (retention is removing it), deleted (gone from the "
                  "store; the row stays as history)"},
    )
    uri = fields.String()
    encoding = fields.String()
    bytes = fields.Integer()
    raw_bytes = fields.Integer(allow_none=True)
    part_size = fields.Integer()
    parts = fields.Integer()
    etag = fields.String(allow_none=True)
    created_at = fields.AwareDateTime()
    stored_at = fields.AwareDateTime(allow_none=True)
    deleted_at = fields.AwareDateTime(allow_none=True)


class PartUrlSchema(Schema):
    number = fields.Integer()
    bytes = fields.Integer(metadata={"description": "the part's exact length"})
    url = fields.String(metadata={"description": "PUT the part here (Content-MD5 recommended)"})


class UploadAnswerSchema(Schema):
    dump = fields.Nested(DumpSchema)
    upload_id = fields.String(allow_none=True)
    expires_at = fields.AwareDateTime(allow_none=True)
    part_urls = fields.List(fields.Nested(PartUrlSchema))


class PartDigestSchema(Schema):
    number = WholeNumber(required=True, validate=validate.Range(min=1, max=MAX_PARTS))
    md5 = fields.String(
        required=True,
        validate=validate.Regexp(r"^[0-9a-f]{32}$"),
        metadata={"description": "hex MD5 of the part as sent"},
    )


class CompleteSchema(Schema):
    parts = fields.List(
        fields.Nested(PartDigestSchema), required=True, validate=validate.Length(min=1, max=MAX_PARTS)
    )


class DownloadSchema(Schema):
    url = fields.String()
    expires_at = fields.AwareDateTime()
    filename = fields.String()
    dump = fields.Nested(DumpSchema)


@blueprint.post("/api/v1/captures/<id:capture_id>/upload")
@require_scope("report")
@documented(
    "Start or resume the upload of a capture's dump: pre-signed URLs for its parts (409 when the "
    "event's decision is skip)",
    request=UploadRequestSchema,
    responses={200: UploadAnswerSchema},
    errors=(400, 401, 403, 404, 409),
    tag="dumps",
)
def post_upload(capture_id: int) -> Any:
    values = load(UploadRequestSchema(), json_body())
    settings = current_settings().dump_store
    with current_db().session(bounded=True) as session:
        return jsonify(start_upload(session, current_store(), settings, capture_id, values))


@blueprint.post("/api/v1/captures/<id:capture_id>/upload/complete")
@require_scope("report")
@documented(
    "Complete a dump's upload: every part checked against its MD5 and length (409 names the parts to resend)",
    request=CompleteSchema,
    responses={200: DumpSchema},
    errors=(400, 401, 403, 404, 409),
    tag="dumps",
)
def post_complete(capture_id: int) -> Any:
    values = load(CompleteSchema(), json_body())
    md5s = {part["number"]: part["md5"] for part in values["parts"]}
    with current_db().session(bounded=True) as session:
        return jsonify(complete_upload(session, current_store(), capture_id, md5s))


@blueprint.get("/api/v1/captures/<id:capture_id>/dump")
@require_scope("read")
@documented(
    "A capture's dump in the store, in every state (uploading, stored, deleting, deleted: `state` "
    "says which); 404 `no_dump` with error.fields.state ['none'] when the capture has none",
    responses={200: DumpSchema},
    errors=(401, 403, 404),
    tag="dumps",
)
def get_dump(capture_id: int) -> Any:
    with current_db().session() as session:
        return jsonify(dump_dict(capture_dump(session, capture_id)))


@blueprint.get("/api/v1/captures/<id:capture_id>/download")
@require_scope("read")
@documented(
    "A short-lived download link to a capture's stored dump (audited: who, when, which object); "
    "409 `dump_not_stored` naming the dump's state in error.fields.state when it is not stored, "
    "404 `no_dump` when the capture has none",
    responses={200: DownloadSchema},
    errors=(401, 403, 404, 409),
    tag="dumps",
)
def get_download(capture_id: int) -> Any:
    ttl = current_settings().dump_store.download_ttl_s
    with current_db().session() as session:
        dump = stored_dump(session, capture_id)
        return jsonify(download_link(session, current_store(), ttl, dump, g.token.name, g.token.id, "api"))


# --- the local store's pre-signed endpoints (S3's part PUT and object GET) ------------------


def local_store() -> LocalStore:
    store = current_store()
    if not isinstance(store, LocalStore):
        raise ApiError(404, "not_found", "the dump store is not local: its URLs point at the store itself")
    store.check(request.method, request.path, request.args.to_dict())
    return store


@blueprint.put(f"{PARTS_PREFIX}/<upload_id>/parts/<int:number>")
def put_part(upload_id: str, number: int) -> Any:
    store = local_store()
    request.max_content_length = MAX_PART_BYTES  # a part is up to 5 GiB, streamed to disk, never held
    etag = store.receive_part(
        upload_id, number, request.stream, request.content_length, request.headers.get("Content-MD5")
    )
    response = current_app.response_class(status=200)
    response.headers["ETag"] = f'"{etag}"'
    return response


@blueprint.get(f"{OBJECTS_PREFIX}/<path:key>")
def get_object(key: str) -> Any:
    store = local_store()
    filename = request.args.get("filename") or key.rsplit("/", 1)[-1]
    return send_file(
        store.object_path(key),
        as_attachment=True,
        download_name=filename,
        conditional=True,
        mimetype="application/octet-stream",
    )
