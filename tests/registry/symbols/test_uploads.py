"""Symbol uploads over real HTTP: in parts through pre-signed URLs, resumable, deduplicated by
build-id, checked against the file's own ELF build-id note; hostile input gets a 4xx naming it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from sqlalchemy import func, select

from registry.config import Settings
from registry.db import Database
from registry.storage.store import open_store
from registry.symbols.api import current_sources
from registry.symbols.keep import Origin, keep_file
from registry.symbols.models import SymbolFile, SymbolUpload
from tests.support.dumps import PART, content_md5, put
from tests.support.http import auth
from tests.support.symbols import Pipeline, Program, compile_program


@pytest.fixture
def pipeline(live_server: str, make_token: Callable[..., str], tmp_path: Path) -> Pipeline:
    return Pipeline(live_server, make_token("symbols", name="ci-release"), tmp_path)


def stored(database: Database) -> list[tuple[str, str, str]]:
    with database.session() as session:
        query = select(SymbolFile).order_by(SymbolFile.id)
        return [(r.build_id, r.kind, r.origin) for r in session.scalars(query)]


def open_uploads(database: Database) -> int:
    with database.session() as session:
        return session.scalar(select(func.count()).select_from(SymbolUpload)) or 0


def test_a_debug_file_lands_once_per_build_id_and_kind(
    pipeline: Pipeline, database: Database, symbol_programs: dict[str, Program],
    make_token: Callable[..., str],
) -> None:
    program = symbol_programs["uploaded"]
    data = program.debug.read_bytes()
    answer = pipeline.upload(data, program.build_id)
    assert answer.status_code == 200, answer.text
    assert answer.json()["new_kinds"] == ["debuginfo"]
    assert stored(database) == [(program.build_id, "debuginfo", "ci-release")]
    # the same file again: nothing is sent
    again = pipeline.start({"build_id": program.build_id, "bytes": len(data),
                            "sha256": hashlib.sha256(data).hexdigest()})
    assert again.json()["state"] == "stored" and again.json()["part_urls"] == []
    # the unstripped program: it adds the executable, its debug info stays the first file's
    both = pipeline.upload(program.unstripped.read_bytes(), program.build_id)
    assert both.json()["new_kinds"] == ["executable"]
    # the stripped program adds nothing: the build-id holds both kinds
    nothing = pipeline.upload(program.stripped.read_bytes(), program.build_id)
    assert nothing.json()["new_kinds"] == []
    # a client that says what the file brings sends none of it when the build-id holds it all
    stripped = program.stripped.read_bytes()
    ask = {"build_id": program.build_id, "bytes": len(stripped) + 1, "sha256": "0" * 64}
    held_already = pipeline.start({**ask, "kinds": ["executable"]})
    assert held_already.json()["state"] == "stored" and held_already.json()["part_urls"] == []
    assert pipeline.start({**ask, "kinds": ["bogus"]}).status_code == 400
    assert [kind for _, kind, _ in stored(database)] == ["debuginfo", "executable"]
    assert open_uploads(database) == 0
    listed = requests.get(f"{pipeline.url}/api/v1/symbols/{program.build_id}",
                          headers=auth(make_token("read")), timeout=30).json()
    assert [(f["kind"], f["sha256"]) for f in listed["files"]] == [
        ("debuginfo", hashlib.sha256(data).hexdigest()),
        ("executable", hashlib.sha256(program.unstripped.read_bytes()).hexdigest()),
    ]


def test_an_interrupted_upload_is_resumed_in_the_same_upload(
    pipeline: Pipeline, database: Database, symbol_programs: dict[str, Program],
) -> None:
    program = symbol_programs["uploaded"]
    data = program.debug.read_bytes()
    body = {"build_id": program.build_id, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    first = pipeline.start(body).json()
    early = pipeline.complete(first["upload"]["id"], data)
    assert early.status_code == 409 and early.json()["error"]["code"] == "parts_incomplete"
    second = pipeline.start(body).json()
    assert second["upload"]["id"] == first["upload"]["id"]
    url = second["part_urls"][0]["url"]
    assert put(url, data, content_md5(data)).status_code == 200
    assert pipeline.complete(second["upload"]["id"], data).json()["new_kinds"] == ["debuginfo"]


def refused(answer: requests.Response, status: int, code: str) -> str:
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code, answer.text
    return str(answer.json()["error"]["message"])


def test_a_file_whose_build_id_note_is_another_is_refused_and_dropped(
    pipeline: Pipeline, database: Database, symbol_programs: dict[str, Program],
) -> None:
    data = symbol_programs["uploaded"].debug.read_bytes()
    other = symbol_programs["upstream"].build_id
    message = refused(pipeline.upload(data, other), 422, "build_id_mismatch")
    assert symbol_programs["uploaded"].build_id in message and other in message
    assert stored(database) == [] and open_uploads(database) == 0


@pytest.mark.parametrize(("what", "code"), [("text", "not_elf"), ("no_build_id", "no_build_id"),
                                            ("truncated", "bad_elf"), ("empty_elf", "bad_elf")])
def test_files_that_are_not_symbols_are_refused(
    pipeline: Pipeline, database: Database, symbol_programs: dict[str, Program], what: str, code: str,
) -> None:
    data = {
        "text": b"#!/bin/sh\necho not a program\n",
        "no_build_id": symbol_programs["no_build_id"].debug.read_bytes(),
        "truncated": symbol_programs["uploaded"].debug.read_bytes()[:100],
        "empty_elf": b"\x7fELF",
    }[what]
    refused(pipeline.upload(data, "ab" * 20), 422, code)
    assert stored(database) == []


def test_a_file_that_is_not_the_declared_sha256_is_refused(
    pipeline: Pipeline, database: Database, symbol_programs: dict[str, Program],
) -> None:
    program = symbol_programs["uploaded"]
    answer = pipeline.upload(program.debug.read_bytes(), program.build_id, sha256="0" * 64)
    refused(answer, 422, "sha256_mismatch")
    assert stored(database) == []


@pytest.mark.parametrize("body", [
    {"build_id": "xyz", "bytes": 10, "sha256": "0" * 64},
    {"build_id": "abc", "bytes": 10, "sha256": "0" * 64},
    {"build_id": "ab" * 65, "bytes": 10, "sha256": "0" * 64},
    {"build_id": "ab\u0000cd", "bytes": 10, "sha256": "0" * 64},
    {"build_id": "\ud800", "bytes": 10, "sha256": "0" * 64},
    {"build_id": "abcd", "bytes": 10**30, "sha256": "0" * 64},
    {"build_id": "abcd", "bytes": -1, "sha256": "0" * 64},
    {"build_id": "abcd", "bytes": 0, "sha256": "0" * 64},
    {"build_id": "abcd", "bytes": 10, "sha256": "nope"},
    {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "parts": [10**12]},
    {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "kinds": ["debuginfo"], "lines": "maybe"},
    {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "kinds": ["debuginfo"], "lines": None},
    {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "kinds": ["debuginfo"], "lines": [1]},
    {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "kinds": ["debuginfo"], "lines": 0},  # a count
    {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "kinds": ["debuginfo"], "lines": "yes"},
    {"bytes": 10},
])
def test_bad_upload_requests_are_a_400(pipeline: Pipeline, body: dict[str, Any]) -> None:
    answer = pipeline.start(body)
    assert answer.status_code == 400, answer.text
    assert set(answer.json()["error"]["fields"]) <= set(body) | {"build_id", "sha256"}


def test_a_file_past_the_configured_size_limit_is_refused_by_name(pipeline: Pipeline) -> None:
    answer = pipeline.start({"build_id": "abcd", "bytes": 1 << 40, "sha256": "0" * 64})
    assert "CRASHREG_SYMBOL_MAX_FILE_MB" in refused(answer, 400, "too_large") + str(answer.json()["error"])


def test_part_numbers_past_the_files_are_named(pipeline: Pipeline) -> None:
    answer = pipeline.start({"build_id": "abcd", "bytes": 10, "sha256": "0" * 64, "parts": [2]})
    assert refused(answer, 400, "bad_request") and answer.json()["error"]["fields"] == {"parts": ["2"]}


@pytest.mark.parametrize(("scope", "status"), [(None, 401), ("bogus", 401), ("read", 403), ("report", 403),
                                               ("triage", 403)])
def test_uploads_need_a_symbols_token(
    pipeline: Pipeline, make_token: Callable[..., str], scope: str | None, status: int,
) -> None:
    body = {"build_id": "abcd", "bytes": 10, "sha256": "0" * 64}
    token = {None: "", "bogus": "crs_nope_nope"}.get(scope) if scope in (None, "bogus") else make_token(scope)
    headers = auth(token) if token else {}
    answer = requests.post(f"{pipeline.url}/api/v1/symbols/uploads", json=body, headers=headers, timeout=30)
    assert answer.status_code == status, answer.text
    if status == 403:  # the message names every scope that would do: admin's too
        assert answer.json()["error"]["message"].endswith("a token of scope symbols or admin does")
    completion = requests.post(f"{pipeline.url}/api/v1/symbols/uploads/1/complete",
                               json={"parts": [{"number": 1, "md5": "0" * 32}]}, headers=headers, timeout=30)
    assert completion.status_code == status


def test_an_admin_token_may_upload(pipeline: Pipeline, make_token: Callable[..., str],
                                   symbol_programs: dict[str, Program]) -> None:
    program = symbol_programs["uploaded"]
    admin = Pipeline(pipeline.url, make_token("admin"), pipeline.scratch)
    assert admin.upload(program.debug.read_bytes(), program.build_id).json()["new_kinds"] == ["debuginfo"]


def test_completing_an_unknown_upload_is_a_404(pipeline: Pipeline) -> None:
    refused(pipeline.complete("999999", b"x"), 404, "not_found")


def test_a_completion_whose_answer_was_lost_is_finished_when_asked_again(
    pipeline: Pipeline, database: Database, settings: Settings, symbol_programs: dict[str, Program],
) -> None:
    program = symbol_programs["uploaded"]
    data = program.debug.read_bytes()
    answer = pipeline.start({"build_id": program.build_id, "bytes": len(data),
                             "sha256": hashlib.sha256(data).hexdigest()}).json()
    assert put(answer["part_urls"][0]["url"], data, content_md5(data)).status_code == 200
    store = open_store(settings.dump_store, settings.public_url)
    with database.session() as session:  # the store joined the parts; the registry's answer was lost
        upload = session.scalars(select(SymbolUpload)).one()
        store.complete_upload(upload.key, upload.upload_id, store.list_parts(upload.key, upload.upload_id))
    finished = pipeline.complete(answer["upload"]["id"], data)
    assert finished.status_code == 200 and finished.json()["new_kinds"] == ["debuginfo"], finished.text
    assert open_uploads(database) == 0


@pytest.fixture
def big(app: Flask, settings: Settings, tmp_path: Path) -> Program:
    """An executable of three parts: 11 MiB of initialised data, the app's parts 5 MiB."""
    smallest_parts = replace(settings.dump_store, part_size_mb=5)
    app.extensions["crashreg.settings"] = replace(settings, dump_store=smallest_parts)
    return compile_program(tmp_path / "big", "big", "parse_big_header",
                           extra="static volatile char table[11 << 20] = {1}; h->length = table[7];")


