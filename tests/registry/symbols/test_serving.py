"""The registry speaks debuginfod at /debuginfod/: elfutils' own client and gdb, given
DEBUGINFOD_URLS=<registry>/debuginfod/ and a read token in DEBUGINFOD_HEADERS_FILE, get what
the store holds and what the configured servers have (kept for next time); without a token,
nothing."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from flask import Flask
from sqlalchemy import select

from registry.config import SymbolSettings
from registry.db import Database
from registry.rca.commands import write_bundle
from registry.signatures.userspace import core_commands
from registry.storage.store import open_store
from registry.symbols.keep import Origin, keep_file
from registry.symbols.models import SymbolFile
from testkit.reports import crash_report
from tests.support.cores import core_pattern_problem, crash
from tests.support.http import auth
from tests.support.symbols import Debuginfod, Program, client_env
from tests.support.userspace import stack


@pytest.fixture
def registry(app: Flask, live_server: str, upstream_debuginfod: Debuginfod, tmp_path: Path) -> str:
    """The registry on a socket (its public URL), federating to the upstream debuginfod."""
    settings = app.extensions["crashreg.settings"]
    symbols = SymbolSettings(debuginfod_urls=(upstream_debuginfod.url,),
                             cache_dir=str(tmp_path / "registry-cache"))
    app.extensions["crashreg.settings"] = replace(settings, public_url=live_server, symbols=symbols)
    return live_server


def uploaded(app: Flask, database: Database, program: Program) -> None:
    settings = app.extensions["crashreg.settings"]
    store = open_store(settings.dump_store, settings.public_url)
    assert keep_file(database, store, program.debug, Origin("upload", "ci")).new_kinds == ("debuginfo",)


def debuginfod_find(tmp_path: Path, registry: str, token: str | None,
                    *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["debuginfod-find", *args], env=client_env(tmp_path, registry, token),
                          capture_output=True, text=True, timeout=120, check=False)


def test_debuginfod_find_gets_the_uploaded_file_byte_identical(
    app: Flask, database: Database, registry: str, make_token: Callable[..., str], tmp_path: Path,
    symbol_programs: dict[str, Program],
) -> None:
    program = symbol_programs["uploaded"]
    uploaded(app, database, program)
    found = debuginfod_find(tmp_path, registry, make_token("read"), "debuginfo", program.build_id)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).read_bytes() == program.debug.read_bytes()


def test_without_a_token_debuginfod_find_is_refused(
    app: Flask, database: Database, registry: str, tmp_path: Path, symbol_programs: dict[str, Program],
    make_token: Callable[..., str],
) -> None:
    program = symbol_programs["uploaded"]
    uploaded(app, database, program)
    refused = debuginfod_find(tmp_path, registry, None, "debuginfo", program.build_id)
    assert refused.returncode != 0 and refused.stdout == ""
    url = f"{registry}/debuginfod/buildid/{program.build_id}/debuginfo"
    assert requests.get(url, timeout=30).status_code == 401
    assert requests.get(url, headers=auth("crs_not_a_token"), timeout=30).status_code == 401
    assert requests.get(url, headers=auth(make_token("report")), timeout=30).status_code == 403


def test_what_the_upstream_server_has_is_federated_and_kept(
    registry: str, database: Database, make_token: Callable[..., str], tmp_path: Path,
    symbol_programs: dict[str, Program], upstream_debuginfod: Debuginfod,
) -> None:
    program = symbol_programs["upstream"]
    token = make_token("read")
    for kind, expected in (("debuginfo", program.debug), ("executable", program.stripped)):
        found = debuginfod_find(tmp_path, registry, token, kind, program.build_id)
        assert found.returncode == 0, found.stderr
        assert Path(found.stdout.strip()).read_bytes() == expected.read_bytes()
    with database.session() as session:
        query = select(SymbolFile).order_by(SymbolFile.kind)
        kept = [(r.kind, r.source, r.origin) for r in session.scalars(query)]
    assert kept == [("debuginfo", "debuginfod", upstream_debuginfod.url),
                    ("executable", "debuginfod", upstream_debuginfod.url)]


def test_sources_come_from_the_upstream_server(
    registry: str, make_token: Callable[..., str], tmp_path: Path, symbol_programs: dict[str, Program],
) -> None:
    program = symbol_programs["upstream"]
    source = program.unstripped.parent / f"{program.name}.c"
    found = debuginfod_find(tmp_path, registry, make_token("read"), "source", program.build_id, str(source))
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).read_text() == source.read_text()


def test_unknown_build_ids_and_bad_paths_are_4xx(registry: str, make_token: Callable[..., str]) -> None:
    token = auth(make_token("read"))
    base = f"{registry}/debuginfod/buildid"
    assert requests.get(f"{base}/{'ab' * 20}/debuginfo", headers=token, timeout=60).status_code == 404
    assert requests.get(f"{base}/xyz/debuginfo", headers=token, timeout=30).status_code == 404
    assert requests.get(f"{base}/abc/executable", headers=token, timeout=30).json()["error"]["fields"] == {
        "build_id": ["abc"]}
    assert requests.get(f"{base}/{'ab' * 20}/section/.text", headers=token, timeout=30).status_code == 404


def test_gdb_names_the_function_of_a_stripped_programs_core_with_symbols_from_the_registry(
    app: Flask, database: Database, registry: str, make_token: Callable[..., str], tmp_path: Path,
    symbol_programs: dict[str, Program],
) -> None:
    if problem := core_pattern_problem():
        pytest.skip(problem)
    program = symbol_programs["uploaded"]
    core = crash(program.stripped, None, tmp_path / "crash")
    gdb = ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled on", "-ex", "bt", str(program.stripped),
           str(core)]

    def backtrace(attempt: str) -> str:
        (tmp_path / attempt).mkdir()
        done = subprocess.run(gdb, env=client_env(tmp_path / attempt, registry, make_token("read")),
                              capture_output=True, text=True, timeout=300, check=False)
        return done.stdout + done.stderr

    assert program.function not in backtrace("before")  # the store has nothing yet
    uploaded(app, database, program)
    named = backtrace("after")
    assert f"in {program.function} (" in named, named
    assert f"{program.name}.c:" in named, named
    # the command the event's page and API give for its core, run as given with $TOKEN alone
    [given] = core_commands(registry, 1, {"executable": str(program.stripped), "pid": None},  # type: ignore[typeddict-item]
                            "host", [{"id": 1, "method": "core"}], {})
    (tmp_path / "given").mkdir()
    env = {key: value for key, value in client_env(tmp_path / "given", registry, None).items()
           if key != "DEBUGINFOD_URLS"} | {"TOKEN": make_token("read")}
    command = given["open"].replace(given["file"], str(core)) + " -nx -batch -ex bt"
    done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert f"in {program.function} (" in done.stdout + done.stderr, given["open"] + done.stdout + done.stderr


def test_a_source_path_leaving_its_tree_is_a_400(registry: str, make_token: Callable[..., str]) -> None:
    url = f"{registry}/debuginfod/buildid/{'ab' * 20}/source/..%2f..%2fetc/passwd"
    answer = requests.get(url, headers=auth(make_token("read")), timeout=30)
    assert answer.status_code == 400, answer.text
    assert "not an absolute source path" in answer.json()["error"]["message"]


def test_a_source_path_no_file_system_could_hold_is_a_400(
    registry: str, make_token: Callable[..., str]
) -> None:
    """A name past NAME_MAX, or a path past PATH_MAX, names no file anywhere: a 400, never the
    cache's OSError (ENAMETOOLONG) as a 500."""
    for path in ("src/" + "a" * 5000 + ".c", "/".join(["src"] * 1500)):
        url = f"{registry}/debuginfod/buildid/{'ab' * 20}/source/{path}"
        answer = requests.get(url, headers=auth(make_token("read")), timeout=30)
        assert answer.status_code == 400, answer.text
        assert "longer than a file system allows" in answer.json()["error"]["message"]


