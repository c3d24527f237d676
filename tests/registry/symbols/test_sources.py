"""SymbolSources: the store first, then the debuginfod servers of CRASHREG_DEBUGINFOD_URLS in
order, a negative cache, background fetches that never hold the caller."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

from registry.config import Settings, SymbolSettings
from registry.db import Database
from registry.storage.store import open_store
from registry.symbols.keep import Origin, keep_file
from registry.symbols.models import SymbolFile
from registry.symbols.sources import SymbolsArrived, SymbolSources
from tests.support.http import closed_port
from tests.support.symbols import CountingServer, Debuginfod, Program

UNKNOWN = "0123456789abcdef0123456789abcdef01234567"


def symbol_settings(settings: Settings, tmp_path: Path, *servers: str, ttl_s: int = 600,
                    max_time_s: float = 300.0) -> Settings:
    symbols = SymbolSettings(debuginfod_urls=servers, cache_dir=str(tmp_path / "symbol-cache"), timeout_s=10,
                             negative_ttl_s=ttl_s, max_time_s=max_time_s)
    return replace(settings, symbols=symbols)


@pytest.fixture
def sources_for(settings: Settings, database: Database, tmp_path: Path) -> Iterator:
    made: list[SymbolSources] = []

    def make(*servers: str, ttl_s: int = 600, cache: str = "a", max_time_s: float = 300.0) -> SymbolSources:
        chosen = symbol_settings(settings, tmp_path / cache, *servers, ttl_s=ttl_s, max_time_s=max_time_s)
        sources = SymbolSources(chosen, database)
        made.append(sources)
        return sources

    yield make
    for sources in made:
        sources.close()


def rows(database: Database) -> list[tuple[str, str, str, str]]:
    with database.session() as session:
        return [(r.build_id, r.kind, r.source, r.origin)
                for r in session.scalars(select(SymbolFile).order_by(SymbolFile.kind))]


def test_a_servers_debug_file_is_fetched_checked_kept_and_announced(
    sources_for, database: Database, symbol_programs: dict[str, Program], upstream_debuginfod: Debuginfod,
    counting_server: CountingServer,
) -> None:
    program = symbol_programs["upstream"]
    sources: SymbolSources = sources_for(counting_server.url, upstream_debuginfod.url)
    heard: list[SymbolsArrived] = []
    sources.on_symbols_arrived(heard.append)

    found = sources.find(program.build_id, "debuginfo", wait=True)

    assert found is not None and found.read_bytes() == program.debug.read_bytes()
    # tried in order: the first server (which has nothing) was asked first
    assert counting_server.requests == [f"/buildid/{program.build_id}/debuginfo"]
    assert rows(database) == [(program.build_id, "debuginfo", "debuginfod", upstream_debuginfod.url)]
    assert heard == [SymbolsArrived(program.build_id, ("debuginfo",), "debuginfod")]
    # another process with no server at all finds it in the store
    elsewhere: SymbolSources = sources_for(f"http://127.0.0.1:{closed_port()}", cache="b")
    again = elsewhere.find(program.build_id, "debuginfo", wait=False)
    assert again is not None and again.read_bytes() == program.debug.read_bytes()


def test_the_executable_is_served_from_the_servers_stripped_program(
    sources_for, symbol_programs: dict[str, Program], upstream_debuginfod: Debuginfod,
) -> None:
    program = symbol_programs["upstream"]
    found = sources_for(upstream_debuginfod.url).find(program.build_id.upper(), "executable", wait=True)
    assert found is not None and found.read_bytes() == program.stripped.read_bytes()


def test_a_miss_is_remembered_for_its_ttl_and_forgotten_when_symbols_arrive(
    sources_for, database: Database, settings: Settings, symbol_programs: dict[str, Program],
    counting_server: CountingServer,
) -> None:
    program = symbol_programs["uploaded"]
    sources: SymbolSources = sources_for(counting_server.url)
    assert sources.find(program.build_id, wait=True) is None
    assert sources.find(program.build_id, wait=True) is None
    assert sources.find(program.build_id, wait=False) is None
    sources.settle()
    assert len(counting_server.requests) == 1  # remembered: asked once
    assert sources.find(program.build_id, "executable", wait=True) is None  # another artifact: asked
    assert len(counting_server.requests) == 2

    store = open_store(settings.dump_store, settings.public_url)
    kept = keep_file(database, store, program.debug, Origin("upload", "pipeline"))
    sources.arrived(SymbolsArrived(program.build_id, kept.new_kinds, "upload"))
    found = sources.find(program.build_id, wait=False)
    assert found is not None and found.read_bytes() == program.debug.read_bytes()


def test_a_miss_past_its_ttl_is_asked_again(sources_for, counting_server: CountingServer) -> None:
    sources: SymbolSources = sources_for(counting_server.url, ttl_s=0)
    assert sources.find(UNKNOWN, wait=True) is None
    assert sources.find(UNKNOWN, wait=True) is None
    assert len(counting_server.requests) == 2


def test_without_waiting_a_miss_is_fetched_in_the_background(
    sources_for, symbol_programs: dict[str, Program], upstream_debuginfod: Debuginfod,
) -> None:
    program = symbol_programs["upstream"]
    sources: SymbolSources = sources_for(upstream_debuginfod.url)
    heard: list[SymbolsArrived] = []
    sources.on_symbols_arrived(heard.append)
    assert sources.find(program.build_id, wait=False) is None
    sources.settle()
    assert heard == [SymbolsArrived(program.build_id, ("debuginfo",), "debuginfod")]
    found = sources.find(program.build_id, wait=False)
    assert found is not None and found.read_bytes() == program.debug.read_bytes()


def test_a_server_answering_another_builds_file_is_not_believed(
    sources_for, database: Database, symbol_programs: dict[str, Program],
) -> None:
    liar = CountingServer(symbol_programs["upstream"].debug.read_bytes())
    try:
        sources: SymbolSources = sources_for(liar.url)
        assert sources.find(symbol_programs["uploaded"].build_id, wait=True) is None
    finally:
        liar.stop()
    assert rows(database) == []


def test_unreachable_servers_are_a_miss_not_an_error(sources_for) -> None:
    sources: SymbolSources = sources_for(f"http://127.0.0.1:{closed_port()}")
    assert sources.find(UNKNOWN, "executable", wait=True) is None


@pytest.mark.parametrize(("build_id", "kind"), [("xyz", "debuginfo"), ("abc", "debuginfo"), ("", "debuginfo"),
                                                 ("ab" * 65, "debuginfo"), (UNKNOWN, "source")])
def test_a_malformed_request_is_refused(sources_for, build_id: str, kind: str) -> None:
    with pytest.raises(ValueError):
        sources_for().find(build_id, kind, wait=False)


@pytest.mark.parametrize("path", ["../etc/passwd", "/usr/src/../../etc/passwd", "/a/../b", "/", "x\0y"])
def test_a_source_path_that_could_leave_the_cache_is_refused(sources_for, path: str) -> None:
    with pytest.raises(ValueError, match="not an absolute source path"):
        sources_for().source_file(UNKNOWN, path)


@pytest.mark.parametrize("how", ["trickle", "cut"])
def test_a_server_that_never_sends_its_file_whole_is_a_miss(
        sources_for, database: Database, how: str) -> None:
    """A server sending a byte every few tenths of a second kept every read within the read
    timeout and held the fetch for good (the file's whole transfer is bounded now, as
    DEBUGINFOD_MAXTIME does); one that closes before the length it announced gave half a file."""
    server = CountingServer(b"\x7fELF" + b"\0" * 4096, trickle_s=0.2 if how == "trickle" else None,
                            cut=how == "cut")
    try:
        sources: SymbolSources = sources_for(server.url, max_time_s=1.0)
        assert sources.find(UNKNOWN, "debuginfo", wait=True) is None
        assert sources.find(UNKNOWN, "debuginfo", wait=True) is None  # remembered: not asked again
    finally:
        server.stop()
    assert len(server.requests) == 1
    assert rows(database) == []
    assert not list((Path(sources.cache) / UNKNOWN).glob("*"))
