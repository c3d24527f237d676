"""When a read may go to the PostgreSQL streaming replica (CRASHREG_READ_DATABASE_URL).

The lag bound is in time, measured with WAL positions: at each check the primary's WAL
position (`pg_current_wal_insert_lsn()`: every commit so far, even an asynchronous one) is
sampled, and the replica is in use while its replayed position (`pg_last_wal_replay_lsn()`)
has reached the newest sample at least `max_lag_s` old. Whatever the primary had written
`max_lag_s` before the check is then on the replica. (Until a sample is that old, the oldest
one is used: stricter, never looser.) `pg_last_xact_replay_timestamp()` is not used: on a
quiet primary it ages without any lag, and it says nothing while replay is paused or the WAL
receiver is cut off from the primary.

A replica that is unreachable, not in recovery (promoted: no longer following the primary) or
behind the bound sends reads to the primary; the next check that finds it caught up sends them
back. One thread checks at a time, at most every `check_interval_s`; the others use the verdict.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from registry.config import ReadReplicaSettings

# A WAL position as bytes since 0/0 (PostgreSQL's pg_lsn arithmetic gives numeric).
PRIMARY_POSITION = text("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
REPLICA_POSITION = text("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn() - '0/0'::pg_lsn")
STATES = ("replica", "lagging", "unreachable", "not-a-standby", "unchecked")


@dataclass(frozen=True)
class ReplicaHealth:
    """The last check's verdict: `state` one of STATES; `in_use` True only for "replica"."""

    state: str
    detail: str
    lag_bytes: int | None = None  # the primary's newest sample minus the replica's replayed position

    @property
    def in_use(self) -> bool:
        return self.state == "replica"

    def describe(self) -> dict[str, object]:
        return {"state": self.state, "in_use": self.in_use, "lag_bytes": self.lag_bytes,
                "detail": self.detail}


def wal_position(connection: Connection) -> int:
    """The primary's WAL position now: what a browser's next reads must find replayed."""
    return int(connection.execute(PRIMARY_POSITION).scalar_one())


class ReadReplica:
    """The replica's engine and the verdict on it. `clock` is the monotonic time in seconds."""

    def __init__(
        self,
        engine: Engine,
        primary: Engine,
        settings: ReadReplicaSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self._primary = primary
        self._settings = settings
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()  # (when, the primary's WAL position)
        self._health = ReplicaHealth("unchecked", "not checked yet")
        self._checked_at: float | None = None
        self._checking = threading.Lock()

    def health(self) -> ReplicaHealth:
        """The verdict, checked again when the last check is `check_interval_s` old."""
        checked_at = self._checked_at
        due = checked_at is None or self._clock() - checked_at >= self._settings.check_interval_s
        if due and self._checking.acquire(blocking=checked_at is None):
            try:
                self._health = self._check()
                self._checked_at = self._clock()
            finally:
                self._checking.release()
        return self._health

    def failed(self, error: BaseException) -> None:
        """A read on the replica failed: reads go to the primary until the next check."""
        self._health = ReplicaHealth("unreachable", f"a read failed: {type(error).__name__}")
        self._checked_at = self._clock()

    def _check(self) -> ReplicaHealth:
        now = self._clock()
        try:
            with self._primary.connect() as connection:
                self._samples.append((now, wal_position(connection)))
        except DBAPIError:
            pass  # the primary is down: the samples taken before still bound the replica's lag
        try:
            with self.engine.connect() as connection:
                in_recovery, replayed = connection.execute(REPLICA_POSITION).one()
        except DBAPIError as error:
            # the error's class only: /readyz is public, the driver's message names hosts
            return ReplicaHealth("unreachable", f"cannot connect: {type(error.orig).__name__}")
        if not in_recovery:
            return ReplicaHealth("not-a-standby", "the read database is not in recovery (promoted?)")
        if not self._samples:
            return ReplicaHealth("lagging", "the primary's WAL position is unknown (primary unreachable)")
        replayed = int(replayed or 0)
        lag = max(0, self._samples[-1][1] - replayed)
        bound = self._bound(now)
        if replayed >= bound:
            return ReplicaHealth("replica", "replaying within the lag bound", lag)
        return ReplicaHealth(
            "lagging",
            f"has not replayed what the primary wrote {self._settings.max_lag_s:g} s before this check",
            lag,
        )

    def _bound(self, now: float) -> int:
        """The WAL position the replica must have replayed: the newest sample at least
        max_lag_s old (the oldest when none is), older samples dropped."""
        horizon = now - self._settings.max_lag_s
        while len(self._samples) > 1 and self._samples[1][0] <= horizon:
            self._samples.popleft()
        return self._samples[0][1]

    def replayed(self, connection: Connection, position: int) -> bool:
        """Whether the replica (on `connection`) has replayed up to `position`."""
        return bool(connection.execute(
            text("SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= :p"), {"p": position}
        ).scalar_one())
