"""Retention of symbol files: a build-id a stored report names keeps its files for good; a
file of a build that never crashed goes after CRASHREG_RETENTION_SYMBOL_DAYS, if set."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select, update

from registry.config import RetentionSettings, Settings
from registry.core.events import Report
from registry.db import Database, utcnow
from registry.migrate import downgrade, upgrade
from registry.retention.gc import collect
from registry.retention.models import NamedBuildId, ScanMark
from registry.retention.symbols import BATCH, NAMED_SCAN, build_ids_named, scan_named_build_ids
from registry.storage.store import DumpStore, local_root, open_store, store_location
from registry.symbols.keep import Origin, keep_file, object_key
from registry.symbols.models import SymbolFile, SymbolUpload
from testkit.reports import crash_report
from tests.support.cores import core_pattern_problem, crash
from tests.support.http import auth
from tests.support.symbols import Program, client_env, dwz_shared, symbol_programs  # noqa: F401 (fixture)
from tests.support.userspace import stack


@pytest.fixture
def store(settings: Settings) -> DumpStore:
    return open_store(settings.dump_store, settings.public_url)


def kept_build_ids(database: Database) -> set[str]:
    with database.session() as session:
        return set(session.scalars(select(SymbolFile.build_id)))


def test_only_files_no_report_names_go_and_only_past_their_age(
    client: FlaskClient, database: Database, settings: Settings, store: DumpStore,
    make_token: Callable[..., str], symbol_programs: dict[str, Program],  # noqa: F811
) -> None:
    crashed, never = symbol_programs["uploaded"], symbol_programs["upstream"]
    for program in (crashed, never):
        keep_file(database, store, program.unstripped, Origin("upload", "ci"))
    report = crash_report(source="userspace", console_log=None, stack=stack(build_id=crashed.build_id))
    assert client.post("/api/v1/reports", json=report, headers=auth(make_token("report"))).status_code == 201
    later = utcnow() + timedelta(days=91)

    assert collect(database, store, settings, now=later).symbols_deleted == 0  # kept unless asked
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    assert collect(database, store, aged, now=utcnow() + timedelta(days=89)).symbols_deleted == 0
    dry = collect(database, store, aged, dry_run=True, now=later)
    assert (dry.symbols_deleted, kept_build_ids(database)) == (2, {crashed.build_id, never.build_id})

    outcome = collect(database, store, aged, now=later)
    # its two kinds were one object: its bytes count once
    assert (outcome.symbols_deleted, outcome.symbol_bytes_freed) == (2, never.unstripped.stat().st_size)
    assert kept_build_ids(database) == {crashed.build_id}
    root = local_root(settings.dump_store.url)
    assert isinstance(root, Path)
    assert list((root / "symbols" / never.build_id).glob("*")) == []
    assert len(list((root / "symbols" / crashed.build_id).glob("*"))) == 1
    assert "symbol files: deleted 2" in outcome.summary()


def test_a_kept_debug_file_keeps_the_supplementary_file_it_links_to(
    client: FlaskClient, database: Database, settings: Settings, store: DumpStore,
    make_token: Callable[..., str], tmp_path: Path,
) -> None:
    """dwz -m moves the DWARF two builds share into a file no report names: a crashed build's
    debug file is unreadable without it (gdb loses file:line and types)."""
    shared = dwz_shared(tmp_path / "dwz")
    crashed, never = shared.programs
    for path in (crashed.debug, never.debug, shared.common):
        keep_file(database, store, path, Origin("upload", "ci"))
    post_naming(client, database, make_token("report"), crashed.build_id)
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))

    for _ in range(2):  # a file that linked to it, deleted later in a run, lets it go the next
        collect(database, store, aged, now=utcnow() + timedelta(days=91))
    assert kept_build_ids(database) == {crashed.build_id, shared.common_build_id}
    served = client.get(f"/debuginfod/buildid/{shared.common_build_id}/debuginfo",
                        headers=auth(make_token("read")))
    assert (served.status_code, served.data) == (200, shared.common.read_bytes())


def test_gdb_reads_a_dwz_builds_core_from_the_registry_after_the_gc(
    client: FlaskClient, database: Database, settings: Settings, store: DumpStore, live_server: str,
    make_token: Callable[..., str], tmp_path: Path,
) -> None:
    """The engineer's view: gdb on the crashed build's core, its debug info through the
    registry's debuginfod once symbol retention ran, still has source lines and types."""
    if problem := core_pattern_problem():
        pytest.skip(problem)
    shared = dwz_shared(tmp_path / "dwz")
    crashed, never = shared.programs
    core = crash(crashed.stripped, None, tmp_path / "crash")
    for path in (crashed.debug, never.debug, shared.common):
        keep_file(database, store, path, Origin("upload", "ci"))
    post_naming(client, database, make_token("report"), crashed.build_id)
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    for _ in range(2):
        collect(database, store, aged, now=utcnow() + timedelta(days=91))

    gdb = ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled on", "-ex", "bt",
           "-ex", "ptype struct header", str(crashed.stripped), str(core)]
    done = subprocess.run(gdb, env=client_env(tmp_path, live_server, make_token("read")), capture_output=True,
                          text=True, timeout=300, check=False)
    seen = done.stdout + done.stderr
    assert f"in {crashed.function} (" in seen and f"{crashed.name}.c:" in seen, seen
    assert "int length;" in seen, seen


