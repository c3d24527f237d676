"""Uploads of a capture's dump through pre-signed URLs, their verification, download links.

The registry sits beside the data path, never in it: it opens the multipart upload, signs
URLs for the parts a reporter asks for (again after a reboot: resuming is asking for the
parts still missing), checks what the store holds against the MD5s the reporter computed
before it completes the upload, and signs download links, each one audited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TypedDict

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from registry.capture.models import Capture
from registry.capture.service import update_capture
from registry.config import DumpStoreSettings
from registry.core.events import Event
from registry.db import utcnow
from registry.dump_encodings import ENCODINGS
from registry.errors import ApiError
from registry.storage.models import Dump, DumpDownload
from registry.storage.parts import (
    MIB,
    StoredObject,
    UploadGone,
    part_bytes,
    part_count,
    part_problems,
    part_size,
)
from registry.storage.store import DumpStore, store_location
from registry.upsert import insert_ignore

MAX_URLS_PER_REQUEST = 1000


class PartUrl(TypedDict):
    number: int
    bytes: int
    url: str


class DumpView(TypedDict):
    id: str
    capture_id: str
    state: str
    uri: str
    encoding: str
    bytes: int
    raw_bytes: int | None
    part_size: int
    parts: int
    etag: str | None
    created_at: str
    stored_at: str | None
    deleted_at: str | None


class UploadAnswer(TypedDict):
    dump: DumpView
    upload_id: str | None
    expires_at: str | None
    part_urls: list[PartUrl]


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def dump_dict(dump: Dump) -> DumpView:
    return {
        "id": str(dump.id),
        "capture_id": str(dump.capture_id),
        "state": dump.state,
        "uri": dump.store.rstrip("/") + "/" + dump.key,
        "encoding": dump.encoding,
        "bytes": dump.bytes,
        "raw_bytes": dump.raw_bytes,
        "part_size": dump.part_size,
        "parts": part_count(dump.bytes, dump.part_size),
        "etag": dump.etag,
        "created_at": dump.created_at.isoformat(),
        "stored_at": _iso(dump.stored_at),
        "deleted_at": _iso(dump.deleted_at),
    }


# Captures that hold a process's core (a core handler's, full or filtered): their objects are
# named `core`, as gdb and systemd name one; a kernel's dump is a `vmcore`.
PROCESS_CORE_METHODS = ("core", "core_filtered")


def object_key(event_id: int, capture: Capture, encoding: str) -> str:
    """The dump's object, named by what it holds; the download's file name follows it."""
    process_core = capture.method in PROCESS_CORE_METHODS or (
        capture.method == "raw" and capture.target is not None and "core" in capture.target
    )
    name = "core" if process_core else "vmcore"
    return f"events/{event_id}/captures/{capture.id}/{name}{ENCODINGS[encoding].suffix}"


def _capture_to_upload(session: Session, capture_id: int) -> Capture:
    """The capture, if its dump is wanted: refused for an event the registry said to skip."""
    capture = session.get(Capture, capture_id)
    if capture is None:
        raise ApiError(404, "not_found", f"no capture {capture_id}")
    event = session.get(Event, capture.event_id)
    assert event is not None
    if event.capture_action == "skip":
        raise ApiError(
            409,
            "capture_skipped",
            f"event {event.id}'s capture decision is skip: its signature needs no more dumps, "
            "the upload is refused",
            fields={"capture_id": ["the event's decision is skip"]},
        )
    if capture.status in ("failed", "skipped"):
        raise ApiError(
            409,
            "conflict",
            f"capture {capture_id} is {capture.status}: there is no dump to upload",
            fields={"status": [capture.status]},
        )
    return capture


def start_upload(
    session: Session, store: DumpStore, settings: DumpStoreSettings, capture_id: int, request: dict[str, Any]
) -> UploadAnswer:
    """Open (or rejoin) the upload of a capture's dump; URLs for the parts asked for."""
    capture = _capture_to_upload(session, capture_id)
    total, encoding = request["bytes"], request["encoding"]
    dump = session.scalar(select(Dump).where(Dump.capture_id == capture_id).with_for_update())
    if dump is None:
        key = object_key(capture.event_id, capture, encoding)
        upload_id = store.create_upload(key)
        created = insert_ignore(
            session,
            Dump,
            {
                "capture_id": capture_id,
                "store": store_location(store),
                "key": key,
                "state": "uploading",
                "upload_id": upload_id,
                "encoding": encoding,
                "bytes": total,
                "raw_bytes": request.get("raw_bytes"),
                "part_size": part_size(total, settings.part_size_mb * MIB),
                "created_at": utcnow(),
            },
            ["capture_id"],
        )
        if created is None:  # a concurrent request opened it first
            store.abort_upload(key, upload_id)
        dump = session.scalar(select(Dump).where(Dump.capture_id == capture_id).with_for_update())
        assert dump is not None
    else:
        reopened_if_lost(session, store, dump, total, encoding)
    if (dump.bytes, dump.encoding) != (total, encoding):
        raise ApiError(
            409,
            "conflict",
            f"capture {capture_id}'s upload is of {dump.bytes} bytes ({dump.encoding}), "
            f"not {total} ({encoding}): one dump per capture",
            fields={"bytes": [f"the open upload has {dump.bytes}"]},
        )
    if dump.state != "uploading":
        return {"dump": dump_dict(dump), "upload_id": None, "expires_at": None, "part_urls": []}
    assert dump.upload_id is not None
    ttl = settings.upload_ttl_s
    return {
        "dump": dump_dict(dump),
        "upload_id": dump.upload_id,
        "expires_at": (utcnow() + timedelta(seconds=ttl)).isoformat(),
        "part_urls": signed_part_urls(store, dump.key, dump.upload_id, dump.bytes, dump.part_size,
                                      request.get("parts"), ttl),
    }


