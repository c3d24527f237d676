"""Symbolication in the registry: the engine's step before fingerprinting, the symcaches behind
it, and what happens when symbols arrive after the crashes that needed them.

- Ingest (`engine`): a userspace stack is symbolicated from the symcaches on disk, within a
  small time budget, and fingerprinted; a build-id without a symcache is noted (SymbolMiss)
  and asked of the symbol sources without waiting (they fetch in the background).
- Arrival (`arrived`): a build-id's debug file is in the sources' cache (uploaded, or fetched
  from a debuginfod server): its symcache is built, and the events of the reports that missed
  it are fingerprinted again by the rebuild, which moves them to their named signature through
  its move/merge/alias rules (captures, Jira links and RCAs follow; counts are recounted).
- Better symbols (`refresh`): a symbol table the store held as a build's debuginfo gave way to
  DWARF (registry.symbols.keep): the symcache made from the table is made again, in every
  process that looks (each looks for such replacements once a minute while it symbolicates),
  and `arrived` notes every userspace report naming the build-id as a miss and symbolicates
  their events again, once (`resymbolicated_at`), so their frames get their file:line.
- Arrival in another process (a CLI upload, another worker): the scheduler's symbols-arrived
  job (sync/symbolication) runs `arrived` for the build-ids missed that the store now holds, and
  for the replacements whose events are still to do.
- `crashreg signatures rebuild` (`on_demand`): every event, with every symbol the sources can
  give for the stored stacks, fetched first, waiting for them (an operator's command).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, update

from registry.build_ids import BUILD_ID
from registry.config import Settings
from registry.core.events import Report
from registry.core.wiring import APP_FRAME_NAMES, APP_LISTENERS, Engine, FrameNames, SignatureListeners
from registry.db import Database, utcnow
from registry.fingerprint.userspace import runtime_module
from registry.signatures.rebuild import CHUNK, RebuildSummary, rebuild
from registry.symbols.keep import held, recorded_elsewhere
from registry.symbols.models import SymbolFile
from registry.symbols.sources import SymbolSources

from .misses import RECHECKS, UNSYMBOLICATED, note_reports_naming
from .models import SymbolMiss
from .stack import MAX_FRAMES, Lookup, frame_build_id, names_by_frame, symbolicate
from .symcache import SourceFrame, Symcaches

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger("crashreg.symbolication")
INGEST_BUDGET_S = 0.02  # what symbolication may add to a report's answer, cold or warm
ASKED_AGAIN_AFTER_S = 60.0  # a build-id the sources lack is asked again after this long
SYMCACHE_DIR = "symcache"  # under the symbol cache directory (CRASHREG_SYMBOL_CACHE_DIR)
APP_SYMBOLICATOR = "crashreg.symbolicator"  # where install keeps the app's Symbolicator
REPLACEMENTS_POLL_S = 60.0  # how often a symbolicating process looks for symbol tables replaced


@dataclass
class Symbolicator:
    """One registry process's symbolication: its symcaches, its sources, one background worker,
    around `inner`, the signature engine it symbolicates stacks for."""

    inner: Engine
    symcaches: Symcaches
    sources: SymbolSources  # registry/symbols: the store, then the debuginfod servers
    database: Database
    listeners: SignatureListeners
    budget_s: float = INGEST_BUDGET_S
    replacements_poll_s: float = REPLACEMENTS_POLL_S

    def __post_init__(self) -> None:
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crashreg-symbols")
        # Its thread started now, not by a report's first miss (Thread.start waits until the
        # new thread runs: on a loaded host, longer than the budget).
        self._worker.submit(int)
        self._pending: dict[str, Future[Any]] = {}
        self._again: set[str] = set()
        self._asked: dict[str, float] = {}
        self._lock = threading.Lock()
        self._replacements_seen: set[tuple[str, str]] = set()  # (build_id, sha256) looked at
        self._looked_at: float | None = None  # monotonic time of the last look
        self._looking: Future[Any] | None = None

    def identify(self, console_log: str | None, stack: dict[str, Any] | None, lookup: Lookup,
                 deadline: float | None) -> Any:
        """The inner engine on the stack symbolicated by `lookup`; the build-ids that lacked
        symbols go into a userspace signature's explanation (UNSYMBOLICATED)."""
        if not isinstance(stack, dict):
            return self.inner(console_log, stack)
        done = symbolicate(stack, lookup, deadline)
        crash = self.inner(console_log, done.stack)
        if crash is not None and done.missing and crash.kind == "userspace":
            crash.explanation[UNSYMBOLICATED] = done.missing
        return crash

    # --- ingest -------------------------------------------------------------------------

    def engine(self, console_log: str | None, stack: dict[str, Any] | None) -> Any:
        """Ingest's engine: symbolicated within the budget from the symcaches on disk."""
        if isinstance(stack, dict):  # a stack to symbolicate: a kernel's report asks nothing
            self.look_for_replacements()
        return self.identify(console_log, stack, self.cached, time.monotonic() + self.budget_s)

    def cached(self, build_id: str, address: int) -> Sequence[SourceFrame] | None:
        """The symcache's answer, or None after asking for the symbols without waiting."""
        found = self.symcaches.lookup(build_id, address)
        if found is None:
            self.request(build_id)
        return found

    def names(self, stack: dict[str, Any]) -> Any:
        """What the symcaches on disk name a stored stack's frames (pages, the API, bundles)."""
        self.look_for_replacements()
        return names_by_frame(stack, self.symcaches.lookup)

    def request(self, build_id: str) -> None:
        """Ask the sources for a build-id's debug file, on the worker (even their look at their
        own cache is a statement): one they hold is made into a symcache and the reports that
        missed it run again (`arrived`); otherwise they fetch it and call `arrived` when it is
        there. Asked at most once a minute per build-id."""
        now = time.monotonic()
        with self._lock:
            asked = self._asked.get(build_id)
            if build_id in self._pending or (asked is not None and now - asked < ASKED_AGAIN_AFTER_S):
                return
            self._asked[build_id] = now
        self.in_background(build_id)

    # --- arrival ------------------------------------------------------------------------

    def in_background(self, build_id: str) -> None:
        """`arrived(build_id)` on the worker, one run at a time per build-id; asked again while
        it runs, it runs once more after (a report committed meanwhile may have been missed)."""
        with self._lock:
            if build_id in self._pending:
                self._again.add(build_id)
                return
            self._pending[build_id] = self._worker.submit(self._arrive, build_id)

    def recheck(self, build_ids: list[str]) -> None:
        """After a report that missed these build-ids is committed: those whose symcache was
        built meanwhile (their arrival's re-run may have read the events before this one was
        committed) are run again."""
        for build_id in build_ids:
            if self.symcaches.has(build_id):
                self.in_background(build_id)

    def _arrive(self, build_id: str) -> RebuildSummary | None:
        try:
            return self.arrived(build_id)
        except Exception:  # a background job: logged; the next miss or arrival tries again
            log.exception("symbolicating again for build-id %s failed", build_id)
            return None
        finally:
            with self._lock:
                self._pending.pop(build_id, None)
                again = build_id in self._again
                self._again.discard(build_id)
            if again:
                self.in_background(build_id)

    def arrived(self, build_id: str) -> RebuildSummary | None:
        """Symbols for `build_id` are in the sources: build its symcache (again, if DWARF replaced
        the symbol table it was made from), then fingerprint again the events of the reports
        that missed it, and once after a replacement every event of a report naming it, with
        what is cached (None: nothing to build the symcache from)."""
        if not BUILD_ID.fullmatch(build_id):
            return None
        self.refresh(build_id)
        if not self.symcaches.has(build_id):
            debug_file = self.sources.find(build_id, wait=False)
            if debug_file is None or not self.symcaches.build(build_id, debug_file):
                return None
        with self.database.session() as session:
            replacement = session.scalar(select(SymbolFile.id).where(
                SymbolFile.build_id == build_id, SymbolFile.kind == "debuginfo",
                SymbolFile.replaced_sha256.is_not(None), SymbolFile.resymbolicated_at.is_(None)))
        if replacement is not None:  # every report naming it, as if it had missed it
            note_reports_naming(self.database, build_id)
        with self.database.session() as session:  # of reports stored (one in flight: `recheck`)
            noted = list(session.scalars(select(SymbolMiss.report_id).join(
                Report, Report.report_id == SymbolMiss.report_id).where(SymbolMiss.build_id == build_id)))
        if not noted and replacement is None:
            return RebuildSummary()
        missed = select(Report.event_id).join(SymbolMiss, SymbolMiss.report_id == Report.report_id) \
            .where(SymbolMiss.build_id == build_id)
        summary = rebuild(self.database, self.listeners, engine=self.with_cached_symbols, events_of=missed)
        with self.database.session() as session:
            for start in range(0, len(noted), CHUNK):
                done = noted[start:start + CHUNK]
                session.execute(delete(SymbolMiss).where(SymbolMiss.build_id == build_id,
                                                         SymbolMiss.report_id.in_(done)))
            if replacement is not None:
                session.execute(update(SymbolFile).where(SymbolFile.id == replacement)
                                .values(resymbolicated_at=utcnow()))
        log.info("symbols arrived for %s: %s", build_id, "; ".join(summary.lines()[:2]))
        return summary

    def refresh(self, build_id: str) -> bool:
        """Make the build-id's symcache again when it was made from a symbol table alone and
        the store's debuginfo for it now has source lines (the table gave way to DWARF), from
        the store's new file; whether it was made again."""
        if self.symcaches.lines(build_id) is not False:  # none yet, or made from DWARF
            return False
        with self.database.autocommit_reads() as session:
            debuginfo = held(session, build_id).get("debuginfo")
        if debuginfo is None or not debuginfo.lines:
            return False
        self.sources.forget(build_id, "debuginfo")
        debug_file = self.sources.find(build_id, wait=True)  # the store's file: this is a background job
        return debug_file is not None and self.symcaches.build(build_id, debug_file)

    def look_for_replacements(self) -> None:
        """At most once every `replacements_poll_s`, on the worker: the symbol tables replaced
        by DWARF (in any process, on any machine) not looked at yet, their symcaches in this
        process forgotten and made again from the new files where this machine's were made from
        the tables. A look reads every replacement's build-id and digest: a few rows."""
        now = time.monotonic()
        with self._lock:
            if self._looked_at is not None and now - self._looked_at < self.replacements_poll_s:
                return
            self._looked_at = now
        with contextlib.suppress(RuntimeError):  # closed (shutting down): the next process looks
            self._looking = self._worker.submit(self._replaced)

    def _replaced(self) -> None:
        try:
            with self.database.autocommit_reads() as session:
                rows = session.execute(select(SymbolFile.build_id, SymbolFile.sha256).where(
                    SymbolFile.kind == "debuginfo", SymbolFile.replaced_sha256.is_not(None))).all()
            for build_id, sha256 in rows:
                if (build_id, sha256) in self._replacements_seen:
                    continue
                self.symcaches.forget(build_id)
                # done unless this machine's symcache is the table's and could not be made again
                if self.symcaches.lines(build_id) is not False or self.refresh(build_id):
                    self._replacements_seen.add((build_id, sha256))
        except Exception:  # a background job: logged; the next look tries again
            log.exception("looking for symbol tables replaced by DWARF failed")

    def with_cached_symbols(self, console_log: str | None, stack: dict[str, Any] | None) -> Any:
        """A background rebuild's engine: every symcache on disk, no budget, nothing waited for."""
        return self.identify(console_log, stack, self.symcaches.lookup, None)

    def close(self) -> None:
        """Stop the worker; what it has not started is dropped (the misses stay noted)."""
        self._worker.shutdown(wait=True, cancel_futures=True)

    def drain(self) -> None:
        """Wait for the background work under way (tests, shutdown)."""
        if self._looking is not None:
            self._looking.result()
        while True:
            with self._lock:
                pending = list(self._pending.values())
            if not pending:
                return
            for future in pending:
                future.result()

    # --- rebuild on demand --------------------------------------------------------------

    def prepare(self, build_ids: set[str], done: Callable[[int], Any] = lambda count: None) -> int:
        """Symcaches for every build-id the sources can give, waiting for them (a debuginfod
        server): before a rebuild, whose transactions must not wait on the network or on the
        sources' own statements (SQLite has one writer). `done(1)` after each build-id. How many
        were built."""
        built = 0
        for build_id in sorted(build_ids):
            if not self.symcaches.has(build_id):
                debug_file = self.sources.find(build_id, wait=True)
                built += debug_file is not None and self.symcaches.build(build_id, debug_file)
            done(1)
        return built


