"""Symbol uploads from build pipelines: in parts through pre-signed URLs, resumable, checked.

The same protocol as a dump's (registry/storage/service.py): the pipeline declares the file's
build-id, size and SHA-256 (and may declare its kinds and whether it has source lines); a
build-id already holding that very file, or all it declares, answers `stored` and no byte
moves. Otherwise the registry opens a multipart upload in the store and signs URLs for
the parts; asking again (after a failure) rejoins the same upload. Completion checks the parts,
then reads the stored object: its SHA-256 must be the declared one and its own ELF build-id
note the declared build-id, or the object is deleted and the answer (422) names the problem.
"""

from __future__ import annotations

import secrets
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any, TypedDict

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from registry.config import Settings
from registry.db import Database, utcnow
from registry.errors import ApiError
from registry.storage.parts import MD5_HEX, MIB, StoredPart, UploadGone, clean_etag, part_count, part_size
from registry.storage.service import PartUrl, joined_parts, signed_part_urls
from registry.storage.store import DumpStore
from registry.symbols.elf import NotASymbolFile
from registry.symbols.keep import (
    Origin,
    SymbolFileView,
    checked_facts,
    drop_unused,
    file_dict,
    held,
    improves_debuginfo,
    lost_kinds,
    object_key,
    record,
    sha256_of,
)
from registry.symbols.models import SymbolFile, SymbolUpload
from registry.upsert import insert_ignore


class UploadView(TypedDict):
    id: str
    build_id: str
    bytes: int
    sha256: str
    part_size: int
    parts: int
    created_at: str


class StoredPartView(TypedDict):
    number: int
    bytes: int
    md5: str | None  # None: the store's ETag is not an MD5 (SSE-KMS)


class SymbolUploadAnswer(TypedDict):
    build_id: str
    state: str  # uploading | stored
    upload: UploadView | None
    expires_at: str | None
    part_urls: list[PartUrl]
    stored_parts: list[StoredPartView]  # a rejoined upload's parts the store holds already
    files: list[SymbolFileView]
    new_kinds: list[str]


def upload_dict(upload: SymbolUpload) -> UploadView:
    return {"id": str(upload.id), "build_id": upload.build_id, "bytes": upload.bytes, "sha256": upload.sha256,
            "part_size": upload.part_size, "parts": part_count(upload.bytes, upload.part_size),
            "created_at": upload.created_at.isoformat()}


def stored_part(part: StoredPart) -> StoredPartView:
    etag = clean_etag(part.etag)
    return {"number": part.number, "bytes": part.bytes, "md5": etag if MD5_HEX.fullmatch(etag) else None}


def stored_answer(session: Session, build_id: str, new_kinds: tuple[str, ...] = (),
                  holding: dict[str, SymbolFile] | None = None) -> SymbolUploadAnswer:
    """`holding`: the build-id's files as the caller read them already (else read here)."""
    files = [file_dict(row) for row in (holding if holding is not None else held(session, build_id)).values()]
    return {"build_id": build_id, "state": "stored", "upload": None, "expires_at": None, "part_urls": [],
            "stored_parts": [], "files": files, "new_kinds": list(new_kinds)}


