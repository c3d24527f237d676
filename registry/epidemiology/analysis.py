"""One signature's epidemiology, from plain data: samples, baselines, verdict, onset, uptime.

The database layer aggregates (counts per attribute value, daily counts, inventory states)
and hands plain data to these functions; tests and the simulator hand them the same shapes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise

from registry.bounds import EARLIEST_CRASH, latest_crash

from .attributes import AttributeValue, host_values, physical_host_of
from .findings import Baseline, JointCounts, analyse_attributes, joint_from_units
from .onset import InventoryChange, onset
from .uptime import OutsideCounts, outside_counts, uptime_profile
from .verdict import decide


@dataclass(frozen=True)
class CrashRecord:
    crashed_at: datetime
    values: frozenset[AttributeValue]
    uptime_s: float | None = None


@dataclass(frozen=True)
class SignatureSample:
    """What the analysis needs to know about one signature's events."""

    events: int
    counts: Mapping[AttributeValue, int]
    hosts: int  # distinct physical hosts
    top_host_events: int
    daily: Mapping[date, int]
    joint: JointCounts  # events carrying both of two values
    uptimes_s: Sequence[float] = ()
    inventory_events: int | None = None  # events on hosts the inventory knows, when known

    @property
    def top_host_share(self) -> float:
        return self.top_host_events / self.events if self.events else 0.0

    @property
    def first_seen(self) -> date | None:
        return min(self.dated_days(), default=None)

    @property
    def last_seen(self) -> date | None:
        return max(self.dated_days(), default=None)

    def dated_days(self) -> list[date]:
        """Days with crashes at a plausible time: a crash time stored before ingest refused
        implausible ones (year 9999, year 1) must not stretch the window over millennia."""
        earliest, latest = EARLIEST_CRASH.date(), latest_crash().date()
        return [day for day in self.daily if earliest <= day <= latest]

    @classmethod
    def from_records(cls, records: Iterable[CrashRecord]) -> SignatureSample:
        records = list(records)
        counts: Counter[AttributeValue] = Counter()
        per_host: Counter[str] = Counter()
        daily: Counter[date] = Counter()
        for record in records:
            counts.update(record.values)
            per_host[physical_host_of(record.values) or "?"] += 1
            daily[record.crashed_at.date()] += 1
        return cls(
            events=len(records),
            counts=dict(counts),
            hosts=len(per_host),
            top_host_events=max(per_host.values(), default=0),
            daily=dict(daily),
            joint=joint_from_units([(1.0, r.values) for r in records]),
            uptimes_s=[r.uptime_s for r in records if r.uptime_s is not None],
        )


@dataclass(frozen=True)
class HostState:
    """A host's attribute values from `start` (None: since before the inventory began)
    until `end` (None: still current)."""

    hostname: str
    values: frozenset[AttributeValue]
    start: datetime | None = None
    end: datetime | None = None

    def covers(self, moment: datetime) -> bool:
        return (self.start is None or self.start <= moment) and (self.end is None or self.end > moment)


BACKDATE_WITHIN = timedelta(days=1)


def states_from_history(history: Iterable[tuple[datetime, Mapping]]) -> list[HostState]:
    """Inventory observations (when, contract host object) -> host states over time.

    Hosts first seen when the inventory was first loaded (within a day of its earliest
    observation) are taken to have been there before, so back-filled crash history has a
    fleet to compare with; later observations start a new state only when a value changed.
    """
    ordered = sorted(history, key=lambda item: item[0])
    if not ordered:
        return []
    backdate_before = ordered[0][0] + BACKDATE_WITHIN
    by_host: dict[str, list[tuple[datetime, frozenset[AttributeValue]]]] = defaultdict(list)
    for observed_at, host in ordered:
        by_host[host["hostname"]].append((observed_at, host_values(host)))
    states: list[HostState] = []
    for hostname, observations in by_host.items():
        first_at, current = observations[0]
        current_start = None if first_at < backdate_before else first_at
        for observed_at, values in observations[1:]:
            if values != current:
                states.append(HostState(hostname, current, current_start, observed_at))
                current_start, current = observed_at, values
        states.append(HostState(hostname, current, current_start, None))
    return states


def _overlap_days(state: HostState, start: datetime, end: datetime) -> float:
    begin = start if state.start is None else max(state.start, start)
    stop = end if state.end is None else min(state.end, end)
    return max(0.0, (stop - begin).total_seconds() / 86_400.0)


def fleet_baseline(states: Sequence[HostState], start: datetime, end: datetime) -> Baseline:
    """Host-time shares over [start, end): a host present throughout counts 1."""
    length = max((end - start).total_seconds() / 86_400.0, 1e-9)
    counts: dict[AttributeValue, float] = defaultdict(float)
    units: list[tuple[float, frozenset[AttributeValue]]] = []
    total = 0.0
    for state in states:
        weight = _overlap_days(state, start, end) / length
        if weight <= 0:
            continue
        total += weight
        units.append((weight, state.values))
        for key in state.values:
            counts[key] += weight
    return Baseline("fleet", "binomial", total, dict(counts), joint_from_units(units))