def awaited(database: Database) -> set[str]:
    """The build-ids reports missed whose symbols the store now holds, and those whose symbol
    table DWARF replaced whose events are still to symbolicate again."""
    with database.session() as session:
        missed = set(session.scalars(select(SymbolMiss.build_id).distinct().where(
            SymbolMiss.build_id.in_(select(SymbolFile.build_id)))))
        return missed | set(session.scalars(select(SymbolFile.build_id).where(
            SymbolFile.replaced_sha256.is_not(None), SymbolFile.resymbolicated_at.is_(None))))


def stack_build_ids(database: Database) -> set[str]:
    """The build-ids of the program frames (the runtime's modules aside) of every stored
    userspace report, and those noted as missed."""
    found: set[str] = set()
    # streamed (a server-side cursor on PostgreSQL): Result.yield_per after execution would
    # still have fetched every userspace payload at once, gigabytes over years of history
    userspace = select(Report.payload).where(Report.source == "userspace").execution_options(yield_per=CHUNK)
    with database.session() as session:
        found.update(session.scalars(select(SymbolMiss.build_id).distinct()))
        for payload in session.scalars(userspace):
            stack = payload.get("stack") if isinstance(payload, dict) else None
            if isinstance(stack, dict):
                found.update(program_build_ids(stack, MAX_FRAMES))
    return found


