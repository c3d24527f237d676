"""The kernels' rollup (migration 0048): host-time per kernel version, summed per UTC day, which
Grafana's crash rate by kernel version reads instead of cutting every host's kernel history to
its range at each refresh.

A host's **kernel intervals** (`kernel_intervals`, the definition 0047's `rpt_kernel_intervals`
view computed): each recorded `kernel_version` change closes the old value's interval (from the
previous change, or from when the host came), the current value runs from the last change; a
host counts from its first sighting or, for back-filled history, from the midnight of its first
crash's UTC day when that day is earlier (its earliest `rollup_host_days` day, which keeps the
crash days of archived events), until it is retired. They are kept per host
(`rollup_kernel_intervals`) so that a host's history changing anywhere (a back-dated change, a
retirement, a crash back-filled before its first sighting) is counted out as it was and in as
it is.

The sums are in **delta form**: per UTC day and kernel, the intervals starting and ending that
day and their moments (microseconds after midnight, exact), so a host that keeps its kernel for
a year writes two rows, not 365. Over a range [a, b) the panel takes (docs/grafana.md):

- host-seconds: (b - a) x the intervals started minus ended before b, minus, for each day in
  [a, b), (starts - ends) x (day - a) plus its moments;
- hosts: the intervals started before b, minus those ended by a, minus the gaps inside the range
  (a host back on a kernel it ran before counts once: `rollup_kernel_gaps`).

An end at midnight is kept on the day before (at 86,400 s): "ended by a" is then "on a day
before a's", and an interval ending at a range's first instant never counts in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, text

from registry.core.hosts import Host, HostAttributeChange

from .deltas import add_deltas
from .models import HostDays, KernelInterval

DAY_US = 86_400_000_000
READ_CHUNK = 1_000  # hosts per read (SQLite's bound parameters)

Interval = tuple[str, datetime, datetime | None]  # kernel, valid from, valid to (None: running)
DAILY_COUNTS = ("starts", "ends", "start_us", "end_us")


@dataclass(frozen=True)
class HostHistory:
    """What a host's kernel intervals are computed from."""

    first_seen: datetime
    retired_at: datetime | None
    kernel_version: str | None  # now
    first_day: date | None  # its earliest rollup_host_days day
    changes: Sequence[tuple[str | None, datetime]] = ()  # (old value, changed at), in time order


def kernel_intervals(host: HostHistory) -> list[Interval]:
    """The host's intervals, in time order; none where no kernel is recorded."""
    born = host.first_seen
    if host.first_day is not None and host.first_day < host.first_seen.date():
        born = datetime.combine(host.first_day, time(), UTC)
    spans: list[tuple[str, datetime, datetime | None]] = []
    since = born
    for old, changed_at in host.changes:
        if old is not None:
            spans.append((old, since, changed_at))
        since = changed_at
    if host.kernel_version is not None:
        spans.append((host.kernel_version, since, None))
    intervals = []
    for kernel, start, until in spans:
        valid_from = max(start, born)
        ends = [moment for moment in (until, host.retired_at) if moment is not None]
        valid_to = min(ends) if ends else None
        if valid_to is None or valid_to > valid_from:
            intervals.append((kernel, valid_from, valid_to))
    return intervals


def _moment(at: datetime, ending: bool) -> tuple[date, int]:
    """The UTC day a start or end is kept on, and its microseconds after that day's midnight."""
    at = at.astimezone(UTC)
    day, since_midnight = (
        at.date(),
        (at.hour * 3600 + at.minute * 60 + at.second) * 1_000_000 + at.microsecond,
    )
    if ending and since_midnight == 0:
        return day - timedelta(days=1), DAY_US
    return day, since_midnight


@dataclass
class KernelDeltas:
    """What intervals add to the rollup (or take from it, counted with -1)."""

    daily: dict[tuple[date, str], list[int]] = field(default_factory=dict)  # -> DAILY_COUNTS
    gaps: dict[tuple[str, date, date], int] = field(default_factory=dict)

    def add(self, intervals: Iterable[Interval], sign: int) -> None:
        last_end: dict[str, datetime] = {}
        for kernel, start, end in intervals:
            day, us = _moment(start, ending=False)
            counts = self.daily.setdefault((day, kernel), [0, 0, 0, 0])
            counts[0] += sign
            counts[2] += sign * us
            if kernel in last_end:  # back on a kernel it ran before
                key = (kernel, _moment(last_end[kernel], ending=True)[0], day)
                self.gaps[key] = self.gaps.get(key, 0) + sign
            if end is not None:
                day, us = _moment(end, ending=True)
                counts = self.daily.setdefault((day, kernel), [0, 0, 0, 0])
                counts[1] += sign
                counts[3] += sign * us
                last_end[kernel] = end


