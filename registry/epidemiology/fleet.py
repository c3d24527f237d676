"""The fleet as it was, from plain data: host-time per attribute value over any window.

The inventory (current values and attribute history, `fleet_sql.load_inventory`) becomes:

- **steady hosts**: there since the inventory began (see `backfilled`), not retired, no
  attribute history: every value they carry covers any window, so each counts 1 (the bulk of a
  fleet). Alike hosts share one *profile* (their values but the hostname);
- **moving hosts**: the others, as value intervals: each recorded change closes the interval of
  the old value (from the previous change, or when the host appeared), and the current value
  runs from the last change until the host retires. Labels count with their current values.

A window's host-time is then a sum over profiles plus the moving hosts' intervals cut to the
window, in whole microseconds (exact), divided by the window's length once: any window, any
population and any values asked, without reading the database again. The service keeps one
loaded inventory while the inventory's rows are unchanged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

from .analysis import HostState, exposure_by_day
from .attributes import HOST_ATTRIBUTES, AttributeValue
from .findings import Baseline, Pair

# Attributes whose changes the inventory records (the hostname names the host itself).
TRACKED = tuple(name for name in HOST_ATTRIBUTES if name != "hostname")
# Hosts first seen within this long of the inventory's first load were there before it
# (back-filled crash history then has a fleet to compare with).
BACKDATE_WITHIN = timedelta(days=1)

Span = tuple[datetime | None, datetime | None]  # from, until (None: open)
Interval = tuple[AttributeValue, datetime | None, datetime | None]  # a value's span


@dataclass(frozen=True)
class HostRow:
    """An inventory host as stored: current values of TRACKED (None: unknown) and labels."""

    id: int
    hostname: str
    first_seen: datetime
    retired_at: datetime | None
    values: Mapping[str, Any]
    labels: Mapping[str, Any]


@dataclass(frozen=True)
class ChangeRow:
    """One recorded change of a TRACKED attribute: the value it had until `changed_at`."""

    host_id: int
    attribute: str
    old_value: str | None
    changed_at: datetime


@dataclass(frozen=True)
class MovingHost:
    id: int
    born: datetime | None  # None: since before the inventory began
    retired: datetime | None
    intervals: tuple[Interval, ...]


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _overlap(start: datetime, end: datetime, s: datetime | None, e: datetime | None) -> int:
    """Microseconds of [s, e) inside [start, end) (open ends: None)."""
    begin = start if s is None or s < start else s
    stop = end if e is None or e > end else e
    return max(0, _micros(stop - begin))


def _current(host: HostRow) -> list[AttributeValue]:
    """A host's current values of TRACKED (the physical host defaults to the host itself)."""
    values = []
    for name in TRACKED:
        value = host.values.get(name)
        if name == "physical_host" and value is None:
            value = host.hostname
        if value is not None:
            values.append((name, str(value)))
    return values


def _labels(host: HostRow) -> list[AttributeValue]:
    return [("labels", f"{key}={value}") for key, value in (host.labels or {}).items()]


def _intervals(host: HostRow, born: datetime | None, changes: Sequence[ChangeRow]) -> tuple[Interval, ...]:
    """A moving host's value intervals: per attribute, each change closes its old value's."""
    out: list[Interval] = [(("hostname", host.hostname), born, host.retired_at)]
    by_attribute: dict[str, list[ChangeRow]] = defaultdict(list)
    for change in changes:
        by_attribute[change.attribute].append(change)
    current = dict(_current(host))
    for name in TRACKED:
        since = born
        for change in by_attribute.get(name, ()):
            old = change.old_value
            if name == "physical_host" and old is None:
                old = host.hostname
            if old is not None:
                out.append(((name, str(old)), since, change.changed_at))
            since = change.changed_at
        if name in current:
            out.append(((name, current[name]), since, host.retired_at))
    out.extend((label, born, host.retired_at) for label in _labels(host))
    return tuple(out)