def joined_parts(store: DumpStore, key: str, upload_id: str, total: int, size: int,
                 md5s: dict[int, str]) -> StoredObject:
    """Check the stored parts against the ones sent (a 409 naming each part missing or not as
    sent) and join them into the object, for a dump or a symbol file; UploadGone when the store
    no longer has the upload (the caller knows whether a lost completion went through)."""
    stored_parts = store.list_parts(key, upload_id)
    problems = part_problems(total, size, md5s, stored_parts)
    if problems:
        raise ApiError(
            409,
            "parts_incomplete",
            f"{len(problems)} part(s) missing or not as sent: upload them again, then complete",
            fields={"parts": [f"{n}: {p}" for n, p in problems.items()]},
        )
    count = part_count(total, size)
    parts = sorted((p for p in stored_parts if p.number <= count), key=lambda p: p.number)
    return store.complete_upload(key, upload_id, parts)


def signed_part_urls(store: DumpStore, key: str, upload_id: str, total: int, size: int,
                     asked: list[int] | None, ttl_s: int) -> list[PartUrl]:
    """URLs for the parts asked for (default: the first MAX_URLS_PER_REQUEST); a 400 naming the
    part numbers past the object's."""
    count = part_count(total, size)
    wanted = asked or list(range(1, min(count, MAX_URLS_PER_REQUEST) + 1))
    beyond = sorted(n for n in wanted if not 1 <= n <= count)
    if beyond or len(wanted) > MAX_URLS_PER_REQUEST:
        raise ApiError(
            400,
            "bad_request",
            f"this upload has parts 1 to {count}; at most {MAX_URLS_PER_REQUEST} URLs per request",
            fields={"parts": [str(n) for n in beyond[:20]]},
        )
    return [
        {"number": n, "bytes": part_bytes(total, size, n),
         "url": store.presign_part(key, upload_id, n, ttl_s)}
        for n in sorted(set(wanted))
    ]


def complete_upload(session: Session, store: DumpStore, capture_id: int, md5s: dict[int, str]) -> DumpView:
    """Check every part in the store against the reporter's MD5s and sizes, complete the upload,
    check the object (size, multipart ETag), and point the capture at it. A failed check is a
    409 naming the parts to send again; nothing is completed."""
    dump = session.scalar(select(Dump).where(Dump.capture_id == capture_id).with_for_update())
    if dump is None:
        raise ApiError(404, "not_found", f"capture {capture_id} has no upload: start one first")
    if dump.state == "stored":
        return dump_dict(dump)
    if dump.state != "uploading" or dump.upload_id is None:
        raise ApiError(
            409, "conflict", f"capture {capture_id}'s dump is {dump.state}", fields={"state": [dump.state]}
        )
    count = part_count(dump.bytes, dump.part_size)
    try:
        stored = joined_parts(store, dump.key, dump.upload_id, dump.bytes, dump.part_size, md5s)
    except UploadGone:
        # A completion whose answer was lost (a timeout, a killed worker) went through, or the
        # upload was aborted or expired: then every part goes again, into a new upload that
        # the next request for part URLs opens.
        if recorded_if_completed(session, store, dump):
            return dump_dict(dump)
        raise ApiError(
            409,
            "parts_incomplete",
            f"the store no longer has this upload (aborted or expired): all {count} part(s) go again",
            fields={"parts": [f"{n}: the store lost the upload" for n in range(1, count + 1)]},
        ) from None
    if stored.bytes != dump.bytes:
        store.delete(dump.key)
        raise ApiError(409, "conflict", f"the store made an object of {stored.bytes} bytes, not {dump.bytes}")
    record_stored(session, store, dump, stored)
    return dump_dict(dump)


def reopened_if_lost(session: Session, store: DumpStore, dump: Dump, total: int, encoding: str) -> None:
    """Rejoining an upload the store no longer has: its completion went through after all
    (recorded as stored), or a lifecycle rule aborted it while the host was down (a new upload
    of the same object takes its place)."""
    rejoined = (dump.bytes, dump.encoding) == (total, encoding)
    if dump.state != "uploading" or dump.upload_id is None or not rejoined:
        return
    if store.upload_exists(dump.key, dump.upload_id) or recorded_if_completed(session, store, dump):
        return
    dump.upload_id = store.create_upload(dump.key)


