"""One signature's epidemiology, from plain data: samples, baselines, verdict, onset, uptime.

The database layer aggregates (counts per attribute value, daily counts, inventory states)
and hands plain data to these functions; tests and the simulator hand them the same shapes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise

from registry.bounds import EARLIEST_CRASH, latest_crash

from .attributes import CHANGING, CHANGING_SCALARS, AttributeValue, host_values, physical_host_of
from .findings import Baseline, Finding, JointCounts, Scored, analyse_attributes, joint_from_units
from .mixture import CONCENTRATED, MAX_COMPONENTS, Split, component_json, concentrated_part, spread_json
from .narrative import FLEET, Population, start_finding, statements, uptime_finding
from .onset import InventoryChange, onset
from .shapes import BaselineView, ConcentratedComponent, FindingView, SignatureAnalysis, SpreadComponent
from .uptime import OutsideCounts, outside_counts, uptime_profile
from .verdict import Verdict, decide


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
    # distinct hosts, a VM apiece: the independent units a bug's crashes clump on (findings)
    hostnames: int | None = None
    inventory_events: int | None = None  # events on hosts the inventory knows, when known
    # events whose host the inventory shows with other changing values (kernel, firmware...)
    # than the event carried, with no history of the change: a snapshot taken since; and of
    # them, per attribute, those it shows another value of (read when the total calls for it)
    unrecorded_changes: int = 0
    unrecorded_by_attribute: Mapping[str, int] = field(default_factory=dict)
    split: Split | None = field(default=None, compare=False, repr=False)

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

        def split(key: AttributeValue) -> tuple[SignatureSample, SignatureSample]:
            inside = [r for r in records if key in r.values]
            return cls.from_records(inside), cls.from_records(r for r in records if key not in r.values)

        counts: Counter[AttributeValue] = Counter()
        per_host: Counter[str] = Counter()
        hostnames: set[str] = set()
        daily: Counter[date] = Counter()
        for record in records:
            counts.update(record.values)
            per_host[physical_host_of(record.values) or "?"] += 1
            hostnames.update(value for name, value in record.values if name == "hostname")
            daily[record.crashed_at.date()] += 1
        return cls(
            events=len(records),
            counts=dict(counts),
            hosts=len(per_host),
            top_host_events=max(per_host.values(), default=0),
            daily=dict(daily),
            joint=joint_from_units([(1.0, r.values) for r in records]),
            uptimes_s=[r.uptime_s for r in records if r.uptime_s is not None],
            hostnames=len(hostnames),
            split=split,
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
class Controls:
    """The other crashes a case-control baseline holds: those of the population in [start, end)
    and, for a signature that needs long uptimes, those at uptimes of at least `min_uptime_s`."""

    start: datetime
    end: datetime
    min_uptime_s: float | None = None


# Controls -> the case-control baseline (name "crashes", Fisher's test), None when there are none.
CaseControl = Callable[[Controls], Baseline | None]


@dataclass(frozen=True)
class Context:
    """Everything outside the signature: baselines of its population, the observation window,
    fleet uptimes, and since when the inventory has watched the fleet."""

    window_start: date
    window_end: date
    fleet: Baseline | None = None  # host-time of the population over the signature's days
    case_control: CaseControl | None = None
    exposure: Mapping[date, float] | None = None
    changes: Sequence[InventoryChange] = ()
    uptimes: OutsideCounts = NO_UPTIMES
    inventory_since: datetime | None = None  # None: as long as the crashes (or unknown)
    population: Population = FLEET
    crash_view: bool = True  # also report the whole case-control view


def _scored(sample: SignatureSample, baseline: Baseline) -> Scored:
    return analyse_attributes(sample.counts, sample.events, baseline, sample.joint, hosts=sample.hostnames)


def _merge(fleet: Scored, others: Scored, compared: frozenset[str]) -> Scored:
    """The `compared` attributes from the case-control baseline, the rest from the fleet's
    host-time."""

    def pick(mine: Sequence[Finding], theirs: Sequence[Finding]) -> tuple[Finding, ...]:
        kept = [f for f in mine if f.attribute not in compared]
        kept += [f for f in theirs if f.attribute in compared]
        return tuple(sorted(kept, key=lambda f: (f.log10_p, f.log10_p_raw, -f.lift)))

    return replace(
        fleet,
        candidates=pick(fleet.candidates, others.candidates),
        findings=pick(fleet.findings, others.findings),
        explained=pick(fleet.explained, others.explained),
    )


def unrecorded_changes(
    records: Iterable[CrashRecord], states: Sequence[HostState]
) -> tuple[int, dict[str, int]]:
    """How many crashes carried changing values their host's inventory (one state, no history)
    does not show (the inventory is a snapshot taken after they changed), and per attribute how
    many carried another value of it."""
    by_host: dict[str, list[HostState]] = defaultdict(list)
    for state in states:
        by_host[state.hostname].append(state)

    def changing(values: Iterable[AttributeValue]) -> set[AttributeValue]:
        return {v for v in values if v[0] in CHANGING_SCALARS}

    count, by_attribute = 0, Counter[str]()
    for record in records:
        hostname = next((value for name, value in record.values if name == "hostname"), None)
        known = by_host.get(hostname or "", [])
        differs = changing(record.values) ^ changing(known[0].values) if len(known) == 1 else set()
        if differs:
            count += 1
            by_attribute.update({name for name, _ in differs})
    return count, dict(by_attribute)


# Crashes whose values the inventory contradicts (without history) before the snapshot is
# not trusted for changing values: at least this share of the signature, and at least one.
MAX_UNRECORDED_SHARE = 0.05


def _case_control_why(
    sample: SignatureSample, context: Context, uptime: Mapping
) -> tuple[str | None, frozenset[str]]:
    """Why values that change are better compared with the other crashes (or None), and which
    attributes: all that change, but when the only reason is a snapshot inventory contradicted
    by the crashes, only those it is wrong about (a snapshot taken after a kernel rollout still
    knows the hosts' BIOS; the other crashes, which other bugs concentrate on, are the worse
    baseline for it)."""
    first = signature_window(sample)[0]
    since = context.inventory_since
    least = max(1.0, MAX_UNRECORDED_SHARE * sample.events)
    if sample.unrecorded_changes and sample.unrecorded_changes >= least:
        wrong = frozenset(name for name, n in sample.unrecorded_by_attribute.items() if n >= least)
        if not sample.unrecorded_by_attribute:  # not read: every changing attribute, as before
            wrong = CHANGING
        if wrong:
            named = ", ".join(sorted(wrong & set(CHANGING_SCALARS)))
            return (
                f"{sample.unrecorded_changes} of the {sample.events} crashes carried {named} values their "
                "hosts' inventory no longer shows, with no history of the change: it says what hosts run "
                "now, not what they ran then", wrong)
    if since is not None and since > first + BACKDATE_WITHIN:
        return (
            f"the inventory was first loaded on {since.date().isoformat()}, after the first crash "
            f"({first.date().isoformat()}): it says what hosts run now, not what they ran then", CHANGING
        )
    if uptime.get("bound") == "at least":
        return (
            f"these crashes need at least {uptime['bound_days']} days of uptime, and a host up that "
            "long is one no rollout has rebooted yet (the controls are crashes at such uptimes too)", CHANGING
        )
    return None, frozenset()


@dataclass(frozen=True)
class _Scoring:
    """How a signature (or a part of it) is scored: the baselines and why."""

    fleet: Baseline | None
    others: Baseline | None
    why: str | None
    compared: frozenset[str] = frozenset()  # the attributes `why` moves to the case-control baseline

    def __call__(self, sample: SignatureSample) -> Scored | None:
        if self.fleet is None:
            return _scored(sample, self.others) if self.others is not None else None
        main = _scored(sample, self.fleet)
        if self.why is None or self.others is None:
            return main
        return _merge(main, _scored(sample, self.others), self.compared)

    @property
    def name(self) -> str:
        if self.fleet is None:
            return "crashes"
        return "fleet+crashes" if self.why and self.others is not None else "fleet"


def _json(scored: Scored) -> tuple[list[FindingView], list[FindingView]]:
    return [f.as_json() for f in scored.findings], [f.as_json() for f in scored.explained]


def _view(sample: SignatureSample, baseline: Baseline) -> BaselineView:
    scored = _scored(sample, baseline)
    verdict = decide(scored, sample.events, sample.hosts, sample.top_host_share)
    findings, explained = _json(scored)
    return {
        "baseline": baseline.name,
        "verdict": verdict.verdict,
        "verdict_detail": verdict.as_json(),
        "findings": findings,
        "explained": explained,
        "tests": scored.tests,
    }


def _decompose(
    sample: SignatureSample, scored: Scored, scoring: _Scoring, context: Context
) -> tuple[list[ConcentratedComponent], SignatureSample, Scored]:
    """Peel concentrated components off until what remains is one population."""
    components: list[ConcentratedComponent] = []
    rest, rest_scored = sample, scored
    for _ in range(MAX_COMPONENTS):
        part = concentrated_part(rest, rest_scored)
        if part is None:
            break
        uptime = uptime_profile(part.inside.uptimes_s, context.uptimes)
        shape = onset(part.inside.daily, context.window_start, context.window_end, context.exposure)
        components.append(component_json(part, sample.events, uptime, shape))
        rest = part.outside
        rest_scored = scoring(rest) or rest_scored
    return components, rest, rest_scored


def _mixture_verdict(
    components: Sequence[ConcentratedComponent], rest: SignatureSample, verdict: Verdict
) -> Verdict:
    parts = "; ".join(
        f"{CONCENTRATED[c['attribute']]} {c['value']} carries {c['share']:.0%} of the events "
        f"({c['events']}, {c['expected_events']:.1f} expected)"
        for c in components
    )
    return replace(
        verdict,
        reason=f"a mixture: {parts}; the other {rest.events} events: {verdict.reason}",
    )


NO_BASELINE = Verdict("inconclusive", "no baseline: neither an inventory nor other crashes to compare with")


def analyse_signature(sample: SignatureSample, context: Context) -> SignatureAnalysis:
    """The contract's epidemiology body (without the `signature` object)."""
    uptime = uptime_profile(sample.uptimes_s, context.uptimes)
    why, compared = (
        _case_control_why(sample, context, uptime) if context.fleet is not None else (None, frozenset())
    )
    start, end = signature_window(sample)
    low = min(sample.uptimes_s) if uptime.get("bound") == "at least" and sample.uptimes_s else None
    wanted = context.fleet is None or why is not None or context.crash_view
    others = context.case_control(Controls(start, end, low)) if context.case_control and wanted else None
    scoring = _Scoring(context.fleet, others, why, compared)
    scored = scoring(sample)
    components: list[ConcentratedComponent | SpreadComponent] = []
    if scored is None:
        verdict, findings, explained = NO_BASELINE, [], []
    else:
        verdict = decide(scored, sample.events, sample.hosts, sample.top_host_share)
        components, rest, rest_scored = _decompose(sample, scored, scoring, context)
        if components:
            spread = decide(rest_scored, rest.events, rest.hosts, rest.top_host_share)
            verdict = _mixture_verdict(components, rest, spread)
            rest_findings, _ = _json(rest_scored)
            rest_uptime = uptime_profile(rest.uptimes_s, context.uptimes)
            components.append(spread_json(rest, spread.as_json(), rest_findings, rest_uptime))
        findings, explained = _json(scored)
    shape = onset(sample.daily, context.window_start, context.window_end, context.exposure, context.changes)
    timing = [
        t
        for t in (
            start_finding(sample.daily, shape, context.window_start, context.window_end, context.exposure),
            uptime_finding(uptime),
        )
        if t is not None
    ]
    views: dict[str, BaselineView] = {}
    if others is not None and context.fleet is not None and context.crash_view:
        views["crashes"] = _view(sample, others)
    return {
        "events": sample.events,
        "hosts": sample.hosts,
        "verdict": verdict.verdict,
        "verdict_detail": verdict.as_json(),
        "baseline": scoring.name,
        "population": context.population.as_json(),
        "findings": findings,
        "explained": explained,
        "components": components,
        "time_findings": timing,
        "statements": statements(
            verdict.as_json(), context.population, why, components, findings, shape, timing
        ),
        "views": views,
        "onset": shape,
        "uptime": uptime,
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
