"""The symbol store over HTTP: uploads for build pipelines (scope `symbols`), what a build-id
holds (scope `read`), and the debuginfod protocol at /debuginfod/ (scope `read`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, send_file
from marshmallow import Schema, ValidationError, fields, validate

from registry.auth.tokens import require_scope
from registry.build_ids import BUILD_ID, normal_build_id
from registry.errors import ApiError
from registry.openapi import documented
from registry.requests import JsonBoolean, WholeNumber, json_body, load
from registry.storage.api import PartUrlSchema, current_store
from registry.storage.parts import MAX_PARTS
from registry.storage.service import MAX_URLS_PER_REQUEST
from registry.symbols.elf import KINDS, section_extent
from registry.symbols.keep import Origin
from registry.symbols.sources import StillFetching, SymbolsArrived, SymbolSources
from registry.symbols.uploads import complete, files_of, start
from registry.web import current_db, current_settings

blueprint = Blueprint("symbols", __name__)
SOURCES = "crashreg.symbol_sources"
UPLOAD_SCOPES = ("symbols",)  # admin implies every scope


def current_sources() -> SymbolSources:
    """The app's symbol sources, made on first use (their negative cache and fetches are the
    process's)."""
    if SOURCES not in current_app.extensions:
        current_app.extensions[SOURCES] = SymbolSources(current_settings(), current_db())
    sources: SymbolSources = current_app.extensions[SOURCES]
    return sources


def build_id_in_path(text: str) -> str:
    """The path's build-id; a path that names none is a 404 (there is nothing at it) saying why."""
    build_id = normal_build_id(text)
    if build_id is None:
        raise ApiError(404, "not_found", f"no build-id {text[:140]!r}: a build-id is an even number of 2 "
                       "to 128 hex digits", fields={"build_id": [text[:140]]})
    return build_id


def caller_origin() -> Origin:
    return Origin("upload", g.token.name, g.token.id)


def _a_build_id(text: str) -> None:
    if normal_build_id(text) is None:
        raise ValidationError("not a build-id: an even number of 2 to 128 hex digits")


class SymbolUploadRequestSchema(Schema):
    build_id = fields.String(required=True, validate=_a_build_id,
                             metadata={"description": "the file's GNU build-id in hex (checked against its "
                                                      "ELF note)", "pattern": f"^{BUILD_ID.pattern}$"})
    bytes = WholeNumber(required=True, validate=validate.Range(min=1, max=1 << 40),
                        metadata={"description": "the file's size (the registry's limit: "
                                                 "CRASHREG_SYMBOL_MAX_FILE_MB)"})
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"),
                           metadata={"description": "hex SHA-256 of the whole file"})
    parts = fields.List(WholeNumber(validate=validate.Range(min=1, max=MAX_PARTS)),
                        validate=validate.Length(max=MAX_URLS_PER_REQUEST),
                        metadata={"description": "the part numbers to sign URLs for (default: the first "
                                                 f"{MAX_URLS_PER_REQUEST}); a resumed upload asks for the "
                                                 "missing ones"})
    kinds = fields.List(
        fields.String(validate=validate.OneOf(KINDS)), validate=validate.Length(max=len(KINDS)),
        metadata={"description": "what the file would bring, as the client read it from its sections "
                                 "(debuginfo, executable): when the build-id holds every one, the answer "
                                 "is `stored` and nothing is sent (another file of the same build is not "
                                 "sent in vain)"})
    lines = JsonBoolean(
        metadata={"description": "the file has DWARF (source lines), as the client read it: a build-id whose "
                                 "debuginfo is a symbol table alone takes it in its place, even when it "
                                 "holds every kind declared"})


class SymbolFileSchema(Schema):
    build_id = fields.String()
    kind = fields.String(metadata={"description": "debuginfo | executable"})
    bytes = fields.Integer()
    sha256 = fields.String()
    source = fields.String(metadata={"description": "upload | debuginfod"})
    origin = fields.String(metadata={"description": "the uploading token's name, or the server"})
    stored_at = fields.AwareDateTime()
    lines = fields.Boolean(allow_none=True, metadata={
        "description": "the file has DWARF (source lines), not a symbol table alone (null: stored before "
                       "the registry noted it)"})
    replaced_sha256 = fields.String(allow_none=True, metadata={
        "description": "the file this one replaced for its kind (a symbol table gave way to DWARF)"})