def exposure_by_day(states: Sequence[HostState], start: date, end: date) -> dict[date, float]:
    """Hosts in the fleet on each day (at noon), by a sweep over state starts and ends."""
    step: Counter[date] = Counter()
    for state in states:
        first = start if state.start is None else _noon_day(state.start)
        last = end + timedelta(days=1) if state.end is None else _noon_day(state.end)
        if first < last:
            step[max(first, start)] += 1
            step[last] -= 1
    out: dict[date, float] = {}
    running = sum(n for d, n in step.items() if d < start)
    day = start
    while day <= end:
        running += step.get(day, 0)
        out[day] = float(running)
        day += timedelta(days=1)
    return out


def _noon_day(moment: datetime) -> date:
    """The first day whose noon is at or after `moment`."""
    day = moment.astimezone(UTC).date()
    return day if moment <= datetime.combine(day, time(12), tzinfo=UTC) else day + timedelta(1)


def inventory_changes(states: Sequence[HostState]) -> list[InventoryChange]:
    """Per day and attribute value, how many hosts took that value (rollout steps)."""
    by_host: dict[str, list[HostState]] = defaultdict(list)
    for state in states:
        by_host[state.hostname].append(state)
    steps: Counter[tuple[date, str, str]] = Counter()
    for host_states in by_host.values():
        host_states.sort(key=lambda s: s.start or datetime.min.replace(tzinfo=UTC))
        for previous, current in pairwise(host_states):
            if current.start is None:
                continue
            for attribute, value in current.values - previous.values:
                steps[(current.start.date(), attribute, value)] += 1
    return [InventoryChange(d, a, v, n) for (d, a, v), n in sorted(steps.items())]


NO_UPTIMES = outside_counts(())


@dataclass(frozen=True)
class Context:
    """Everything outside the signature: baselines, observation window, fleet uptimes."""

    baselines: Sequence[Baseline]  # the first one decides the verdict
    window_start: date
    window_end: date
    exposure: Mapping[date, float] | None = None
    changes: Sequence[InventoryChange] = ()
    uptimes: OutsideCounts = NO_UPTIMES


def _view(sample: SignatureSample, baseline: Baseline) -> dict:
    scored = analyse_attributes(sample.counts, sample.events, baseline, sample.joint)
    verdict = decide(scored, sample.events, sample.hosts, sample.top_host_share)
    return {
        "baseline": baseline.name,
        "verdict": verdict.verdict,
        "verdict_detail": verdict.as_json(),
        "findings": [f.as_json() for f in scored.findings],
        "explained": [f.as_json() for f in scored.explained],
        "tests": scored.tests,
    }


def analyse_signature(sample: SignatureSample, context: Context) -> dict:
    """The contract's epidemiology body (without the `signature` object)."""
    views = [_view(sample, baseline) for baseline in context.baselines]
    main = views[0]
    return {
        "events": sample.events,
        "hosts": sample.hosts,
        "verdict": main["verdict"],
        "verdict_detail": main["verdict_detail"],
        "baseline": main["baseline"],
        "findings": main["findings"],
        "explained": main["explained"],
        "views": {view["baseline"]: view for view in views[1:]},
        "onset": onset(
            sample.daily,
            context.window_start,
            context.window_end,
            context.exposure,
            context.changes,
        ),
        "uptime": uptime_profile(sample.uptimes_s, context.uptimes),
    }


def signature_window(sample: SignatureSample) -> tuple[datetime, datetime]:
    """Whole days from the first to the last crash: the fleet as it was meanwhile."""
    first = sample.first_seen or date.today()
    last = sample.last_seen or first
    start = datetime.combine(first, time(0), tzinfo=UTC)
    return start, datetime.combine(last, time(0), tzinfo=UTC) + timedelta(days=1)


def inventory_coverage(sample: SignatureSample, fleet: Baseline) -> float:
    """Share of the signature's events on hosts the inventory knows."""
    if not sample.events:
        return 0.0
    if sample.inventory_events is not None:
        return sample.inventory_events / sample.events
    hostnames = ((value, k) for (name, value), k in sample.counts.items() if name == "hostname")
    known = sum(k for value, k in hostnames if fleet.counts.get(("hostname", value)))
    return known / sample.events


MIN_INVENTORY_COVERAGE = 0.5


def fleet_view(sample: SignatureSample, fleet: Baseline | None) -> Baseline | None:
    """The fleet baseline (host-time over the signature's days) when the inventory knows
    enough of the signature's hosts to be the denominator."""
    if fleet is None or inventory_coverage(sample, fleet) < MIN_INVENTORY_COVERAGE:
        return None
    return fleet


def crash_baseline(
    counts: Mapping[AttributeValue, int],
    total: int,
    joint: JointCounts,
) -> Baseline:
    return Baseline("crashes", "fisher", float(total), counts, joint)