def test_the_triage_workspace_reaches_the_registrys_debuginfod(
    app: Flask, database: Database, registry: str, make_token: Callable[..., str], tmp_path: Path,
    symbol_programs: dict[str, Program],
) -> None:
    program = symbol_programs["uploaded"]
    uploaded(app, database, program)
    report = crash_report(source="userspace", console_log=None, stack=stack(build_id=program.build_id))
    posted = requests.post(f"{registry}/api/v1/reports", json=report, headers=auth(make_token("report")),
                           timeout=60)
    assert posted.status_code == 201, posted.text
    read = make_token("read")
    bundle = requests.get(f"{registry}/api/v1/signatures/{posted.json()['signature']['id']}/triage-bundle",
                          headers=auth(read), timeout=60).json()
    assert bundle["debuginfod"] == {"urls": f"{registry}/debuginfod/", "headers_file": "debuginfod-headers"}
    assert f"export DEBUGINFOD_URLS={registry}/debuginfod/ " in bundle["agents_md"]

    out = tmp_path / "bundle"
    write_bundle(bundle, out)
    env = {"PATH": "/usr/bin:/bin", "CRASHREG_TOKEN": read, "CRASHREG_WORKSPACE_SOURCE": "0"}
    subprocess.run(["sh", "setup.sh"], cwd=out, env=env, capture_output=True, text=True, timeout=300)
    headers = out / bundle["debuginfod"]["headers_file"]
    assert headers.stat().st_mode & 0o077 == 0  # the token is for its owner's eyes
    found = subprocess.run(
        ["debuginfod-find", "debuginfo", program.build_id], capture_output=True, text=True, timeout=120,
        env=env | {"DEBUGINFOD_URLS": bundle["debuginfod"]["urls"], "DEBUGINFOD_HEADERS_FILE": str(headers),
                   "DEBUGINFOD_CACHE_PATH": str(tmp_path / "client-cache")})
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).read_bytes() == program.debug.read_bytes()


