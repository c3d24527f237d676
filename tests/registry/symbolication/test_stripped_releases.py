"""The judged scenario of issue 40: one bug, two stripped releases (the second moves every
offset), C, C++ and Rust, and C whose first release tail-calls the bug's function (a caller
fewer on its stack), crashed for real and read by the core reader as a host would.

- With a real debuginfod in CRASHREG_DEBUGINFOD_URLS: both releases end in ONE signature named
  by the function, with file:line in the event's frames; the next crash lands there at once.
- Reported before any symbols exist: one signature per release, named by offsets; then the
  debug files are uploaded (`crashreg symbols upload`) and `crashreg signatures rebuild` runs:
  the events end in one named signature, counted once, the old fingerprints aliased to it.
Both databases."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from registry.config import Settings, SymbolSettings
from registry.core.events import Report
from registry.db import Database
from registry.storage.store import local_root
from registry.symbolication.models import SymbolMiss
from testkit.pages import login
from tests.support.cli import crashreg_for
from tests.support.http import auth
from tests.support.releases import LANGUAGES, Release, inlining_releases, releases  # noqa: F401 (fixtures)
from tests.support.reported_releases import post, reported_without_symbols, settle, signatures_of
from tests.support.symbols import Debuginfod, defined_symbols, start_debuginfod

LANGUAGE_IDS = list(LANGUAGES)


@pytest.fixture(scope="module")
def release_debuginfod(releases: dict[str, tuple[Release, Release]],  # noqa: F811
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Debuginfod]:
    """elfutils' debuginfod serving every release's debug file (as a distribution's would)."""
    if shutil.which("debuginfod") is None:
        pytest.skip("elfutils' debuginfod is not installed (scripts/test-services.sh installs it)")
    served = tmp_path_factory.mktemp("release-debuginfod") / "files"
    served.mkdir()
    for pair in releases.values():
        for release in pair:
            shutil.copy(release.debug, served / f"{release.language}-{release.number}.debug")
    server = start_debuginfod(served, [r.build_id for pair in releases.values() for r in pair],
                              served.parent / "debuginfod.log")
    yield server
    server.process.terminate()
    server.process.wait(timeout=30)


def with_symbols(settings: Settings, tmp_path: Path, *servers: str) -> Settings:
    symbols = SymbolSettings(debuginfod_urls=servers, cache_dir=str(tmp_path / "symbols"), timeout_s=30)
    return replace(settings, symbols=symbols)


def guilty_frame(client: Any, token: str, event_id: str) -> dict[str, Any]:
    event = client.get(f"/api/v1/events/{event_id}", headers=auth(token)).json
    explanation = event["explanation"]
    return explanation["frames"][explanation["guilty"]]


def assert_frames_named(client: Any, token: str, event_id: str, function: str, release: Release) -> None:
    """The event's frames as the API and the page give them: each frame the report sent, the
    guilty one under the name and source line the registry found for its offset."""
    frames = client.get(f"/api/v1/events/{event_id}", headers=auth(token)).json["userspace"]["frames"]
    guilty = [at for at, frame in enumerate(frames) if frame["decision"] == "guilty"]
    assert len(guilty) == 1, frames
    named = frames[guilty[0]]
    assert named["function"] == function and named["line"] > 0
    assert Path(named["file"]).name == release.source.name
    sent = release.report["stack"]["frames"]
    assert [frame["index"] for frame in frames if frame["index"] is not None] == list(range(len(sent)))
    assert named["offset"] in {frame["offset"] for frame in sent}
    window = next(at for at, frame in enumerate(frames) if frame["decision"])  # the engine's frames
    for frame in frames[window:guilty[0] + 1]:  # each the frame sent, or a call inlined into it
        assert frame["note"] is None or frame["note"].startswith("inlined into frame "), frames
    login(client, token)
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    assert f"<code>{named['file']}:{named['line']}</code>" in page
    assert "red zone" not in page and 'id="no-symbols"' not in page


def test_the_tail_call_release_has_no_frame_of_main(releases: dict[str, tuple[Release, Release]]) -> None:  # noqa: F811
    """What makes c-tail-call a case of its own: its releases' stacks differ by a caller."""
    first, second = releases["c-tail-call"]
    assert second.program_frames() == first.program_frames() + 1  # main's


@pytest.mark.parametrize("language", LANGUAGE_IDS)
def test_two_stripped_releases_give_one_named_signature_from_a_debuginfod(
    language: str, settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    releases: dict[str, tuple[Release, Release]], release_debuginfod: Debuginfod,  # noqa: F811
) -> None:
    from registry.app import create_app

    app = create_app(with_symbols(settings, tmp_path, release_debuginfod.url), database)
    client, token, reader = app.test_client(), make_token("report"), make_token("read")
    first, second = releases[language]
    function = LANGUAGES[language][2]
    answered = post(client, token, first)
    assert "+0x" in answered["signature"]["title"]  # answered before the symbols were fetched
    post(client, token, second)
    settle(app)

    assert signatures_of(database) == {f"{first.report['stack']['signal']} ({labels(first)}) in {function} "
                                       f"[service] of service": (function, 2)}
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(SymbolMiss)) == 0
    # the next crash of either release is named at once, in that signature, with file:line
    answer = post(client, token, second, report_id=f"{second.report['report_id']}-again")
    assert answer["known"] and answer["signature"]["title"].endswith(f"in {function} [service] of service")
    guilty = guilty_frame(client, reader, answer["event_id"])
    assert guilty["function"] == function and guilty["line"] > 0
    assert Path(guilty["file"]).name == second.source.name
    assert_frames_named(client, reader, answer["event_id"], function, second)
    page = client.get(f"/signatures/{answer['signature']['id']}").get_data(as_text=True)
    # The releases' frames lie elsewhere, explained alike; the tail call's stack, a caller fewer,
    # is the signature's second explanation.
    assert ('id="explanation-B"' in page) == (language == "c-tail-call")