def test_a_supplementary_file_no_kept_file_links_to_goes(
    database: Database, settings: Settings, store: DumpStore, tmp_path: Path,
) -> None:
    shared = dwz_shared(tmp_path / "dwz")
    for path in (*(program.debug for program in shared.programs), shared.common):
        keep_file(database, store, path, Origin("upload", "ci"))
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    deleted = sum(collect(database, store, aged, now=utcnow() + timedelta(days=91)).symbols_deleted
                  for _ in range(2))
    assert (deleted, kept_build_ids(database)) == (3, set())


def test_files_kept_before_migration_0045_are_read_once_by_the_gc(
    client: FlaskClient, database: Database, db_url: str, settings: Settings, store: DumpStore,
    make_token: Callable[..., str], tmp_path: Path,
) -> None:
    """Keeping files works on a database before 0045 (beside the upgrade); their rows say
    nothing of what their file links to: the gc reads each file once (a dry run too, recording
    nothing) and keeps what a kept file links to."""
    shared = dwz_shared(tmp_path / "dwz")
    crashed, never = shared.programs
    database.dispose()
    downgrade(db_url, "0044_signature_title_by_hand")
    for path in (crashed.debug, never.debug, shared.common):
        assert keep_file(database, store, path, Origin("upload", "ci")).new_kinds == ("debuginfo",)
    database.dispose()
    upgrade(db_url)
    post_naming(client, database, make_token("report"), crashed.build_id)
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    later = utcnow() + timedelta(days=91)

    assert collect(database, store, aged, dry_run=True, now=later).symbols_deleted == 1  # `never` alone
    with database.session() as session:
        assert set(session.scalars(select(SymbolFile.alt_read))) == {False}
    for _ in range(2):
        collect(database, store, aged, now=later)
    assert kept_build_ids(database) == {crashed.build_id, shared.common_build_id}
    with database.session() as session:
        rows = session.scalars(select(SymbolFile))
        links = {row.build_id: (row.alt_read, row.alt_build_id) for row in rows}
    assert links == {crashed.build_id: (True, shared.common_build_id), shared.common_build_id: (True, None)}


def test_a_library_the_crashed_process_only_mapped_keeps_its_symbols(
    client: FlaskClient, database: Database, settings: Settings, store: DumpStore,
    make_token: Callable[..., str], symbol_programs: dict[str, Program],  # noqa: F811
) -> None:
    """A mapping's `build_id` (the object loaded from it, as crashreg-report.pyz core sends it)
    is accepted as the report's own field, and its symbols stay: gdb needs them to read the
    event's core even where no frame is in that library."""
    crashed, library = symbol_programs["uploaded"], symbol_programs["upstream"]
    for program in (crashed, library):
        keep_file(database, store, program.unstripped, Origin("upload", "ci"))
    mapped = {"start": "0x7f0000000000", "end": "0x7f0000001000", "perms": "r--p",
              "path": "/usr/lib/libupstream.so", "build_id": library.build_id}
    report = crash_report(source="userspace", console_log=None,
                          stack=stack(build_id=crashed.build_id, mappings=[mapped]))
    answer = client.post("/api/v1/reports", json=report, headers=auth(make_token("report")))
    assert (answer.status_code, answer.json["warnings"]) == (201, [])
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    assert collect(database, store, aged, now=utcnow() + timedelta(days=91)).symbols_deleted == 0
    assert kept_build_ids(database) == {crashed.build_id, library.build_id}


def test_old_files_kept_for_their_reports_do_not_hold_the_others_back(
    database: Database, settings: Settings, store: DumpStore,
    symbol_programs: dict[str, Program],  # noqa: F811
) -> None:
    """A run looks at every old file, BATCH build-ids at a time: the old files reports name
    stay old, and when they were the first BATCH build-ids a run looked at, no other file ever
    went."""
    never = symbol_programs["upstream"]
    keep_file(database, store, never.unstripped, Origin("upload", "ci"))
    named = [f"{number:040x}" for number in range(1, BATCH + 2)]  # before `never` in order
    with database.session() as session:
        for build_id in named:
            session.add(SymbolFile(build_id=build_id, kind="debuginfo", store=store_location(store),
                                   key=object_key(build_id, "0" * 64), bytes=1, sha256="0" * 64,
                                   source="upload", origin="ci", alt_read=True))
            session.add(NamedBuildId(build_id=build_id, first_report_id=1))
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    assert collect(database, store, aged, now=utcnow() + timedelta(days=91)).symbols_deleted == 2
    assert kept_build_ids(database) == set(named)