class SymbolUploadSchema(Schema):
    id = fields.String()
    build_id = fields.String()
    bytes = fields.Integer()
    sha256 = fields.String()
    part_size = fields.Integer()
    parts = fields.Integer()
    created_at = fields.AwareDateTime()


class StoredPartSchema(Schema):
    number = fields.Integer()
    bytes = fields.Integer()
    md5 = fields.String(allow_none=True,
                        metadata={"description": "hex MD5 (null: the store's ETag is not one)"})


class SymbolUploadAnswerSchema(Schema):
    build_id = fields.String()
    state = fields.String(metadata={"description": "uploading | stored (this file is held: send nothing)"})
    upload = fields.Nested(SymbolUploadSchema, allow_none=True)
    expires_at = fields.AwareDateTime(allow_none=True)
    part_urls = fields.List(fields.Nested(PartUrlSchema))
    stored_parts = fields.List(fields.Nested(StoredPartSchema), metadata={
        "description": "a rejoined upload's parts the store holds already: send only the others"})
    files = fields.List(fields.Nested(SymbolFileSchema), metadata={"description": "what the build-id holds"})
    new_kinds = fields.List(fields.String(), metadata={"description": "the kinds this upload brought"})


class SymbolPartSchema(Schema):
    number = WholeNumber(required=True, validate=validate.Range(min=1, max=MAX_PARTS))
    md5 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{32}$"),
                        metadata={"description": "hex MD5 of the part as sent"})


class SymbolCompleteSchema(Schema):
    parts = fields.List(fields.Nested(SymbolPartSchema), required=True,
                        validate=validate.Length(min=1, max=MAX_PARTS))


class SymbolFilesSchema(Schema):
    build_id = fields.String()
    files = fields.List(fields.Nested(SymbolFileSchema))


@blueprint.post("/api/v1/symbols/uploads")
@require_scope(*UPLOAD_SCOPES)
@documented(
    "Start or resume the upload of a symbol file (debug info or an executable, by build-id): "
    "pre-signed URLs for its parts, or `stored` when the registry holds this file already",
    request=SymbolUploadRequestSchema,
    responses={200: SymbolUploadAnswerSchema},
    errors=(400, 401, 403, 409),
    tag="symbols",
)
def post_symbol_upload() -> Any:
    values = load(SymbolUploadRequestSchema(), json_body())
    values["build_id"] = normal_build_id(values["build_id"])
    settings = current_settings()
    limit = settings.symbols.max_file_bytes
    if values["bytes"] > limit:
        raise ApiError(400, "too_large", f"a symbol file is at most {limit} bytes here",
                       fields={"bytes": [f"more than this registry's limit of {limit} bytes "
                                         "(CRASHREG_SYMBOL_MAX_FILE_MB)"]})
    with current_db().session() as session:
        return jsonify(start(session, current_store(), settings, values, caller_origin()))


@blueprint.post("/api/v1/symbols/uploads/<id:upload_id>/complete")
@require_scope(*UPLOAD_SCOPES)
@documented(
    "Complete a symbol file's upload: its parts checked, then the file's SHA-256 and its own ELF "
    "build-id note (422 names the problem, and the file is dropped)",
    request=SymbolCompleteSchema,
    responses={200: SymbolUploadAnswerSchema},
    errors=(400, 401, 403, 404, 409, 422),
    tag="symbols",
)
def post_symbol_complete(upload_id: int) -> Any:
    values = load(SymbolCompleteSchema(), json_body())
    md5s = {part["number"]: part["md5"] for part in values["parts"]}
    sources = current_sources()
    answer = complete(current_db(), current_store(), upload_id, md5s, caller_origin())
    sources.arrived(SymbolsArrived(answer["build_id"], tuple(answer["new_kinds"]), "upload"))
    return jsonify(answer)


@blueprint.get("/api/v1/symbols/<build_id>")
@require_scope("read", *UPLOAD_SCOPES)
@documented("The symbol files the registry holds for a build-id", responses={200: SymbolFilesSchema},
            errors=(401, 403, 404), tag="symbols")