def start(session: Session, store: DumpStore, settings: Settings, request: dict[str, Any],
          origin: Origin) -> SymbolUploadAnswer:
    """Open (or rejoin) the upload of one symbol file; URLs for the parts asked for."""
    build_id, total, sha256 = request["build_id"], request["bytes"], request["sha256"]
    holding = held(session, build_id)  # read once: the answer lists the same files
    lost = lost_kinds(store, holding, serving=True)
    kept = set(holding) - lost
    declared_enough = request.get("kinds") and set(request["kinds"]) <= kept and not improves_debuginfo(
        holding, bool(request.get("lines")))
    if any(row.sha256 == sha256 for kind, row in holding.items() if kind in kept) or declared_enough:
        return stored_answer(session, build_id, holding=holding)
    same_file = (SymbolUpload.build_id == build_id, SymbolUpload.sha256 == sha256)
    upload = session.scalar(select(SymbolUpload).where(*same_file))
    rejoined = upload is not None
    if upload is None:
        key = f"{object_key(build_id, sha256)}.{secrets.token_hex(4)}"
        upload_id = store.create_upload(key)
        row = {"build_id": build_id, "sha256": sha256, "key": key, "upload_id": upload_id, "bytes": total,
               "part_size": part_size(total, settings.dump_store.part_size_mb * MIB),
               "token_id": origin.token_id, "origin": origin.name[:255], "created_at": utcnow()}
        if insert_ignore(session, SymbolUpload, row, ["build_id", "sha256"]) is None:
            store.abort_upload(key, upload_id)  # a concurrent request opened it first
        upload = session.scalar(select(SymbolUpload).where(*same_file))
        assert upload is not None
    elif not store.upload_exists(upload.key, upload.upload_id):  # expired by the bucket's lifecycle
        upload.upload_id = store.create_upload(upload.key)
        rejoined = False
    if upload.bytes != total:
        raise ApiError(409, "conflict", f"this file's open upload is of {upload.bytes} bytes, not {total}",
                       fields={"bytes": [f"the open upload has {upload.bytes}"]})
    ttl = settings.dump_store.upload_ttl_s
    urls = signed_part_urls(store, upload.key, upload.upload_id, upload.bytes, upload.part_size,
                            request.get("parts"), ttl)
    stored = store.list_parts(upload.key, upload.upload_id) if rejoined else []
    return {"build_id": build_id, "state": "uploading", "upload": upload_dict(upload),
            "expires_at": (utcnow() + timedelta(seconds=ttl)).isoformat(), "part_urls": urls,
            "stored_parts": [stored_part(part) for part in sorted(stored, key=lambda part: part.number)],
            "files": [file_dict(row) for row in holding.values()], "new_kinds": []}


def complete(database: Database, store: DumpStore, upload_id: int, md5s: dict[int, str],
             origin: Origin) -> SymbolUploadAnswer:
    """Check the parts, complete the object, check the file; record it for the kinds its
    build-id lacked (an object that brings nothing is deleted). The upload's row goes with the
    recording: a completion interrupted after the store joined the parts is finished by the
    next request to complete it."""
    with database.session() as session:
        upload = session.get(SymbolUpload, upload_id)
        if upload is None:
            raise ApiError(404, "not_found",
                           f"no open symbol upload {upload_id}: completed, or never started")
        key, build_id, sha256, total = upload.key, upload.build_id, upload.sha256, upload.bytes
        try:
            joined_parts(store, key, upload.upload_id, total, upload.part_size, md5s)
        except UploadGone:
            if store.head(key) is None:  # else a completion whose answer was lost went through
                raise ApiError(409, "parts_incomplete",
                               "the store no longer has this upload (aborted or expired): start it again, "
                               "every part goes again") from None
    return _checked_and_recorded(database, store, upload_id, key, build_id, sha256, origin)


def _checked_and_recorded(database: Database, store: DumpStore, upload_id: int, key: str, build_id: str,
                          sha256: str, origin: Origin) -> SymbolUploadAnswer:
    closed = delete(SymbolUpload).where(SymbolUpload.id == upload_id)
    with tempfile.TemporaryDirectory(prefix="crashreg-symbol-") as folder:
        local = store.local_path(key)
        if local is None:
            local = Path(folder) / "file"
            store.fetch_file(key, local)
        try:
            actual = sha256_of(local)
            if actual != sha256:
                raise NotASymbolFile("sha256_mismatch",
                                     f"the stored file's SHA-256 is {actual}, not the declared {sha256}")
            facts = checked_facts(local, build_id)
            size = local.stat().st_size
        except NotASymbolFile as problem:
            store.delete(key)
            with database.session() as session:
                session.execute(closed)
            raise ApiError(422, problem.code, str(problem), fields={"file": [str(problem)]}) from None
    with database.session() as session:
        session.execute(closed)
        lost = lost_kinds(store, held(session, build_id), serving=True)
        recorded = record(session, store, key, facts, size, sha256, origin, lost)
        answer = stored_answer(session, build_id, recorded.new_kinds)
    if not recorded.new_kinds:
        store.delete(key)
    drop_unused(database, store, recorded.replaced_keys - {key})
    return answer


def files_of(session: Session, build_id: str) -> list[SymbolFileView]:
    query = select(SymbolFile).where(SymbolFile.build_id == build_id).order_by(SymbolFile.kind)
    rows = session.scalars(query)
    return [file_dict(row) for row in rows]
