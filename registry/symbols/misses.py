"""The negative cache: what no symbol source had, remembered for a while (plain data).

Asking every server again for a build-id none of them has, on every report of a crash storm,
would put the servers' latency on each report; debuginfod clients keep such misses too
(elfutils' cache_miss_s). A miss is per (build-id, artifact) and per process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

MAX_MISSES = 100_000  # past this the oldest are forgotten first (a bounded memory)


class Misses:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def remember(self, build_id: str, artifact: str) -> None:
        with self._lock:
            self._until.pop((build_id, artifact), None)
            self._until[(build_id, artifact)] = self.clock() + self.ttl_s
            while len(self._until) > MAX_MISSES:
                del self._until[next(iter(self._until))]

    def known(self, build_id: str, artifact: str) -> bool:
        """Whether it was missed within the TTL."""
        with self._lock:
            until = self._until.get((build_id, artifact))
            if until is None:
                return False
            if self.clock() < until:
                return True
            del self._until[(build_id, artifact)]
            return False

    def forget(self, build_id: str) -> None:
        """Symbols for it arrived: every miss of it is stale."""
        with self._lock:
            for key in [key for key in self._until if key[0] == build_id]:
                del self._until[key]