def recorded_if_completed(session: Session, store: DumpStore, dump: Dump) -> bool:
    """For an upload the store no longer has: whether its object is there at the dump's size
    (an earlier completion went through), and if so the dump is recorded as stored now."""
    stored = store.head(dump.key)
    if stored is None or stored.bytes != dump.bytes:
        return False
    record_stored(session, store, dump, stored)
    return True


def record_stored(session: Session, store: DumpStore, dump: Dump, stored: StoredObject) -> None:
    """The dump is in the store: the row says so and its capture points at the object."""
    dump.state, dump.upload_id, dump.etag, dump.stored_at = "stored", None, stored.etag, utcnow()
    capture = session.get(Capture, dump.capture_id)
    assert capture is not None
    status = "completed" if capture.status == "started" else capture.status
    update_capture(
        session,
        dump.capture_id,
        {"uri": store.uri(dump.key), "status": status, "bytes": dump.raw_bytes or dump.bytes},
    )


NO_DUMP = "none"  # the state an answer names for a capture with no dump at all
# Why a dump that is not `stored` cannot be downloaded, by its state (its row's fields as `d`).
NOT_DOWNLOADABLE = {
    "uploading": "its upload is under way since {d.created_at:%Y-%m-%d %H:%M} UTC: it can be downloaded "
    "once the reporter completes it",
    "deleting": "retention is deleting it (docs/retention.md): it is no longer handed out",
    "deleted": "retention deleted it from the store; its row stays as history",
}


def capture_dump(session: Session, capture_id: int) -> Dump:
    """The capture's dump in whatever state it is; a 404 for a capture with none, naming the
    state `none` and whether one may still come."""
    dump = session.scalar(select(Dump).where(Dump.capture_id == capture_id))
    if dump is not None:
        return dump
    capture = session.get(Capture, capture_id)
    if capture is None:
        raise ApiError(404, "not_found", f"no capture {capture_id}")
    coming = ("none will be: the capture is " + capture.status if capture.status in ("failed", "skipped")
              else "its reporter has not started the upload")
    raise ApiError(404, "no_dump", f"capture {capture_id} has no dump in the store: {coming}",
                   fields={"state": [NO_DUMP]})


def stored_dump(session: Session, capture_id: int) -> Dump:
    """The capture's dump if it can be handed out; a 409 naming its state otherwise."""
    dump = capture_dump(session, capture_id)
    if dump.state != "stored":
        why = NOT_DOWNLOADABLE[dump.state].format(d=dump)
        raise ApiError(409, "dump_not_stored", f"capture {capture_id}'s dump is {dump.state}: {why}",
                       fields={"state": [dump.state]})
    return dump


class DownloadLink(TypedDict):
    url: str
    expires_at: str
    filename: str
    dump: DumpView


def download_link(
    session: Session, store: DumpStore, ttl_s: int, dump: Dump, actor: str, token_id: int | None, via: str
) -> DownloadLink:
    """A short-lived link to a stored dump, recorded: who asked, when, for which object, how."""
    expires = utcnow() + timedelta(seconds=ttl_s)
    filename = dump.key.replace("/", "-")
    url = store.presign_get(dump.key, ttl_s, filename)
    session.add(
        DumpDownload(
            dump_id=dump.id,
            token_id=token_id,
            actor=actor[:128],
            via=via,
            object_uri=store.uri(dump.key),
            created_at=utcnow(),
            expires_at=expires,
        )
    )
    session.flush()
    return {"url": url, "expires_at": expires.isoformat(), "filename": filename, "dump": dump_dict(dump)}


def link_maker(session: Session, store: DumpStore, ttl_s: int, actor: str, token_id: int | None,
               via: str) -> Callable[[Dump], DownloadLink]:
    """Links for one caller (a bundle hands out one per stored dump), each recorded."""
    return lambda dump: download_link(session, store, ttl_s, dump, actor, token_id, via)


def stored_dumps(session: Session, capture_ids: list[int]) -> dict[int, Dump]:
    """The stored dumps of these captures, by capture id."""
    rows = session.scalars(select(Dump).where(Dump.capture_id.in_(capture_ids), Dump.state == "stored"))
    return {dump.capture_id: dump for dump in rows}


def lock_dumps(session: Session, capture_ids: Iterable[int], event_ids: Iterable[int] = ()) -> list[Dump]:
    """The dumps of these captures and of these events' captures, their rows locked (FOR UPDATE,
    in id order) until the transaction ends. Whoever protects a dump from retention (a pin, an RCA
    citing it) locks it here; retention's mark locks the same rows and reads the protections
    after its lock (registry.retention.gc), so each waits for the other's commit."""
    captures, events = list(capture_ids), list(event_ids)
    if not captures and not events:
        return []
    of_events = select(Capture.id).where(Capture.event_id.in_(events))
    query = select(Dump).where(or_(Dump.capture_id.in_(captures), Dump.capture_id.in_(of_events)))
    return list(session.scalars(query.order_by(Dump.id).with_for_update()))