def dumped_section(elf: Path, name: str, scratch: Path) -> bytes:
    """A section's raw contents as binutils dumps them (objcopy), not as the registry reads them."""
    scratch.mkdir(parents=True, exist_ok=True)
    dumped = scratch / f"{elf.name}{name}"
    subprocess.run(["objcopy", "--dump-section", f"{name}={dumped}", str(elf), str(scratch / "copy")],
                   check=True, capture_output=True)
    return dumped.read_bytes()


def test_a_section_comes_from_the_debug_info_else_from_the_executable(
    registry: str, make_token: Callable[..., str], tmp_path: Path, symbol_programs: dict[str, Program],
) -> None:
    """As elfutils' server answers /section/: .debug_line from the debug file; .text, which the
    debug file holds only as SHT_NOBITS (objcopy --only-keep-debug), from the executable. Both
    federated from the upstream server here. elfutils' client falls back to fetching whole
    files when a server has no /section/, so the registry's answer is checked on the wire too."""
    program = symbol_programs["upstream"]
    token = make_token("read")
    for name, holder in ((".debug_line", program.debug), (".text", program.stripped)):
        expected = dumped_section(holder, name, tmp_path / "objcopy")
        assert expected  # a section with contents
        answer = requests.get(f"{registry}/debuginfod/buildid/{program.build_id}/section/{name}",
                              headers=auth(token), timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.content == expected, name
        assert answer.headers["X-DEBUGINFOD-SIZE"] == str(len(expected))
        (tmp_path / name).mkdir()  # the client's cache of its own: nothing fetched before
        found = debuginfod_find(tmp_path / name, registry, token, "section", program.build_id, name)
        assert found.returncode == 0, found.stderr
        assert Path(found.stdout.strip()).read_bytes() == expected, name


def test_a_section_no_file_holds_with_contents_is_a_404_and_needs_a_token(
    app: Flask, database: Database, registry: str, make_token: Callable[..., str],
    symbol_programs: dict[str, Program],
) -> None:
    """Only the debug file is uploaded (no executable here or upstream): its .text is
    SHT_NOBITS, so there is no .text to serve; nor any section it lacks."""
    program = symbol_programs["uploaded"]
    uploaded(app, database, program)
    base = f"{registry}/debuginfod/buildid/{program.build_id}/section"
    token = auth(make_token("read"))
    assert requests.get(f"{base}/.debug_info", headers=token, timeout=60).status_code == 200
    for name in (".text", ".no_such_section"):
        answer = requests.get(f"{base}/{name}", headers=token, timeout=60)
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["fields"] == {"section": [name]}
    reporter = auth(make_token("report"))
    assert requests.get(f"{base}/.debug_info", timeout=30).status_code == 401
    assert requests.get(f"{base}/.debug_info", headers=reporter, timeout=30).status_code == 403


def test_a_server_still_sending_is_a_503_and_the_worker_is_let_go(
    app: Flask, live_server: str, make_token: Callable[..., str], tmp_path: Path,
) -> None:
    """A debuginfod server trickling its file held the request's worker (which serves reports
    too) until gunicorn killed it at 60 s: a 500, and no miss remembered. Now the request waits
    CRASHREG_DEBUGINFOD_REQUEST_WAIT_S, then a 503 with Retry-After while the fetch goes on in
    the background (bounded by CRASHREG_DEBUGINFOD_MAXTIME_S); asked again after, a 404."""
    from registry.symbols.api import current_sources
    from tests.support.symbols import CountingServer

    slow = CountingServer(b"\x7fELF" + b"\0" * 4096, trickle_s=0.2)
    settings = app.extensions["crashreg.settings"]
    symbols = SymbolSettings(debuginfod_urls=(slow.url,), cache_dir=str(tmp_path / "cache"), max_time_s=2.0,
                             request_wait_s=0.2)
    app.extensions["crashreg.settings"] = replace(settings, public_url=live_server, symbols=symbols)
    read = make_token("read")
    path = f"{live_server}/debuginfod/buildid/{'ab' * 20}/debuginfo"
    try:
        waiting = requests.get(path, headers=auth(read), timeout=30)
        assert waiting.status_code == 503, waiting.text
        assert waiting.headers["Retry-After"] == "10"
        assert "still being fetched" in waiting.json()["error"]["message"]
        with app.app_context():
            current_sources().settle(timeout_s=60)
        assert requests.get(path, headers=auth(read), timeout=30).status_code == 404
    finally:
        slow.stop()
    assert len(slow.requests) == 1
