"""Symbol sources by build-id: the registry's own store first, then debuginfod servers.

    sources = SymbolSources(settings)            # one per process (the app keeps one: current_sources)
    path = sources.find(build_id, "debuginfo", wait=False)

`find(build_id, kind, *, wait)` answers a local file (`kind` "debuginfo" or "executable"):
- the local cache (CRASHREG_SYMBOL_CACHE_DIR), or the store's own file when the store is a
  local directory, is answered at once;
- with `wait=False` nothing else is waited on: a file the store holds in S3, or one that only a
  debuginfod server may have, is fetched by a background thread and the answer is None (ingest
  never waits on a slow server);
- with `wait=True` the store, then each server of CRASHREG_DEBUGINFOD_URLS in order, is asked
  (CRASHREG_DEBUGINFOD_TIMEOUT_S each); None when none has it.
A build-id is 1 to 64 bytes in hex (either case); a malformed one, or another kind, is a
ValueError (a reporter's build-id is not to be trusted: catch it).
A file a server answers is checked against its ELF build-id note and kept in the store (a
`symbol_files` row, source "debuginfod"), so it is fetched once for every process. A build-id
no server had (or none could be reached for) is not asked for again for
CRASHREG_DEBUGINFOD_NEGATIVE_TTL_S, in this process; an upload clears that.

Being told when symbols arrive, two ways:
- in this process: `sources.on_symbols_arrived(callback)`; `callback(SymbolsArrived)` is
  called after the files' rows are committed, for uploads through this process's API or CLI
  and for files its fetches kept (from the thread that kept them: a callback must be quick or
  hand the work on);
- across processes: the `symbol_files` table (registry.symbols.models.SymbolFile): one row per
  (build_id, kind), inserted once the file is stored and checked; the scheduler's
  symbols-arrived job compares it with the build-ids reports missed
  (registry.symbolication.service.awaited).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import requests

from registry.build_ids import normal_build_id
from registry.config import Settings
from registry.db import Database
from registry.storage.store import DumpStore, open_store, store_location
from registry.symbols.cache import make_room, used
from registry.symbols.debuginfod import DebuginfodServer, FetchFailed
from registry.symbols.elf import KINDS, NotASymbolFile
from registry.symbols.keep import Origin, held, keep_file
from registry.symbols.misses import Misses

log = logging.getLogger(__name__)
BACKGROUND_FETCHERS = 2
NAME_MAX, PATH_MAX = 255, 4096  # Linux's limits on one path component and a whole path, in bytes


class StillFetching(Exception):
    """A request's wait for the servers is over and the fetch is not: ask again shortly."""

    def __init__(self, build_id: str, artifact: str, waited_s: float) -> None:
        super().__init__(f"{build_id}/{artifact} is still being fetched from the configured debuginfod "
                         f"servers after {waited_s:g} s; ask again shortly")


@dataclass(frozen=True)
class SymbolsArrived:
    """Files for a build-id were stored: `kinds` the kinds they brought."""

    build_id: str
    kinds: tuple[str, ...]
    source: str  # upload | debuginfod


Listener = Callable[[SymbolsArrived], None]


def checked_request(build_id: str, kind: str) -> str:
    """The build-id as the store keys it; ValueError for a malformed one or an unknown kind."""
    normal = normal_build_id(build_id)
    if normal is None:
        raise ValueError(f"not a build-id (1 to 64 bytes in hex): {build_id[:140]!r}")
    if kind not in KINDS:
        raise ValueError(f"unknown symbol kind {kind!r}; one of {', '.join(KINDS)}")
    return normal


