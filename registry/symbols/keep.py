"""Keeping a symbol file: checked against its own ELF build-id note, stored once per build-id
and kind in the dump store's backend, recorded in `symbol_files`.

A build-id already held for a kind keeps its first file (a build-id names one build: another
file for it is the same program), with one exception: debuginfo that is a symbol table alone
(a program stripped with `strip -g`, or built without -g) gives way to a file with DWARF, which
adds source lines and inlined calls. A file that adds nothing is not stored at all.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from sqlalchemy import inspect, select, update
from sqlalchemy.orm import Session

from registry.db import Database, utcnow
from registry.storage.store import DumpStore, store_location
from registry.symbols.elf import NotASymbolFile, SymbolFileFacts, read_facts
from registry.symbols.models import SymbolFile
from registry.upsert import insert_ignore

CHUNK = 1 << 20


@dataclass(frozen=True)
class Origin:
    """Where a file came from: `source` upload | debuginfod; `name` the token's or user's name,
    or the server's URL; the token when an API caller sent it."""

    source: str
    name: str
    token_id: int | None = None


@dataclass(frozen=True)
class Kept:
    facts: SymbolFileFacts
    new_kinds: tuple[str, ...]  # the kinds this file brought (empty: the build-id had them all)


@dataclass(frozen=True)
class Recorded:
    new_kinds: tuple[str, ...]  # the kinds the file brought, those it replaced included
    replaced_keys: frozenset[str]  # the objects of the rows it replaced (delete once unused)


class SymbolFileView(TypedDict):
    build_id: str
    kind: str
    bytes: int
    sha256: str
    source: str
    origin: str
    stored_at: str
    lines: bool | None
    replaced_sha256: str | None


def file_dict(row: SymbolFile) -> SymbolFileView:
    return {"build_id": row.build_id, "kind": row.kind, "bytes": row.bytes, "sha256": row.sha256,
            "source": row.source, "origin": row.origin, "stored_at": row.stored_at.isoformat(),
            "lines": row.lines, "replaced_sha256": row.replaced_sha256}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def object_key(build_id: str, sha256: str) -> str:
    return f"symbols/{build_id}/{sha256}"


def held(session: Session, build_id: str) -> dict[str, SymbolFile]:
    """The build-id's stored files, by kind."""
    rows = session.scalars(select(SymbolFile).where(SymbolFile.build_id == build_id))
    return {row.kind: row for row in rows}


def recorded_elsewhere(session: Session, store: DumpStore) -> dict[str, int]:
    """Stores other than `store` that symbol files are recorded in and `store` lacks, with how
    many: a command run with other store settings than the registry's (a default store relative
    to its working directory) does not find them. (Objects copied to `store` under their keys,
    a store moved, are found.)"""
    here = store_location(store)
    rows = session.execute(select(SymbolFile.store, SymbolFile.key).where(SymbolFile.store != here))
    missing = Counter(location for location, key in rows.tuples() if store.head(key) is None)
    return dict(missing)


def lost_kinds(store: DumpStore, holding: dict[str, SymbolFile], serving: bool) -> set[str]:
    """The kinds whose recorded object `store` does not have: the next file brought for them is
    kept again, its record replacing the lost one's. To the registry that serves the symbols
    (`serving`) that is any record this store lacks (one a `crashreg symbols upload` run in
    another directory wrote into that directory's store, or an object deleted behind its
    back); to a command on some machine only a record of its own store (another store's is not
    its to take over)."""
    here = store_location(store)
    return {kind for kind, row in holding.items()
            if (serving or row.store == here) and store.head(row.key) is None}


def checked_facts(path: Path, declared_build_id: str | None) -> SymbolFileFacts:
    """The file's facts, refused (NotASymbolFile) when its note is not the declared build-id."""
    facts = read_facts(path)
    if declared_build_id is not None and facts.build_id != declared_build_id:
        raise NotASymbolFile(
            "build_id_mismatch",
            f"the file's ELF build-id note is {facts.build_id}, not the declared {declared_build_id}",
        )
    return facts