def backfilled(first_seen: datetime, since: datetime | None) -> bool:
    """Was the host loaded with the first inventory (then it counts from the beginning)?"""
    return since is not None and first_seen < since + BACKDATE_WITHIN


@dataclass(frozen=True)
class Inventory:
    since: datetime | None  # the inventory's first load
    values: tuple[AttributeValue, ...]  # every value a steady host carries, by number
    profiles: tuple[tuple[int, ...], ...]  # steady hosts' values (numbers), hostname aside
    steady: Mapping[int, tuple[str, int]]  # steady host id -> (hostname, profile index)
    moving: tuple[MovingHost, ...]

    @classmethod
    def from_rows(cls, hosts: Iterable[HostRow], changes: Iterable[ChangeRow]) -> Inventory:
        """`changes`: ordered by host, attribute, time (and id for changes of the same time)."""
        hosts = list(hosts)
        since = min((host.first_seen for host in hosts), default=None)
        changed: dict[int, list[ChangeRow]] = defaultdict(list)
        for change in changes:
            changed[change.host_id].append(change)
        # numbered values and profiles: 100,000 hosts' values held once each (tens of MB, not hundreds)
        numbers: dict[AttributeValue, int] = {}
        index: dict[tuple[int, ...], int] = {}
        steady: dict[int, tuple[str, int]] = {}
        moving: list[MovingHost] = []
        for host in hosts:
            born = None if backfilled(host.first_seen, since) else host.first_seen
            if born is None and host.retired_at is None and host.id not in changed:
                carried = {numbers.setdefault(v, len(numbers)) for v in (*_current(host), *_labels(host))}
                profile = tuple(sorted(carried))
                steady[host.id] = (host.hostname, index.setdefault(profile, len(index)))
            else:
                intervals = _intervals(host, born, changed.get(host.id, ()))
                moving.append(MovingHost(host.id, born, host.retired_at, intervals))
        return cls(since, tuple(numbers), tuple(index), steady, tuple(moving))

    @cached_property
    def _fleet(self) -> _Part:
        return _Part(self, self.steady, self.moving)

    def baseline(
        self,
        start: datetime,
        end: datetime,
        only: Mapping[str, Sequence[str]] | None = None,
        population: Sequence[int] | None = None,
    ) -> Baseline | None:
        """Host-time (in hosts present throughout) per attribute value over [start, end), on the
        hosts of `population` (None: the fleet). `only`: {"hostname": [...], ...}: count only
        these values of those attributes (the signature's; the others are never tested)."""
        if population is None:
            part = self._fleet
        else:
            chosen = set(population)
            members = {h: self.steady[h] for h in chosen if h in self.steady}
            part = _Part(self, members, tuple(host for host in self.moving if host.id in chosen))
        return part.baseline(start, end, only)

    def exposure(self, first: date, last: date) -> dict[date, float] | None:
        """Hosts in the fleet per day: those there throughout, plus a sweep over the others."""
        throughout = len(self.steady)
        states = []
        for host in self.moving:
            if host.born is None and host.retired is None:
                throughout += 1
            else:
                states.append(HostState("", frozenset(), host.born, host.retired))
        if not throughout and not states:
            return None
        return {day: n + throughout for day, n in exposure_by_day(states, first, last).items()}


