"""A build's symbol table first, its DWARF later, as a pipeline that ships its `strip -g`
binary before the debug file uploads them: the crashes are named by the table at once, and
when the DWARF arrives their frames get file:line, in the process that took the file, in
another process that had made its symcache from the table, and through the scheduler's job
when the file came from the command line; real crashes of a stripped C program in two
releases, both databases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from flask import Flask
from sqlalchemy import select

from registry.app import create_app
from registry.config import Settings
from registry.core.events import Report
from registry.db import Database
from registry.symbolication.service import APP_SYMBOLICATOR, Symbolicator
from registry.symbols.models import SymbolFile
from tests.support.cli import crashreg_for
from tests.support.http import auth
from tests.support.releases import LANGUAGES, Release, releases  # noqa: F401 (fixture)
from tests.support.reported_releases import post, reported_without_symbols, settle, signatures_of
from tests.support.symbols import Pipeline, symbol_tables_of

FUNCTION = LANGUAGES["c"][2]


def guilty_frame(client: Any, token: str, database: Database, report_id: str) -> dict[str, Any]:
    """The guilty frame of the report's event, as the event API gives it."""
    with database.session() as session:
        event_id = session.scalar(select(Report.event_id).where(Report.report_id == report_id))
    frames = client.get(f"/api/v1/events/{event_id}", headers=auth(token)).json["userspace"]["frames"]
    [guilty] = [frame for frame in frames if frame["decision"] == "guilty"]
    return guilty


def assert_lines(client: Any, token: str, database: Database, report_id: str, release: Release) -> None:
    guilty = guilty_frame(client, token, database, report_id)
    assert guilty["function"] == FUNCTION
    assert Path(guilty["file"]).name == release.source.name and guilty["line"] > 0, guilty


def tables(pair: tuple[Release, Release], directory: Path) -> list[Path]:
    """Each release's symbol table, in a debug file of its own."""
    return [symbol_tables_of(release.unstripped, directory / str(release.number))[1] for release in pair]


def test_dwarf_uploaded_after_the_table_gives_every_process_file_and_line(
    app: Flask, live_server: str, settings: Settings, database: Database, tmp_path: Path,
    make_token: Callable[..., str], releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    pair = first, second = releases["c"]
    reporter, reader = make_token("report"), make_token("read")
    client = reported_without_symbols(app, database, reporter, pair)
    pipeline = Pipeline(live_server, make_token("symbols", name="ci-release"), tmp_path)
    for release, table in zip(pair, tables(pair, tmp_path / "tables"), strict=True):
        assert pipeline.upload(table.read_bytes(), release.build_id).json()["new_kinds"] == ["debuginfo"]
    settle(app)
    assert list(signatures_of(database).values()) == [(FUNCTION, 2)]
    assert guilty_frame(client, reader, database, first.report["report_id"])["file"] is None

    # another process (its own symbol cache) names a crash of the first release from the table
    elsewhere = replace(settings.symbols, cache_dir=str(tmp_path / "other"))
    other = create_app(replace(settings, symbols=elsewhere), database)
    other_client = other.test_client()
    post(other_client, reporter, first, report_id="late-1")
    settle(other)
    others: Symbolicator = other.extensions[APP_SYMBOLICATOR]
    assert others.symcaches.lines(first.build_id) is False

    for release in pair:
        answer = pipeline.upload(release.debug.read_bytes(), release.build_id)
        assert answer.json()["new_kinds"] == ["debuginfo"], answer.text
    settle(app)

    for release, report_id in ((first, first.report["report_id"]), (second, second.report["report_id"]),
                               (first, "late-1")):
        assert_lines(client, reader, database, report_id, release)
    assert list(signatures_of(database).values()) == [(FUNCTION, 3)]
    # the other process looks for replaced tables (at most once a minute; here at its next report)
    others.replacements_poll_s = 0
    post(other_client, reporter, first, report_id="late-2")
    settle(other)
    assert others.symcaches.lines(first.build_id) is True
    post(other_client, reporter, first, report_id="late-3")
    assert_lines(other_client, reader, database, "late-3", first)


def test_dwarf_from_the_command_line_is_applied_by_the_scheduler(
    settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    """`crashreg symbols upload` in a process of its own, table then DWARF: no process hears of
    it; the symbols-arrived job makes the symcaches again and symbolicates the events once."""
    from sync.scheduler import JobContext
    from sync.symbolication.jobs import symbols_arrived

    pair = first, second = releases["c"]
    app = create_app(settings, database)
    client = reported_without_symbols(app, database, make_token("report"), pair)
    assert crashreg_for(settings, "symbols", "upload", *map(str, tables(pair, tmp_path))).returncode == 0
    assert symbols_arrived(JobContext(settings, database))["refingerprinted"] == 2
    reader = make_token("read")
    assert guilty_frame(client, reader, database, first.report["report_id"])["file"] is None

    uploaded = crashreg_for(settings, "symbols", "upload", str(first.debug), str(second.debug))
    assert uploaded.returncode == 0, uploaded.stderr
    assert f"{first.build_id} {first.debug}: stored as debuginfo" in uploaded.stdout
    ran = symbols_arrived(JobContext(settings, database))

    assert ran["build_ids"] == 2 and ran["events"] == 2
    for release in pair:
        assert_lines(client, reader, database, release.report["report_id"], release)
    with database.session() as session:
        done = session.scalars(select(SymbolFile.resymbolicated_at).where(SymbolFile.kind == "debuginfo"))
        assert all(when is not None for when in done)
    assert symbols_arrived(JobContext(settings, database)) == {"build_ids": 0, "notes_forgotten": 0}
    settle(app)
