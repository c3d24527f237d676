"""A symbol table held as a build's debuginfo gives way to the same build's DWARF: uploaded in
that order (a pipeline shipping its `strip -g` binary first), the DWARF file takes the
table's record, naming it, and the table's object goes once nothing uses it;
DWARF is never replaced, and a table never replaces anything; both databases."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from flask import Flask

from registry.config import Settings
from registry.db import Database
from registry.storage.store import open_store
from registry.symbols.keep import Origin, keep_file
from registry.symbols.keep import held as held_by_kind
from registry.symbols.models import SymbolFile
from tests.support.http import auth
from tests.support.reported_releases import settle
from tests.support.symbols import Pipeline, Program, compile_program, symbol_tables_of

UPLOADER = Origin("upload", "ci-release")


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Program:
    return compile_program(tmp_path_factory.mktemp("table-then-dwarf"), "tabled")


def held(database: Database, build_id: str) -> dict[str, SymbolFile]:
    with database.session() as session:
        return held_by_kind(session, build_id)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_dwarf_replaces_a_symbol_table_and_its_unused_object_goes(
    settings: Settings, database: Database, program: Program, tmp_path: Path,
) -> None:
    store = open_store(settings.dump_store, settings.public_url)
    shipped, table = symbol_tables_of(program.unstripped, tmp_path)

    assert keep_file(database, store, table, UPLOADER).new_kinds == ("debuginfo",)
    first = held(database, program.build_id)["debuginfo"]
    assert (first.lines, first.replaced_sha256) == (False, None)

    kept = keep_file(database, store, program.debug, UPLOADER)

    assert kept.new_kinds == ("debuginfo",)
    now = held(database, program.build_id)["debuginfo"]
    assert (now.lines, now.sha256, now.replaced_sha256) == (True, sha256(program.debug), sha256(table))
    assert now.resymbolicated_at is None  # the build's events are still to symbolicate again
    assert store.head(first.key) is None and store.head(now.key) is not None
    # DWARF is not replaced, by another file with DWARF nor by a symbol table
    assert keep_file(database, store, program.unstripped, UPLOADER).new_kinds == ("executable",)
    assert keep_file(database, store, shipped, UPLOADER).new_kinds == ()
    assert held(database, program.build_id)["debuginfo"].id == now.id


def test_a_replaced_table_that_still_serves_the_executable_keeps_its_object(
    settings: Settings, database: Database, program: Program, tmp_path: Path,
) -> None:
    store = open_store(settings.dump_store, settings.public_url)
    shipped, _ = symbol_tables_of(program.unstripped, tmp_path)
    assert keep_file(database, store, shipped, UPLOADER).new_kinds == ("debuginfo", "executable")

    assert keep_file(database, store, program.debug, UPLOADER).new_kinds == ("debuginfo",)

    rows = held(database, program.build_id)
    assert rows["debuginfo"].sha256 == sha256(program.debug)
    assert rows["executable"].sha256 == sha256(shipped)
    assert store.head(rows["executable"].key) is not None


def test_the_api_takes_dwarf_for_a_build_holding_a_table_and_serves_it(
    app: Flask, live_server: str, database: Database, program: Program, tmp_path: Path,
    make_token: Callable[..., str],
) -> None:
    pipeline = Pipeline(live_server, make_token("symbols", name="ci-release"), tmp_path)
    _, table = symbol_tables_of(program.unstripped, tmp_path)
    assert pipeline.upload(table.read_bytes(), program.build_id).json()["new_kinds"] == ["debuginfo"]
    data = program.debug.read_bytes()
    declared = {"build_id": program.build_id, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "kinds": ["debuginfo"]}
    # a client declaring a file of kinds held, without source lines: nothing to send
    assert pipeline.start(declared | {"lines": False}).json()["state"] == "stored"
    assert pipeline.start(declared | {"lines": True}).json()["state"] == "uploading"

    answer = pipeline.upload(data, program.build_id)  # the product's client declares nothing here

    assert answer.status_code == 200, answer.text
    assert answer.json()["new_kinds"] == ["debuginfo"]
    [debuginfo] = answer.json()["files"]
    assert (debuginfo["lines"], debuginfo["replaced_sha256"]) == (True, sha256(table))
    served = requests.get(f"{live_server}/debuginfod/buildid/{program.build_id}/debuginfo",
                          headers=auth(make_token("read")), timeout=30)
    assert served.status_code == 200 and served.content == data
    # held now: the same declaration sends nothing
    assert pipeline.start(declared | {"lines": True}).json()["state"] == "stored"
    settle(app)  # the arrival this process heard of: the build's events (none) done once
    assert held(database, program.build_id)["debuginfo"].resymbolicated_at is not None