def labels(release: Release) -> str:
    return "segfault" if release.report["stack"]["signal"] == "SIGSEGV" else "abort"


@pytest.mark.parametrize("language", LANGUAGE_IDS)
def test_symbols_that_arrive_after_the_crashes_move_them_to_one_named_signature_on_rebuild(
    language: str, settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    from registry.app import create_app

    settings = with_symbols(settings, tmp_path)  # no debuginfod server: nothing to fetch
    token, (first, second) = make_token("report"), releases[language]
    function = LANGUAGES[language][2]
    client = reported_without_symbols(create_app(settings, database), database, token, (first, second))
    with database.session() as session:
        noted = set(session.execute(select(SymbolMiss.build_id, SymbolMiss.report_id)).all())
        unnamed = session.scalar(select(Report.event_id).where(Report.report_id == first.report["report_id"]))
    assert noted == {(release.build_id, release.report["report_id"]) for release in (first, second)}
    login(client, make_token("read"))  # the event's page says what it lacks, and how to give it
    page = client.get(f"/events/{unnamed}").get_data(as_text=True)
    assert 'id="no-symbols"' in page and first.build_id in page and "crashreg symbols upload" in page

    uploaded_and_rebuilt(settings, first, second)

    after = signatures_of(database)
    assert list(after.values()) == [(function, 2)]  # one signature, each event counted once
    # a late report of the first release joins it (this registry now has the symcache)
    late = post(client, token, first, report_id=f"{first.report['report_id']}-late")
    assert late["signature"]["title"].endswith(f"in {function} [service] of service")
    assert late["signature"]["event_count"] == 3
    # the events reported before the symbols, read after the rebuild, are named too
    reader = make_token("read")
    for release in (first, second):
        with database.session() as session:
            sent = release.report["report_id"]
            event_id = session.scalar(select(Report.event_id).where(Report.report_id == sent))
        assert_frames_named(client, reader, str(event_id), function, release)


def test_a_dry_run_rebuild_that_fetches_symbols_writes_nothing_and_the_rebuild_says_all(
    settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    releases: dict[str, tuple[Release, Release]], release_debuginfod: Debuginfod,  # noqa: F811
) -> None:
    """Crashes reported before any symbols, then a debuginfod server configured: the rebuild
    fetches the debug files. Each one fetched used to set off the server's arrival job in the
    command: the events moved in the background, in a dry run too, and outside the summary
    (the dry run printed "merged: 0 ... nothing was written" and had merged them)."""
    from registry.app import create_app

    token, (first, second) = make_token("report"), releases[LANGUAGE_IDS[0]]
    reported_without_symbols(create_app(with_symbols(settings, tmp_path), database), database, token,
                             (first, second))
    unnamed = signatures_of(database)
    served = with_symbols(settings, tmp_path, release_debuginfod.url)
    planned = crashreg_for(served, "signatures", "rebuild", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert signatures_of(database) == unnamed  # nothing written
    assert "merged: 1" in planned.stdout and "nothing was written" in planned.stdout, planned.stdout
    rebuilt = crashreg_for(served, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "merged: 1" in rebuilt.stdout, rebuilt.stdout
    function = LANGUAGES[LANGUAGE_IDS[0]][2]
    assert list(signatures_of(database).values()) == [(function, 2)]


def test_a_rebuild_that_cannot_see_the_registrys_symbols_refuses_to_run(
    settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    """`crashreg signatures rebuild` run with another dump store than the registry's (the
    default store is relative to the working directory) finds none of the symbols uploaded:
    rebuilt so, the events they named would move back to signatures named by offsets. It
    refuses, naming the stores, and changes nothing; told to go on, it runs."""
    from registry.app import create_app

    settings = with_symbols(settings, tmp_path)
    token, (first, second) = make_token("report"), releases[LANGUAGE_IDS[0]]
    reported_without_symbols(create_app(settings, database), database, token, (first, second))
    uploaded_and_rebuilt(settings, first, second)
    named = signatures_of(database)
    elsewhere = replace(settings, dump_store=replace(settings.dump_store, url=str(tmp_path / "elsewhere")))
    refused = crashreg_for(elsewhere, "signatures", "rebuild")
    assert refused.returncode == 1, refused.stderr
    assert re.search(r"\d+ symbol files are recorded in another store", refused.stderr), refused.stderr
    assert "--allow-symbols-elsewhere" in refused.stderr and "elsewhere" in refused.stderr
    assert signatures_of(database) == named
    planned = crashreg_for(elsewhere, "signatures", "rebuild", "--dry-run", "--allow-symbols-elsewhere")
    assert planned.returncode == 0, planned.stderr
    assert "dry run" in planned.stdout and signatures_of(database) == named
    # a store moved (its objects copied under their keys) holds them: no refusal, no change
    source = local_root(settings.dump_store.url)
    assert source is not None
    shutil.copytree(source, tmp_path / "moved")
    moved = replace(settings, dump_store=replace(settings.dump_store, url=str(tmp_path / "moved")))
    rebuilt = crashreg_for(moved, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert signatures_of(database) == named


def uploaded_and_rebuilt(settings: Settings, *built: Release) -> None:
    """`crashreg symbols upload` of the releases' debug files, then `crashreg signatures rebuild`,
    which symbolicates every stored stack of their build-ids again."""
    uploaded = crashreg_for(settings, "symbols", "upload", *(str(release.debug) for release in built))
    assert uploaded.returncode == 0, uploaded.stderr
    rebuilt = crashreg_for(settings, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    fetched = re.search(r"stored stacks \(build-ids\): (\d+) of (\d+) \(done\)", rebuilt.stderr)
    assert fetched is not None and fetched[1] == fetched[2] and int(fetched[1]) >= 2, rebuilt.stderr
    assert "engine failed on (left unfingerprinted): 0" in rebuilt.stdout


# INLINED_IN_RELEASE_1's programs -> the out-of-line copy's symbol in release 2, and its name
OUT_OF_LINE = {
    "c++-internal": ("_ZN5store12_GLOBAL__N_19read_slotERKNS0_4SlotEi.isra.0",
                     "store::(anonymous namespace)::read_slot"),
    "c++-static": ("_ZN5storeL9read_slotERKNS_4SlotEi.isra.0", "store::read_slot"),
}


@pytest.mark.parametrize("program", list(OUT_OF_LINE))
def test_a_function_one_release_inlines_and_the_next_does_not_stays_one_signature(
    program: str, settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    inlining_releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    """g++ -O2 inlines the bug's function, one of internal linkage (in an anonymous namespace,
    or `static` in a named one), into its one caller in release 1 and not in release 2: the
    debug info names the inlined call `read_slot` and the out-of-line copy by its symbol,
    `store::(anonymous namespace)::read_slot` or `store::read_slot` (whose symbol alone says it
    is `static`). Reported before the symbols, then uploaded and rebuilt: one signature, each
    event's guilty frame under its release's name with file:line, and the next crash of either
    release lands there at once."""
    from registry.app import create_app

    first, second = inlining_releases[program]
    symbol, qualified = OUT_OF_LINE[program]
    out_of_line = [[name for name in defined_symbols(release.unstripped) if "read_slot" in name]
                   for release in (first, second)]
    assert out_of_line == [[], [symbol]]
    settings = with_symbols(settings, tmp_path)
    token, reader = make_token("report"), make_token("read")
    client = reported_without_symbols(create_app(settings, database), database, token, (first, second))
    uploaded_and_rebuilt(settings, first, second)

    [(function, events)] = signatures_of(database).values()
    assert events == 2 and function in ("read_slot", qualified)
    for release, name in ((first, "read_slot"), (second, qualified)):
        with database.session() as session:
            sent = release.report["report_id"]
            event_id = session.scalar(select(Report.event_id).where(Report.report_id == sent))
        assert_frames_named(client, reader, str(event_id), name, release)
        late = post(client, token, release, report_id=f"{sent}-late")
        assert late["known"] and late["signature"]["title"].endswith(f"in {function} [service] of service")
    assert [events for _, events in signatures_of(database).values()] == [4]


@pytest.mark.parametrize("language", ["c"])
def test_symbols_uploaded_by_another_process_are_picked_up_by_the_scheduler(
    language: str, settings: Settings, database: Database, tmp_path: Path, make_token: Callable[..., str],
    releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    """`crashreg symbols upload` in a process of its own: the app does not hear of it; the
    symbols-arrived job finds the build-ids reports missed that the store now holds, and their
    events move without a rebuild of everything."""
    from registry.app import create_app
    from sync.scheduler import JobContext
    from sync.symbolication.jobs import symbols_arrived

    settings = with_symbols(settings, tmp_path)
    first, second = releases[language]
    function = LANGUAGES[language][2]
    reported_without_symbols(create_app(settings, database), database, make_token("report"), (first, second))
    assert symbols_arrived(JobContext(settings, database)) == {"build_ids": 0, "notes_forgotten": 0}

    uploaded = crashreg_for(settings, "symbols", "upload", str(first.debug), str(second.debug))
    assert uploaded.returncode == 0, uploaded.stderr
    ran = symbols_arrived(JobContext(settings, database))

    assert ran["build_ids"] == 2 and ran["refingerprinted"] == 2
    assert list(signatures_of(database).values()) == [(function, 2)]
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(SymbolMiss)) == 0
    assert symbols_arrived(JobContext(settings, database)) == {"build_ids": 0, "notes_forgotten": 0}
