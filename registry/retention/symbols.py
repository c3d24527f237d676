"""Retention of symbol files: only those no stored event needs, and only past their age.

Events are never deleted, so a build-id any report ever named (its stack's `build_id`, a
frame's, a mapping's) is needed for good: its files stay. A file goes when
CRASHREG_RETENTION_SYMBOL_DAYS is set, it was stored that long ago, and no report names its
build-id (a build that never crashed). The row goes first, then the object once no row uses
it: an interrupted run leaves an object without a row (space), never a row without its file.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import String, cast, delete, exists, select
from sqlalchemy.orm import Session

from registry.core.events import Report
from registry.db import Database
from registry.storage.store import DumpStore
from registry.symbols.models import SymbolFile, SymbolUpload

BATCH = 200  # build-ids looked at per run: each is one search of the reports
STALE_UPLOAD = timedelta(days=7)  # a pipeline resumes within minutes; an upload this old was abandoned


def named_by_a_report(session: Session, build_id: str) -> bool:
    """Whether any report mentions the build-id (a search of the payloads' text: a stray
    match only keeps a file longer)."""
    mentions = cast(Report.payload, String).contains(build_id, autoescape=True)
    return bool(session.scalar(select(exists().where(mentions))))


def collect_symbols(database: Database, store: DumpStore, days: int, now: datetime, dry_run: bool,
                    progress: Callable[[str], None]) -> tuple[int, int]:
    """Files deleted (or, dry, that would be) and their bytes."""
    if days <= 0:
        return 0, 0
    here = SymbolFile.store == store.uri("").rstrip("/")  # a file of another store is left alone
    with database.session() as session:
        old = select(SymbolFile.build_id).where(here, SymbolFile.stored_at <= now - timedelta(days=days))
        candidates = list(session.scalars(old.distinct().order_by(SymbolFile.build_id).limit(BATCH)))
    deleted = freed = 0
    for build_id in candidates:
        with database.session() as session:
            aged = (here, SymbolFile.build_id == build_id, SymbolFile.stored_at <= now - timedelta(days=days))
            rows = list(session.scalars(select(SymbolFile).where(*aged).with_for_update()))
            if named_by_a_report(session, build_id):  # looked at once, under the rows' lock
                continue
            sizes = {row.key: row.bytes for row in rows}  # one object may serve both kinds
            keys = set(sizes)
            deleted, freed = deleted + len(rows), freed + sum(sizes.values())
            if dry_run:
                session.rollback()
                continue
            session.execute(delete(SymbolFile).where(SymbolFile.id.in_([row.id for row in rows])))
        with database.session() as session:
            still_used = set(session.scalars(select(SymbolFile.key).where(SymbolFile.key.in_(keys))))
        for key in keys - still_used:
            store.delete(key)
        progress(f"symbols of {build_id}: {len(rows)} file(s) deleted, no report names the build-id")
    return deleted, freed


def abort_stale_uploads(database: Database, store: DumpStore, now: datetime, dry_run: bool,
                        progress: Callable[[str], None]) -> int:
    """Symbol uploads open for STALE_UPLOAD: their parts dropped from the store, their rows
    deleted (a pipeline asking again starts afresh). How many (or, dry, would be)."""
    with database.session() as session:
        stale = list(session.scalars(select(SymbolUpload).where(SymbolUpload.created_at <= now - STALE_UPLOAD)
                                     .order_by(SymbolUpload.id).limit(BATCH).with_for_update()))
        if dry_run:
            session.rollback()
            return len(stale)
        for upload in stale:
            store.abort_upload(upload.key, upload.upload_id)
            session.delete(upload)
            progress(f"symbol upload {upload.id} of {upload.build_id}: open since {upload.created_at}, "
                     "aborted")
    return len(stale)