def test_an_abandoned_symbol_upload_is_aborted_after_a_week(
    client: FlaskClient, database: Database, settings: Settings, store: DumpStore,
    make_token: Callable[..., str],
) -> None:
    body = {"build_id": "ab" * 20, "bytes": 10, "sha256": "0" * 64}
    started = client.post("/api/v1/symbols/uploads", json=body, headers=auth(make_token("symbols"))).json
    upload_id = started["part_urls"][0]["url"].split("/uploads/")[1].split("/")[0]
    open_parts = Path(str(local_root(settings.dump_store.url))) / ".uploads" / upload_id
    assert open_parts.is_dir()

    assert collect(database, store, settings, now=utcnow() + timedelta(days=6)).symbol_uploads_aborted == 0
    later = utcnow() + timedelta(days=8)
    assert collect(database, store, settings, dry_run=True, now=later).symbol_uploads_aborted == 1
    assert open_parts.is_dir()
    outcome = collect(database, store, settings, now=later)
    assert outcome.symbol_uploads_aborted == 1 and "abandoned uploads aborted: 1" in outcome.summary()
    assert not open_parts.exists()
    with database.session() as session:
        assert session.scalars(select(SymbolUpload)).all() == []


def test_the_build_ids_a_report_names_are_its_build_id_keys_at_any_depth() -> None:
    payload = {"stack": {"build_id": "AB12" * 5, "frames": [{"build_id": "cd34" * 5}, {"offset": "0x10"}],
                         "mappings": [{"path": "/usr/lib/libc.so.6", "build_id": "ef56" * 5}]},
               "dpu": {"modules": [{"name": "nvidia", "build_id": "0a0b" * 5}]},
               "kernel_build_id": "1122" * 5,
               "console_log": "RIP: 0010:ffffffff81234567", "host": {"build_id": "not hex"}}
    assert build_ids_named(payload) == {"ab12" * 5, "cd34" * 5, "ef56" * 5, "0a0b" * 5, "1122" * 5}
    assert build_ids_named(None) == set() and build_ids_named(["ab" * 20]) == set()


def named_rows(database: Database) -> dict[str, int]:
    with database.session() as session:
        return {row.build_id: row.first_report_id for row in session.scalars(select(NamedBuildId))}


def scan_mark(database: Database) -> int | None:
    with database.session() as session:
        mark = session.get(ScanMark, NAMED_SCAN)
        return None if mark is None else mark.position


def post_naming(client: FlaskClient, database: Database, token: str, build_id: str) -> int:
    """The stored report's primary key."""
    report = crash_report(source="userspace", console_log=None, stack=stack(build_id=build_id))
    assert client.post("/api/v1/reports", json=report, headers=auth(token)).status_code == 201
    with database.session() as session:
        return session.scalars(select(Report.id).where(Report.report_id == report["report_id"])).one()


def test_the_scan_of_named_build_ids_resumes_at_its_mark_and_never_passes_a_fresh_report(
    client: FlaskClient, database: Database, make_token: Callable[..., str],
) -> None:
    token, first, second = make_token("report"), "ab" * 20, "cd" * 20
    one = post_naming(client, database, token, first)
    assert scan_named_build_ids(database, utcnow(), print) == 0  # received now: maybe not committed
    assert (named_rows(database), scan_mark(database)) == ({}, 0)

    assert scan_named_build_ids(database, utcnow() + timedelta(hours=1), print) == one
    assert named_rows(database) == {first: one}
    two = post_naming(client, database, token, second)
    again = post_naming(client, database, token, first)
    assert scan_named_build_ids(database, utcnow() + timedelta(hours=1), print) == again > two > one
    assert named_rows(database) == {first: one, second: two}  # the first report to name each


def test_a_fresh_report_past_the_scan_still_keeps_its_build_ids_files(
    client: FlaskClient, database: Database, settings: Settings, store: DumpStore,
    make_token: Callable[..., str], symbol_programs: dict[str, Program],  # noqa: F811
) -> None:
    crashed = symbol_programs["uploaded"]
    keep_file(database, store, crashed.unstripped, Origin("upload", "ci"))
    with database.session() as session:  # stored long ago
        session.execute(update(SymbolFile).values(stored_at=utcnow() - timedelta(days=100)))
    post_naming(client, database, make_token("report"), crashed.build_id)
    aged = replace(settings, retention=RetentionSettings(symbol_days=90))

    assert collect(database, store, aged, now=utcnow()).symbols_deleted == 0
    assert (named_rows(database), kept_build_ids(database)) == ({}, {crashed.build_id})
    assert collect(database, store, aged, now=utcnow() + timedelta(hours=1)).symbols_deleted == 0
    assert set(named_rows(database)) == {crashed.build_id}