class _Part:
    """The hosts of a population: steady ones by profile, the moving ones by interval (alike
    intervals grouped), each value's carriers found once and kept."""

    def __init__(
        self, inventory: Inventory, members: Mapping[int, tuple[str, int]], moving: Sequence[MovingHost]
    ) -> None:
        self.profiles = inventory.profiles
        self.number = {value: n for n, value in enumerate(inventory.values)}
        self.members = members
        self.moving = moving
        self.counts = Counter(profile for _, profile in members.values())
        values: dict[AttributeValue, int] = defaultdict(int)  # steady hosts per value, hostnames aside
        for profile, n in self.counts.items():
            for number in self.profiles[profile]:
                values[inventory.values[number]] += n
        self.values = dict(values)
        self.by_name = {name: profile for name, profile in members.values()}
        self.lifetimes = Counter((host.born, host.retired) for host in moving)
        self.spans: dict[AttributeValue, Counter[Span]] = defaultdict(Counter)
        for host in moving:
            for key, s, e in host.intervals:
                self.spans[key][(s, e)] += 1
        self._carriers: dict[AttributeValue, tuple[frozenset[int], tuple[MovingHost, ...]]] = {}

    def carriers(self, key: AttributeValue) -> tuple[frozenset[int], tuple[MovingHost, ...]]:
        """The steady profiles carrying `key` (a hostname: none) and the moving hosts that ever did."""
        if key not in self._carriers:
            number = self.number.get(key, -1)
            profiles = frozenset(p for p in self.counts if number in self.profiles[p])
            moving = tuple(host for host in self.moving if any(k == key for k, _, _ in host.intervals))
            self._carriers[key] = (profiles, moving)
        return self._carriers[key]

    def baseline(
        self, start: datetime, end: datetime, only: Mapping[str, Sequence[str]] | None
    ) -> Baseline | None:
        length = max(_micros(end - start), 1)
        asked = {name: set(values) for name, values in (only or {}).items()}

        def wanted(key: AttributeValue) -> bool:
            return key[0] not in asked or key[1] in asked[key[0]]

        weights = {key: n * length for key, n in self.values.items() if wanted(key)}
        names = asked.get("hostname")
        steady_names = self.by_name if names is None else (name for name in names if name in self.by_name)
        weights |= {("hostname", name): length for name in steady_names}
        for key, spans in self.spans.items():
            if wanted(key) and (w := sum(n * _overlap(start, end, s, e) for (s, e), n in spans.items())):
                weights[key] = weights.get(key, 0) + w
        total = self.counts.total() * length
        total += sum(n * _overlap(start, end, s, e) for (s, e), n in self.lifetimes.items())
        if total <= 0:
            return None

        def joint(keys: Sequence[AttributeValue]) -> dict[Pair, float]:
            return {pair: w / length for pair, w in self.joint(set(keys), start, end).items()}

        counts = {key: w / length for key, w in weights.items() if w}
        return Baseline("fleet", "binomial", total / length, counts, joint)

    def joint(self, wanted: set[AttributeValue], start: datetime, end: datetime) -> dict[Pair, int]:
        """Microseconds of host-time carrying both values, for every pair of `wanted`."""
        length = _micros(end - start)
        out: dict[Pair, int] = defaultdict(int)
        carriers = {key: self.carriers(key) for key in wanted}
        for a, b in _pairs(wanted):
            steady = carriers[a][0] & carriers[b][0]
            out[(a, b)] += sum(self.counts[p] for p in steady) * length
            for (attribute, name), other in ((a, b), (b, a)):
                profile = self.by_name.get(name) if attribute == "hostname" else None
                if profile is not None and self.number.get(other, -1) in self.profiles[profile]:
                    out[(a, b)] += length
        hosts = {id(host): host for key in wanted for host in carriers[key][1]}
        for host in hosts.values():
            carried = [(key, s, e) for key, s, e in host.intervals if key in wanted]
            for i, (a, s1, e1) in enumerate(carried):
                for b, s2, e2 in carried[i + 1 :]:
                    if a != b and (w := _overlap(start, end, _later(s1, s2), _earlier(e1, e2))):
                        out[(a, b) if a < b else (b, a)] += w
        return {pair: w for pair, w in out.items() if w}


def _pairs(values: Iterable[AttributeValue]) -> Iterator[Pair]:
    present = sorted(values)
    for i, a in enumerate(present):
        for b in present[i + 1 :]:
            yield (a, b)


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    """The later of two interval starts (None: open, the earliest)."""
    return b if a is None else a if b is None else max(a, b)


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    """The earlier of two interval ends (None: open, the latest)."""
    return b if a is None else a if b is None else min(a, b)