def get_symbol_files(build_id: str) -> Any:
    build_id = build_id_in_path(build_id)
    with current_db().session() as session:
        return jsonify({"build_id": build_id, "files": files_of(session, build_id)})


# --- debuginfod (elfutils' protocol; DEBUGINFOD_URLS=<public URL>/debuginfod/) ---------------


FETCHING_RETRY_AFTER_S = 10


@blueprint.errorhandler(StillFetching)
def _still_fetching(error: StillFetching) -> Any:
    return ApiError(503, "unavailable", str(error),
                    headers={"Retry-After": str(FETCHING_RETRY_AFTER_S)}).to_response()


def _served(path: Any, artifact: str) -> Any:
    if path is None:
        raise ApiError(404, "not_found", f"no {artifact} for this build-id here or on the configured servers")
    response = send_file(path, mimetype="application/octet-stream", conditional=True)
    response.headers["X-DEBUGINFOD-SIZE"] = str(path.stat().st_size)
    return response


A_FILE = {200: {"application/octet-stream": {"type": "string", "format": "binary"}}}


@blueprint.get("/debuginfod/buildid/<build_id>/<any(debuginfo, executable):kind>")
@require_scope("read", *UPLOAD_SCOPES)
@documented("debuginfod: a build-id's debug info or executable, from the store or the configured servers "
            "(DEBUGINFOD_URLS=<registry>/debuginfod/); 503 with Retry-After while a server is still sending "
            "it", responses=A_FILE, errors=(400, 401, 403, 404, 503),
            tag="symbols")
def debuginfod_artifact(build_id: str, kind: str) -> Any:
    return _served(current_sources().find_for_request(build_id_in_path(build_id), kind), kind)


@blueprint.get("/debuginfod/buildid/<build_id>/source/<path:source>")
@require_scope("read", *UPLOAD_SCOPES)
@documented("debuginfod: a source file of a build-id, from the configured servers", responses=A_FILE,
            errors=(400, 401, 403, 404, 503), tag="symbols")
def debuginfod_source(build_id: str, source: str) -> Any:
    build_id = build_id_in_path(build_id)
    try:
        found = current_sources().source_file(build_id, source)
    except ValueError as problem:
        raise ApiError(400, "bad_request", str(problem), fields={"path": [source[:200]]}) from None
    return _served(found, "source file")


SECTION_CHUNK = 1 << 20


@blueprint.get("/debuginfod/buildid/<build_id>/section/<path:section>")
@require_scope("read", *UPLOAD_SCOPES)
@documented("debuginfod: the raw contents of an ELF section of a build-id (e.g. .gdb_index, which gdb "
            "fetches alone): from its debug info, else, where that has none or only SHT_NOBITS, from its "
            "executable; from the store or the configured servers", responses=A_FILE,
            errors=(400, 401, 403, 404, 503), tag="symbols")
def debuginfod_section(build_id: str, section: str) -> Any:
    build_id = build_id_in_path(build_id)
    for kind in KINDS:
        path = current_sources().find_for_request(build_id, kind)
        if path is not None and (extent := section_extent(path, section)) is not None:
            return _slice_served(path, *extent)
    raise ApiError(404, "not_found", f"no section {section[:200]!r} with contents in this build-id's debug "
                   "info or executable here or on the configured servers",
                   fields={"section": [section[:200]]})


def _slice_served(path: Path, offset: int, size: int) -> Response:
    """`size` bytes of the file from `offset`, streamed: a section of a large debug file is
    never held in memory. The file is opened before the answer, so the cache's eviction
    (which unlinks) cannot take it from under the stream."""
    file = path.open("rb")

    def chunks() -> Any:
        with file:
            file.seek(offset)
            left = size
            while left and (chunk := file.read(min(left, SECTION_CHUNK))):
                left -= len(chunk)
                yield chunk

    response = Response(chunks(), mimetype="application/octet-stream", direct_passthrough=True)
    response.headers["Content-Length"] = str(size)
    response.headers["X-DEBUGINFOD-SIZE"] = str(size)
    return response