def improves_debuginfo(holding: dict[str, SymbolFile], lines: bool) -> bool:
    """Whether a file with (or without) source lines would improve the held debuginfo: a symbol
    table alone (or one recorded before that was noted) when the file has DWARF."""
    debuginfo = holding.get("debuginfo")
    return lines and debuginfo is not None and debuginfo.lines is not True


def brings_nothing(facts: SymbolFileFacts, holding: dict[str, SymbolFile], lost: set[str]) -> bool:
    """Whether the build-id holds every kind the file has (and none it would improve)."""
    kept = set(holding) - lost
    return set(facts.kinds) <= kept and not improves_debuginfo(holding, facts.lines)


def links_recordable(session: Session) -> bool:
    """Whether `symbol_files` records what a file links to (migration 0045): a process keeps
    files beside the upgrade, and a row recorded without is read by the next gc instead. Asked
    once per database connection."""
    connection = session.connection()
    recordable = connection.info.get("symbol_links_recordable")
    if recordable is None:
        columns = inspect(connection).get_columns(SymbolFile.__tablename__)
        recordable = any(column["name"] == "alt_read" for column in columns)
        connection.info["symbol_links_recordable"] = recordable
    return bool(recordable)


def record(session: Session, store: DumpStore, key: str, facts: SymbolFileFacts, size: int, sha256: str,
           origin: Origin, lost: set[str]) -> Recorded:
    """A row per kind the build-id did not have yet, or had `lost`, for the stored object
    `key`, with the supplementary file it links to; and the debuginfo row made this file's when
    it holds no source lines and this file has them (naming the file it replaced)."""
    added, replaced = [], set()
    links = {"alt_build_id": facts.alt_build_id, "alt_read": True} if links_recordable(session) else {}
    for kind in facts.kinds:
        row = {"build_id": facts.build_id, "kind": kind, "store": store_location(store), "key": key,
               "bytes": size, "sha256": sha256, "source": origin.source, "origin": origin.name[:255],
               "token_id": origin.token_id, "stored_at": utcnow(), "lines": facts.lines, **links}
        same = (SymbolFile.build_id == facts.build_id, SymbolFile.kind == kind)
        if kind in lost:
            session.execute(update(SymbolFile).where(*same).values(**row))
            added.append(kind)
            continue
        table = None
        if kind == "debuginfo" and facts.lines:  # locked: of two such files, one replaces it
            table = session.execute(select(SymbolFile.id, SymbolFile.sha256, SymbolFile.key)
                                    .where(*same, SymbolFile.lines.is_not(True)).with_for_update()).first()
        if table is not None:
            session.execute(update(SymbolFile).where(SymbolFile.id == table.id)
                            .values(**row, replaced_sha256=table.sha256, resymbolicated_at=None))
            replaced.add(table.key)
            added.append(kind)
        elif insert_ignore(session, SymbolFile, row, ["build_id", "kind"]) is not None:
            added.append(kind)
    return Recorded(tuple(added), frozenset(replaced))


def drop_unused(database: Database, store: DumpStore, keys: frozenset[str]) -> None:
    """Delete the objects of `keys` that no row uses any more (a replaced file's; one object
    may still serve another kind)."""
    if not keys:
        return
    with database.session() as session:
        used = set(session.scalars(select(SymbolFile.key).where(SymbolFile.key.in_(keys))))
    for key in keys - used:
        store.delete(key)


def keep_file(database: Database, store: DumpStore, path: Path, origin: Origin,
              declared_build_id: str | None = None, serving: bool = True) -> Kept:
    """Check `path` and keep it for the kinds its build-id lacks, or lost (`lost_kinds`), or
    holds without source lines when it has them; NotASymbolFile: refused."""
    facts = checked_facts(path, declared_build_id)
    with database.session() as session:
        holding = held(session, facts.build_id)
    lost = lost_kinds(store, holding, serving)
    if brings_nothing(facts, holding, lost):
        return Kept(facts, ())
    sha256 = sha256_of(path)
    key = object_key(facts.build_id, sha256)
    stored = store.put_file(key, path)
    with database.session() as session:
        recorded = record(session, store, key, facts, stored.bytes, sha256, origin, lost)
    drop_unused(database, store, recorded.replaced_keys - {key})
    return Kept(facts, recorded.new_kinds)