def program_build_ids(stack: dict[str, Any], frames: int | None = None) -> set[str]:
    """The build-ids of a stack's program frames (the runtime's modules aside), of its first
    `frames` frames (all by default)."""
    sent = stack.get("frames")
    if not isinstance(sent, list):
        return set()
    return {build_id for frame in sent[:frames]
            if isinstance(frame, dict) and not runtime_module(frame.get("module"))
            and (build_id := frame_build_id(stack, frame)) and BUILD_ID.fullmatch(build_id)}


def symbolicator_for(settings: Settings, database: Database, listeners: SignatureListeners, inner: Engine,
                     sources: SymbolSources | None = None, hears_arrivals: bool = True) -> Symbolicator:
    """A Symbolicator over the symbol sources (its symcaches in their cache directory), told by
    them when symbols arrive (`hears_arrivals`: the server's, which symbolicates again the
    events that missed them; a command that prepares every symbol itself does not: an arrival
    during a rebuild's fetches moved events in the background, in a dry run too, and outside
    the command's summary)."""
    sources = sources or SymbolSources(settings, database)
    symcaches = Symcaches(Path(settings.symbols.cache_dir) / SYMCACHE_DIR, made=sources.make_room)
    symbolicator = Symbolicator(inner, symcaches, sources, database, listeners)
    if hears_arrivals:
        sources.on_symbols_arrived(lambda arrival: symbolicator.in_background(arrival.build_id))
        RECHECKS[database] = symbolicator.recheck
    return symbolicator