UPSERT_DAILY = text(
    f"INSERT INTO rollup_kernel_daily (day, kernel_version, {', '.join(DAILY_COUNTS)}) "
    f"VALUES (:day, :kernel_version, {', '.join(f':{c}' for c in DAILY_COUNTS)}) "
    f"ON CONFLICT (day, kernel_version) DO UPDATE SET "
    + ", ".join(f"{c} = rollup_kernel_daily.{c} + excluded.{c}" for c in DAILY_COUNTS)
)
EMPTIED_DAILY = text(
    "DELETE FROM rollup_kernel_daily WHERE day = :day AND kernel_version = :kernel_version "
    "AND starts = 0 AND ends = 0"
)
UPSERT_GAPS = text(
    "INSERT INTO rollup_kernel_gaps (kernel_version, ended_day, resumed_day, gaps) "
    "VALUES (:kernel_version, :ended_day, :resumed_day, :gaps) "
    "ON CONFLICT (kernel_version, ended_day, resumed_day) "
    "DO UPDATE SET gaps = rollup_kernel_gaps.gaps + excluded.gaps"
)
EMPTIED_GAPS = text(
    "DELETE FROM rollup_kernel_gaps WHERE kernel_version = :kernel_version "
    "AND ended_day = :ended_day AND resumed_day = :resumed_day AND gaps = 0"
)


def _histories(connection: Connection, hosts: list[int]) -> dict[int, HostHistory]:
    """The hosts still there, with their kernel changes and first day."""
    first_days = dict(
        connection.execute(
            select(HostDays.host_id, func.min(HostDays.day))
            .where(HostDays.host_id.in_(hosts))
            .group_by(HostDays.host_id)
        ).all()
    )
    changes: dict[int, list[tuple[str | None, datetime]]] = {}
    change = HostAttributeChange
    for host_id, old, changed_at in connection.execute(
        select(change.host_id, change.old_value, change.changed_at)
        .where(change.attribute == "kernel_version", change.host_id.in_(hosts))
        .order_by(change.host_id, change.changed_at, change.id)
    ):
        changes.setdefault(host_id, []).append((old, changed_at))
    return {
        host_id: HostHistory(
            first_seen, retired_at, kernel, first_days.get(host_id), changes.get(host_id, ())
        )
        for host_id, first_seen, retired_at, kernel in connection.execute(
            select(Host.id, Host.first_seen, Host.retired_at, Host.kernel_version).where(Host.id.in_(hosts))
        )
    }


def _stored(connection: Connection, hosts: list[int]) -> dict[int, list[Interval]]:
    stored: dict[int, list[Interval]] = {}
    rows = connection.execute(
        select(
            KernelInterval.host_id,
            KernelInterval.kernel_version,
            KernelInterval.valid_from,
            KernelInterval.valid_to,
        )
        .where(KernelInterval.host_id.in_(hosts))
        .order_by(KernelInterval.host_id, KernelInterval.valid_from)
    )
    for host_id, kernel, valid_from, valid_to in rows:
        stored.setdefault(host_id, []).append((kernel, valid_from, valid_to))
    return stored


def recount_hosts(connection: Connection, hosts: Iterable[int]) -> int:
    """Compute the hosts' intervals again; count out the stored ones that changed and in the new
    ones. Returns how many hosts' intervals changed."""
    ordered = sorted(set(hosts))
    summed, changed = KernelDeltas(), 0
    for start in range(0, len(ordered), READ_CHUNK):
        chunk = ordered[start : start + READ_CHUNK]
        histories, stored = _histories(connection, chunk), _stored(connection, chunk)
        moved = {}
        for host_id in chunk:
            before = stored.get(host_id, [])
            history = histories.get(host_id)
            after = kernel_intervals(history) if history else []
            if after != before:
                summed.add(before, -1)
                summed.add(after, 1)
                moved[host_id] = after
        if moved:
            changed += len(moved)
            connection.execute(delete(KernelInterval).where(KernelInterval.host_id.in_(list(moved))))
            rows = [
                {"host_id": h, "kernel_version": k, "valid_from": f, "valid_to": t}
                for h, intervals in moved.items()
                for k, f, t in intervals
            ]
            if rows:
                connection.execute(insert(KernelInterval), rows)
    _apply(connection, summed)
    return changed


def _apply(connection: Connection, summed: KernelDeltas) -> None:
    daily: list[dict[str, Any]] = [
        {"day": day, "kernel_version": kernel, **dict(zip(DAILY_COUNTS, counts, strict=True))}
        for (day, kernel), counts in summed.daily.items()
        if any(counts)
    ]
    add_deltas(connection, UPSERT_DAILY, EMPTIED_DAILY, daily, ("starts", "ends"))
    gaps = [
        {"kernel_version": kernel, "ended_day": ended, "resumed_day": resumed, "gaps": n}
        for (kernel, ended, resumed), n in summed.gaps.items()
        if n
    ]
    add_deltas(connection, UPSERT_GAPS, EMPTIED_GAPS, gaps, ("gaps",))