def test_a_file_of_several_parts_lands_whole(
    big: Program, pipeline: Pipeline, make_token: Callable[..., str],
) -> None:
    data = big.unstripped.read_bytes()
    assert len(data) > 2 * PART
    progress: list[tuple[int, int]] = []
    answer = pipeline.upload(data, big.build_id, sent=progress)
    assert answer.status_code == 200, answer.text
    assert answer.json()["new_kinds"] == ["debuginfo", "executable"]
    assert progress == [(PART, len(data)), (PART, len(data)), (len(data) - 2 * PART, len(data))]
    again: list[tuple[int, int]] = []
    assert pipeline.upload(data, big.build_id, sent=again).json()["state"] == "stored"
    assert again == []  # held already: nothing to send, no progress
    served = requests.get(f"{pipeline.url}/debuginfod/buildid/{big.build_id}/executable",
                          headers=auth(make_token("read")), timeout=60)
    assert served.content == data


def test_a_resumed_upload_sends_only_the_parts_the_store_lacks(
    big: Program, pipeline: Pipeline, caplog: pytest.LogCaptureFixture,
) -> None:
    data = big.unstripped.read_bytes()
    body = {"build_id": big.build_id, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    first = pipeline.start(body).json()
    assert first["stored_parts"] == []
    assert put(first["part_urls"][0]["url"], data[:PART], content_md5(data[:PART])).status_code == 200
    rejoined = pipeline.start(body).json()  # the pipeline failed; its rerun rejoins
    held = {"number": 1, "bytes": PART, "md5": hashlib.md5(data[:PART]).hexdigest()}
    assert rejoined["stored_parts"] == [held]

    caplog.set_level(logging.INFO, logger="werkzeug")  # the live server's own request log
    caplog.clear()
    progress: list[tuple[int, int]] = []
    answer = pipeline.upload(data, big.build_id, sent=progress)
    assert answer.status_code == 200, answer.text
    assert answer.json()["new_kinds"] == ["debuginfo", "executable"]
    assert sum(part for part, _ in progress) == len(data)  # the part sent before counts too
    sent = sorted(int(line.split("/parts/")[1].split("?")[0]) for line in caplog.messages
                  if '"PUT ' in line and "/parts/" in line)
    assert sent == [2, 3]


def test_a_file_recorded_in_another_store_is_not_served_and_is_taken_again(
    pipeline: Pipeline, app: Flask, database: Database, settings: Settings, tmp_path: Path,
    symbol_programs: dict[str, Program], make_token: Callable[..., str],
) -> None:
    """What `crashreg symbols upload` run in another directory leaves (its store is the local
    default there): a record of an object this registry's store lacks. Nothing trips on it (a
    rebuild's fetch gets no file, the debuginfod route a 404), and the file sent again is kept
    here, its record replacing the lost one."""
    program = symbol_programs["uploaded"]
    elsewhere = open_store(replace(settings.dump_store, url=str(tmp_path / "elsewhere")), settings.public_url)
    by_hand = Origin("upload", "cli:someone")
    assert keep_file(database, elsewhere, program.debug, by_hand, serving=False).new_kinds == ("debuginfo",)
    with app.app_context():
        assert current_sources().find(program.build_id, wait=True) is None
    reader = make_token("read")
    served = f"{pipeline.url}/debuginfod/buildid/{program.build_id}/debuginfo"
    assert requests.get(served, headers=auth(reader), timeout=60).status_code == 404
    again = pipeline.upload(program.debug.read_bytes(), program.build_id)
    assert again.status_code == 200 and again.json()["new_kinds"] == ["debuginfo"], again.text
    assert stored(database) == [(program.build_id, "debuginfo", "ci-release")]
    answer = requests.get(served, headers=auth(reader), timeout=60)
    assert answer.status_code == 200 and answer.content == program.debug.read_bytes()
    # the command run there again takes nothing over: the record is the serving store's now
    assert keep_file(database, elsewhere, program.debug, by_hand, serving=False).new_kinds == ()
    assert requests.get(served, headers=auth(reader), timeout=60).status_code == 200
