"""What a plausible crash time is, for ingest (which refuses others, and inventory times
outside the same bounds) and for reads (which leave out the implausible times stored before
ingest refused them: `plausible`).

None of the fleet's kernels predates 2000, and a clock may run a little ahead, but a crash a
day or more in the future is a broken clock: year 9999 would pin its signature's last_seen.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, bindparam, case

from registry.db import UTCDateTime

EARLIEST_CRASH = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE_LEEWAY = timedelta(days=1)


def latest_crash(now: datetime | None = None) -> datetime:
    return (now or datetime.now(UTC)) + FUTURE_LEEWAY


def time_problem(name: str, value: datetime, now: datetime) -> str | None:
    """Why `value` cannot be the time `name` (a crash, a boot, an inventory observation) as
    seen at `now` (None if it can). Also what keeps a time whose UTC form is outside Python's
    years (0001-01-01T00:00:00+00:01) from reaching the database."""
    latest = latest_crash(now)
    if EARLIEST_CRASH <= value <= latest:
        return None
    return (
        f"{name} must lie between {EARLIEST_CRASH.isoformat()} and a day from now "
        f"({latest.replace(microsecond=0).isoformat()})"
    )


def plausible(crash_time: Any) -> ColumnElement[Any]:
    """`crash_time` where it is a plausible one, else NULL: the first and last crash a read
    shows (min/max over it) leave out times stored before ingest bounded them, or year 9999
    would pin a "last crash" for ever. The bound is computed when the statement runs, so
    prebuilt statements stay valid."""
    earliest = bindparam("earliest_crash", EARLIEST_CRASH, type_=UTCDateTime(), unique=True)
    latest = bindparam("latest_crash", callable_=latest_crash, type_=UTCDateTime(), unique=True)
    return case((crash_time.between(earliest, latest), crash_time))
