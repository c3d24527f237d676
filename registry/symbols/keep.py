"""Keeping a symbol file: checked against its own ELF build-id note, stored once per build-id
and kind in the dump store's backend, recorded in `symbol_files`.

A build-id already held for a kind keeps its first file (a build-id names one build: another
file for it is the same program); a file that adds no kind is not stored at all.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from sqlalchemy import select, update
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


class SymbolFileView(TypedDict):
    build_id: str
    kind: str
    bytes: int
    sha256: str
    source: str
    origin: str
    stored_at: str


def file_dict(row: SymbolFile) -> SymbolFileView:
    return {"build_id": row.build_id, "kind": row.kind, "bytes": row.bytes, "sha256": row.sha256,
            "source": row.source, "origin": row.origin, "stored_at": row.stored_at.isoformat()}


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


def record(session: Session, store: DumpStore, key: str, facts: SymbolFileFacts, size: int, sha256: str,
           origin: Origin, lost: set[str]) -> tuple[str, ...]:
    """A row per kind the build-id did not have yet, or had `lost`, for the stored object `key`;
    those kinds."""
    added = []
    for kind in facts.kinds:
        row = {"build_id": facts.build_id, "kind": kind, "store": store_location(store), "key": key,
               "bytes": size, "sha256": sha256, "source": origin.source, "origin": origin.name[:255],
               "token_id": origin.token_id, "stored_at": utcnow()}
        if kind in lost:
            session.execute(update(SymbolFile).where(SymbolFile.build_id == facts.build_id,
                                                     SymbolFile.kind == kind).values(**row))
            added.append(kind)
        elif insert_ignore(session, SymbolFile, row, ["build_id", "kind"]) is not None:
            added.append(kind)
    return tuple(added)


def keep_file(database: Database, store: DumpStore, path: Path, origin: Origin,
              declared_build_id: str | None = None, serving: bool = True) -> Kept:
    """Check `path` and keep it for the kinds its build-id lacks, or lost (`lost_kinds`);
    NotASymbolFile: refused."""
    facts = checked_facts(path, declared_build_id)
    with database.session() as session:
        holding = held(session, facts.build_id)
    lost = lost_kinds(store, holding, serving)
    if not set(facts.kinds) - (set(holding) - lost):
        return Kept(facts, ())
    sha256 = sha256_of(path)
    key = object_key(facts.build_id, sha256)
    stored = store.put_file(key, path)
    with database.session() as session:
        return Kept(facts, record(session, store, key, facts, stored.bytes, sha256, origin, lost))