def install(app: Flask, inner: Engine) -> Engine:
    """create_app's step (Wiring.symbolication): ingest's engine symbolicates first. The app's
    Symbolicator is made at its first request, over the app's symbol sources as the settings
    then are (registry.symbols makes them on first use too), before any request can upload
    symbols: it hears of every arrival."""
    from registry.symbols.api import current_sources  # the app's: a command needs no Flask
    from registry.web import current_db, current_settings

    making = threading.Lock()

    def made() -> Symbolicator:
        symbolicator: Symbolicator | None = app.extensions.get(APP_SYMBOLICATOR)
        if symbolicator is None:
            with making, app.app_context():
                symbolicator = app.extensions.get(APP_SYMBOLICATOR) or symbolicator_for(
                    current_settings(), current_db(), app.extensions[APP_LISTENERS], inner, current_sources())
                app.extensions[APP_SYMBOLICATOR] = symbolicator
        return symbolicator

    def before_request() -> None:
        made()

    def engine(console_log: str | None, stack: dict[str, Any] | None) -> Any:
        return made().engine(console_log, stack)

    app.before_request(before_request)
    app.extensions[APP_FRAME_NAMES] = lambda stack: made().names(stack)
    return engine


def names_on_demand(settings: Settings, database: Database, listeners: SignatureListeners,
                    inner: Engine) -> FrameNames:
    """A command's FrameNames (Wiring.frame_names_on_demand): what the registry's symbols name
    a stored stack's frames, each of its build-ids' symcaches made first where the sources
    have the debug file (waiting on them: a command, where a page reads only what is ready).
    Each build-id is prepared once: a bundle asks again for each event and each of its threads."""
    symbolicator = symbolicator_for(settings, database, listeners, inner, hears_arrivals=False)
    prepared: set[str] = set()

    def names(stack: dict[str, Any]) -> Any:
        wanted = program_build_ids(stack) - prepared
        symbolicator.prepare(wanted)
        prepared.update(wanted)
        return symbolicator.names(stack)

    return names