class SymbolSources:
    def __init__(self, settings: Settings, database: Database | None = None,
                 store: DumpStore | None = None) -> None:
        symbols = settings.symbols
        self.database = database or Database(settings.database_url)
        self.store = store or open_store(settings.dump_store, settings.public_url)
        self.location = store_location(self.store)  # as symbol files' records name their store
        self.cache = Path(symbols.cache_dir)
        self.servers = [DebuginfodServer(url, symbols.timeout_s, symbols.max_time_s)
                        for url in symbols.debuginfod_urls]
        self.request_wait_s = symbols.request_wait_s
        self.max_bytes = symbols.max_file_bytes
        self.cache_max_bytes = symbols.cache_max_bytes
        self.misses = Misses(symbols.negative_ttl_s)
        self._listeners: list[Listener] = []
        self._background = ThreadPoolExecutor(BACKGROUND_FETCHERS, thread_name_prefix="symbol-fetch")
        self._fetching: dict[tuple[str, str], Future[Path | None]] = {}
        self._known: dict[tuple[str, str], Path] = {}  # the store's local files found so far
        self._lock = threading.Lock()

    # --- the interface ------------------------------------------------------------------------

    def find(self, build_id: str, kind: str = "debuginfo", *, wait: bool) -> Path | None:
        """A local file holding `kind` for `build_id`, or None (module docstring)."""
        build_id = checked_request(build_id, kind)
        here, stored = self._at_hand(build_id, kind)
        if here is not None:
            return here
        if not wait:
            if stored or not self.misses.known(build_id, kind):  # the store's copy, or a server's
                self._in_background(build_id, kind)
            return None
        return self._fetch(build_id, kind)

    def find_for_request(self, build_id: str, kind: str = "debuginfo") -> Path | None:
        """find(wait=True) for a request a worker serves (the registry's /debuginfod/): the
        fetch runs in the background and is waited for at most CRASHREG_DEBUGINFOD_REQUEST_WAIT_S,
        then StillFetching (the fetch goes on and keeps its file for the next ask): a slow
        server never holds the worker, which serves reports too, until gunicorn kills it."""
        build_id = checked_request(build_id, kind)
        here, _ = self._at_hand(build_id, kind)
        if here is not None:
            return here
        return self._awaited(self._in_background(build_id, kind), build_id, kind)

    def forget(self, build_id: str, kind: str) -> None:
        """The store's file for the build-id's kind was replaced (registry.symbols.keep.record):
        this machine's copy of the old one goes, and what this process remembers of it."""
        build_id = checked_request(build_id, kind)
        self._known.pop((build_id, kind), None)
        self._cached(build_id, kind).unlink(missing_ok=True)

    def on_symbols_arrived(self, callback: Listener) -> None:
        self._listeners.append(callback)

    def arrived(self, arrival: SymbolsArrived) -> None:
        """Tell the listeners (called once the files' rows are committed)."""
        if not arrival.kinds:
            return
        self.misses.forget(arrival.build_id)
        for listener in list(self._listeners):
            try:
                listener(arrival)
            except Exception:  # one listener's failure must not cost the others their news
                log.exception("a symbols-arrived listener failed for %s", arrival.build_id)

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait for the background fetches under way (tests, shutdown)."""
        with self._lock:
            running = list(self._fetching.values())
        wait_for(running, timeout=timeout_s)

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=True)

    def source_file(self, build_id: str, path: str) -> Path | None:
        """A source file the servers have for `build_id` (`path` as the DWARF names it), cached
        here; the store holds no sources. Misses are remembered as for debug info."""
        build_id = checked_request(build_id, "debuginfo")
        parts = PurePosixPath("/", path).parts[1:]
        if not parts or any(part in ("..", ".") for part in parts) or "\0" in path:
            raise ValueError(f"not an absolute source path: {path[:200]!r}")
        if any(len(part.encode()) > NAME_MAX for part in parts) or len(path.encode()) > PATH_MAX:
            raise ValueError(f"a source path longer than a file system allows: {path[:200]!r}")
        artifact = "source/" + "/".join(parts)
        cached = self.cache / build_id / "sources" / Path(*parts)
        if cached.is_file():
            used(cached)
            return cached
        if self.misses.known(build_id, artifact):
            return None
        fetching = self._in_background(build_id, artifact, lambda: self._source(build_id, artifact, cached))
        return self._awaited(fetching, build_id, artifact)

    def _source(self, build_id: str, artifact: str, cached: Path) -> Path | None:
        found = self._from_servers(build_id, artifact, cached)
        if found is None:
            self.misses.remember(build_id, artifact)
        return found

    def _awaited(self, fetching: Future[Path | None], build_id: str, artifact: str) -> Path | None:
        try:
            return fetching.result(timeout=self.request_wait_s)
        except TimeoutError:  # concurrent.futures' since 3.11
            raise StillFetching(build_id, artifact, self.request_wait_s) from None

    def make_room(self) -> None:
        """Keep the cache within its cap (registry.symbols.cache), after a file was added."""
        make_room(self.cache, self.cache_max_bytes)

    # --- where a file is found ------------------------------------------------------------------

    def _cached(self, build_id: str, kind: str) -> Path:
        return self.cache / build_id / kind

    def _at_hand(self, build_id: str, kind: str) -> tuple[Path | None, bool]:
        """The file found before (still there), the cached one, or the store's own when it is a
        local directory (one database read per build-id and kind until it is found); and
        whether the store holds it."""
        known = self._known.get((build_id, kind))
        if known is not None and known.is_file():
            return known, True
        cached = self._cached(build_id, kind)
        if cached.is_file():
            used(cached)
            return cached, True
        with self.database.autocommit_reads() as session:
            row = held(session, build_id).get(kind)
        local = self.store.local_path(row.key) if row is not None else None
        if local is not None:
            self._known[(build_id, kind)] = local
        return local, row is not None

    def _in_background(self, build_id: str, kind: str,
                       work: Callable[[], Path | None] | None = None) -> Future[Path | None]:
        """The fetch of `kind` (or `work`, fetching that artifact) on a background thread: the
        one under way, else a new one."""
        with self._lock:
            running = self._fetching.get((build_id, kind))
            if running is not None:
                return running
            future = self._background.submit(work or (lambda: self._fetch(build_id, kind)))
            self._fetching[(build_id, kind)] = future
        future.add_done_callback(lambda _: self._done(build_id, kind))
        return future

    def _done(self, build_id: str, kind: str) -> None:
        with self._lock:
            self._fetching.pop((build_id, kind), None)

    def _fetch(self, build_id: str, kind: str) -> Path | None:
        """The store's file copied here, else the first server's (kept in the store), else None."""
        cached = self._cached(build_id, kind)
        with self.database.autocommit_reads() as session:
            row = held(session, build_id).get(kind)
        if row is not None:
            local = self.store.local_path(row.key)
            if local is not None:
                return local
            if self.store.head(row.key) is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                self.store.fetch_file(row.key, cached)
                self.make_room()
                return cached
            log.warning("%s/%s is recorded (in %s) but this store (%s) has no %s: the servers are asked; "
                        "upload the file again to keep it here (docs/symbols.md)",
                        build_id, kind, row.store, store_location(self.store), row.key)
        if self.misses.known(build_id, kind):
            return None
        for server in self.servers:
            found = self._from_server(server, build_id, kind, cached)
            if found is not None:
                return found
        self.misses.remember(build_id, kind)
        return None

    def _from_server(self, server: DebuginfodServer, build_id: str, kind: str, cached: Path) -> Path | None:
        """One server's file, checked and kept in the store; None when it has none (or a wrong one)."""
        if self._from_servers(build_id, kind, cached, [server]) is None:
            return None
        try:
            kept = keep_file(self.database, self.store, cached, Origin("debuginfod", server.url), build_id)
        except NotASymbolFile as problem:
            log.warning("%s answered %s/%s with a file refused: %s", server.url, build_id, kind, problem)
            cached.unlink(missing_ok=True)
            return None
        if kind not in kept.facts.kinds:
            log.warning("%s answered %s/%s with a file that has no %s", server.url, build_id, kind, kind)
            cached.unlink(missing_ok=True)
            return None
        self.arrived(SymbolsArrived(build_id, kept.new_kinds, "debuginfod"))
        return cached

    def _from_servers(self, build_id: str, artifact: str, destination: Path,
                      servers: list[DebuginfodServer] | None = None) -> Path | None:
        """The first of `servers` (default: all) that has the artifact, written to `destination`."""
        destination.parent.mkdir(parents=True, exist_ok=True)
        for server in self.servers if servers is None else servers:
            try:
                if server.fetch(build_id, artifact, destination, self.max_bytes):
                    self.make_room()
                    return destination
            except (requests.RequestException, FetchFailed, OSError) as error:
                log.warning("debuginfod %s failed for %s/%s: %s", server.url, build_id, artifact, error)
        return None
