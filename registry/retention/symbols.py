"""Retention of symbol files: only those no stored event needs, and only past their age.

A build-id any report ever named (its stack's `build_id`, a frame's, a mapping's, a kernel
module's) is needed for good: its files stay, even once old events are archived. So is the
supplementary file a stored debug file links to (dwz -m: `.gnu_debugaltlink`), which no report
names but without which that debug file has no types or source lines. A file goes when
CRASHREG_RETENTION_SYMBOL_DAYS is set, it was stored that long ago, no report names its
build-id (a build that never crashed) and no stored file links to it. The row goes first,
then the object once no row uses it: an interrupted run leaves an object without a row
(space), never a row without its file.

Which build-ids reports name is kept in `named_build_ids`, filled by a scan of the reports
that resumes where it stopped (its ScanMark) and stops short of the last SETTLED minutes, so
that a report still in its transaction is never passed over; the reports past the mark are
searched directly. A run so costs the new reports once, not every payload per build-id.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import String, cast, delete, exists, or_, select, update
from sqlalchemy.orm import Session, aliased

from registry.build_ids import BUILD_ID
from registry.core.events import Report
from registry.db import Database, utcnow
from registry.retention.models import NamedBuildId, ScanMark
from registry.storage.store import DumpStore, store_location
from registry.symbols.elf import read_alt_build_id
from registry.symbols.models import SymbolFile, SymbolUpload
from registry.upsert import insert_ignore

BATCH = 200  # old build-ids read per transaction (a run looks at them all)
STALE_UPLOAD = timedelta(days=7)  # a pipeline resumes within minutes; an upload this old was abandoned
NAMED_SCAN = "reports:named_build_ids"
SCAN_BATCH = 1000  # reports read per transaction of the scan
SCAN_PROGRESS = 100  # batches between progress lines
SETTLED = timedelta(minutes=10)  # far longer than any ingest transaction
LINKS_BATCH = 100  # objects read for their links per transaction


def build_ids_named(payload: Any) -> set[str]:
    """Every build-id a report names: the values of its keys ending in `build_id`, at any depth."""
    found: set[str] = set()
    pending = [payload] if isinstance(payload, (dict, list)) else []
    while pending:
        value = pending.pop()
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, (dict, list)):
                pending.append(item)
            elif isinstance(item, str) and str(key).endswith("build_id") and BUILD_ID.fullmatch(item):
                found.add(item.lower())
    return found


def scan_named_build_ids(database: Database, now: datetime, progress: Callable[[str], None]) -> int:
    """Note the build-ids of the reports past the scan's mark, up to SETTLED before `now`; the
    new mark (every report at or below it is in `named_build_ids`)."""
    horizon, batches = now - SETTLED, 0
    with database.session() as session:
        mark = session.get(ScanMark, NAMED_SCAN)
        position = mark.position if mark is not None else 0
    while True:
        with database.session() as session:
            settled = (Report.received_at < horizon).label("settled")
            rows = session.execute(select(Report.id, Report.payload, settled).where(Report.id > position)
                                   .order_by(Report.id).limit(SCAN_BATCH)).all()
            named: dict[str, int] = {}
            for row in rows:
                if not row.settled:
                    break
                for build_id in build_ids_named(row.payload):
                    named.setdefault(build_id, row.id)
                position = row.id
            for build_id, report_id in named.items():
                insert_ignore(session, NamedBuildId, {"build_id": build_id, "first_report_id": report_id},
                              ["build_id"])
            session.merge(ScanMark(name=NAMED_SCAN, position=position, updated_at=utcnow()))
        batches += 1
        if batches % SCAN_PROGRESS == 0:
            progress(f"build-ids named by reports: scanned up to report {position}")
        if len(rows) < SCAN_BATCH or not rows[-1].settled:
            return position


def named_by_a_report(session: Session, build_id: str, scanned_to: int) -> bool:
    """Whether a report names the build-id: one scanned, or one past the scan (a search of
    the payloads' text: a stray match only keeps a file longer)."""
    scanned = exists().where(NamedBuildId.build_id == build_id.lower())
    recent = exists().where(Report.id > scanned_to,
                            cast(Report.payload, String).contains(build_id, autoescape=True))
    return bool(session.scalar(select(or_(scanned, recent))))


def linked_by_a_file(session: Session, build_id: str) -> bool:
    """Whether a stored file links to the build-id's (a supplementary file of dwz's)."""
    return bool(session.scalar(select(exists().where(SymbolFile.alt_build_id == build_id.lower()))))


def alt_build_id_of_object(store: DumpStore, key: str) -> str | None:
    """What the stored object links to, read from the object (an S3 store's fetched first);
    None also when it is gone (it serves nothing then)."""
    local = store.local_path(key)
    if local is not None:
        return read_alt_build_id(local)
    if store.head(key) is None:
        return None
    with tempfile.TemporaryDirectory(prefix="crashreg-gc-") as scratch:
        copy = Path(scratch) / "symbol-file"
        store.fetch_file(key, copy)
        return read_alt_build_id(copy)


def read_unrecorded_links(database: Database, store: DumpStore, dry_run: bool,
                          progress: Callable[[str], None]) -> set[str]:
    """Record what the store's files kept before their links were (before migration 0045, or
    by a process beside it) link to, each object read once. The build-ids they link to: a dry
    run records nothing, and decides with these."""
    unread = (SymbolFile.store == store_location(store), SymbolFile.alt_read.is_(False))
    linked: set[str] = set()
    after = read = 0
    while True:
        with database.session() as session:
            rows = session.execute(select(SymbolFile.id, SymbolFile.key).where(*unread, SymbolFile.id > after)
                                   .order_by(SymbolFile.id).limit(LINKS_BATCH)).all()
        if not rows:
            if read:
                progress(f"links of symbol files stored before they were recorded: {read} file(s) read")
            return linked
        ids_by_key: dict[str, list[int]] = {}
        for row in rows:  # an object serving both kinds has two rows
            ids_by_key.setdefault(row.key, []).append(row.id)
        links = {key: alt_build_id_of_object(store, key) for key in ids_by_key}
        linked |= {alt for alt in links.values() if alt is not None}
        if not dry_run:
            with database.session() as session:
                for key, alt in links.items():
                    session.execute(update(SymbolFile).where(SymbolFile.id.in_(ids_by_key[key]))
                                    .values(alt_build_id=alt, alt_read=True))
        after, read = rows[-1].id, read + len(links)


def old_build_ids(database: Database, store: DumpStore, cutoff: datetime) -> Iterator[str]:
    """The build-ids of the store's files stored at or before `cutoff` that no scanned report
    names and no file links to (each is asked again under its rows' lock), in order, BATCH
    read per transaction: all of them (the kept ones stay old, and would stay the first)."""
    linker = aliased(SymbolFile)
    old = select(SymbolFile.build_id).distinct().where(
        SymbolFile.store == store_location(store), SymbolFile.stored_at <= cutoff,
        ~exists().where(NamedBuildId.build_id == SymbolFile.build_id),
        ~exists().where(linker.alt_build_id == SymbolFile.build_id))
    after = ""
    while True:
        with database.session() as session:
            page = old.where(SymbolFile.build_id > after).order_by(SymbolFile.build_id).limit(BATCH)
            batch = list(session.scalars(page))
        yield from batch
        if len(batch) < BATCH:
            return
        after = batch[-1]


def collect_symbols(database: Database, store: DumpStore, days: int, now: datetime, dry_run: bool,
                    progress: Callable[[str], None]) -> tuple[int, int]:
    """Files deleted (or, dry, that would be) and their bytes."""
    if days <= 0:
        return 0, 0
    here = SymbolFile.store == store_location(store)  # a file of another store is left alone
    cutoff = now - timedelta(days=days)
    scanned_to = scan_named_build_ids(database, now, progress)
    linked_unrecorded = read_unrecorded_links(database, store, dry_run, progress)
    deleted = freed = 0
    for build_id in old_build_ids(database, store, cutoff):
        with database.session() as session:
            aged = (here, SymbolFile.build_id == build_id, SymbolFile.stored_at <= cutoff)
            rows = list(session.scalars(select(SymbolFile).where(*aged).with_for_update()))
            if (build_id in linked_unrecorded or linked_by_a_file(session, build_id)  # under the rows' lock
                    or named_by_a_report(session, build_id, scanned_to)):
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
        progress(f"symbols of {build_id}: {len(rows)} file(s) deleted, no report names the build-id "
                 "and no file links to it")
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