class SymbolsElsewhere(ValueError):
    """Symbol files are recorded in another store than the one a command was given."""


def on_demand(settings: Settings, database: Database, listeners: SignatureListeners, inner: Engine,
              progress: Callable[[int, str], AbstractContextManager[Any]],
              elsewhere_ok: bool = False) -> Engine:
    """`crashreg signatures rebuild`'s engine (Wiring.symbolication_on_demand): every symbol the
    sources can give for the stored stacks, fetched first; `progress(total, label)`: the
    command's bar over the build-ids (a fetch from a slow server is a long wait).
    SymbolsElsewhere, unless `elsewhere_ok`, when symbol files are recorded in another store:
    rebuilt without them, the events they named would move back to unnamed signatures."""
    sources = SymbolSources(settings, database)
    with database.autocommit_reads() as session:
        elsewhere = recorded_elsewhere(session, sources.store)
    if elsewhere and not elsewhere_ok:
        sources.close()
        stores = ", ".join(f"{location} ({count})" for location, count in sorted(elsewhere.items()))
        raise SymbolsElsewhere(
            f"{sum(elsewhere.values())} symbol files are recorded in another store than this "
            f"command's ({sources.location}): {stores}. Run it with the registry "
            "server's settings (CRASHREG_DUMP_STORE, docs/symbols.md), or pass "
            "--allow-symbols-elsewhere to rebuild without them (the events they named lose "
            "those names)"
        )
    symbolicator = symbolicator_for(settings, database, listeners, inner, sources, hears_arrivals=False)
    build_ids = stack_build_ids(database)
    with progress(len(build_ids), "symbols for the stored stacks (build-ids)") as bar:
        symbolicator.prepare(build_ids, bar.update)
    return symbolicator.with_cached_symbols
