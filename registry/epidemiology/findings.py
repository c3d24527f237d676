"""Which host attribute values a signature over-represents, and which of them explain others.

A *baseline* says how common each attribute value is where crashes could have happened:
the fleet inventory (host-time, so a kernel rolled out mid-window counts for the part of
the window it ran) or all crashes (every event). The signature's share of a value is tested
against it with an exact one-sided test, corrected for every value that could have been the
finding (not only those with enough events to test: the busiest of many hosts always looks
busy).

Crashes of one bug come in clumps: a host that hit it once often hits it again (its workload,
its uptime), so twenty crashes on four hosts are four hosts' worth of evidence, not twenty
(pseudo-replication). Each value is tested on clumps: its events and the signature's divided
by the events a host brings on average (`clump_size`).

"Explained by" comes from the data: how many baseline units and signature events carry
both A and B. A finding B is dropped when a stronger finding A explains it: B is neither
over-represented outside A nor within A. When A implies B in the baseline (a BIOS version
that exists on one SKU only; a physical host and its region) B's excess lies inside A and
B goes; when B lies inside A but stands out there (one VM of a bad host crashing far more
than its siblings) B stays. Values that cover the same units keep the more specific one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from .attributes import SPECIFICITY_RANK, AttributeValue
from .exact import (
    CORRECTIONS,
    binomial_upper_log10,
    hypergeometric_upper_log10,
    to_p_value,
)
from .shapes import FindingView

Pair = tuple[AttributeValue, AttributeValue]
# keys -> for pairs (a, b) of them (a < b), how much carries both; missing pairs mean 0.
JointCounts = Callable[[Sequence[AttributeValue]], Mapping[Pair, float]]

ALPHA = 0.01
MIN_SUPPORT = 3
# Effect-size floor: with 100,000 events a value 5% more common than in the fleet is
# "significant" and means nothing.
MIN_LIFT = 1.1
LOG10_ALPHA = math.log10(ALPHA)
# A value of these names one host: its own excess is what is tested, so its clump size is the
# other hosts' (clump_size).
UNITS = frozenset({"physical_host", "hostname"})


def clump_size(attribute: str, k: int, events: int, hosts: int | None) -> float:
    """How many of a signature's `events` a host (a VM apiece: `hosts` distinct ones) brings on
    average, for testing a value carried by `k` of them: for a host or physical host, the
    other hosts' average (one host crashing far more often than the others is the finding);
    for any other value, the signature's events over its hosts. 1 when unknown."""
    if not hosts or hosts >= events:
        return 1.0
    if attribute in UNITS:
        return max(1.0, (events - k) / (hosts - 1)) if hosts > 1 and events > k else 1.0
    return events / hosts


def _binomial_test(k: int, n: int, base_count: float, base_total: float) -> float:
    # A value unseen in the inventory still gets half a host, so the test stays finite.
    share = max(base_count, 0.5) / max(base_total, 1.0)
    return binomial_upper_log10(k, n, min(share, 1.0))


def _fisher_test(k: int, n: int, base_count: float, base_total: float) -> float:
    return hypergeometric_upper_log10(k, n, round(base_count), round(base_total))


# Baseline kind -> exact test of "k of n signature events carry a value that covers
# base_count of base_total baseline units".
TESTS: dict[str, Callable[[int, int, float, float], float]] = {
    "binomial": _binomial_test,
    "fisher": _fisher_test,
}


@dataclass(frozen=True)
class Baseline:
    """Denominators: how much of the baseline carries each attribute value."""

    name: str  # "fleet" (host-time from the inventory) or "crashes" (case-control)
    test: str  # key of TESTS
    total: float
    counts: Mapping[AttributeValue, float]
    joint: JointCounts = lambda keys: {}

    def share(self, key: AttributeValue) -> float:
        return self.counts.get(key, 0.0) / self.total if self.total else 0.0

    @cached_property
    def ascending(self) -> list[float]:
        return sorted(self.counts.values())

    def testable(self, counts: Mapping[AttributeValue, int], events: int) -> int:
        """How many values could be significant at all with `events` events (all of them
        carrying the value): the multiple-testing family. Tarone's point: a value too common
        ever to stand out costs no power, and every other one counts, tested or not. The
        best p-value rises with a value's baseline count, so the testable ones are a prefix
        of the counts in ascending order."""
        if not events:
            return 0
        test = TESTS[self.test]
        ascending = self.ascending
        low, high = 0, len(ascending)  # the first count whose best p-value is not below ALPHA
        while low < high:
            middle = (low + high) // 2
            if test(events, events, ascending[middle], self.total) < LOG10_ALPHA:
                low = middle + 1
            else:
                high = middle
        unseen = sum(1 for key in counts if key not in self.counts)  # half a unit: always testable
        return low + unseen


@dataclass(frozen=True)
class Finding:
    attribute: str
    value: str
    events: int
    signature_events: int
    baseline_count: float
    baseline_total: float
    log10_p_raw: float
    log10_p: float  # adjusted for multiple testing
    supported: bool  # at least MIN_SUPPORT events
    explained_by: AttributeValue | None = None
    baseline: str = "fleet"  # the Baseline's name it was tested against
    test: str = "binomial"  # the Baseline's test (key of TESTS)
    clump: float = 1.0  # events a host brings on average (clump_size)

    @property
    def key(self) -> AttributeValue:
        return (self.attribute, self.value)

    def clumps(self, events: float) -> int:
        """`events` as independent units (clumps): at least one when there are any."""
        return max(1, round(events / self.clump)) if events > 0 else 0

    def log10_p_of(self, k: float, n: float, base_count: float, base_total: float) -> float:
        """The baseline's test of `k` of `n` of this value's events, counted in clumps."""
        return TESTS[self.test](self.clumps(k), self.clumps(n), base_count, base_total)

    @property
    def in_signature(self) -> float:
        return self.events / self.signature_events if self.signature_events else 0.0

    @property
    def overall(self) -> float:
        return self.baseline_count / self.baseline_total if self.baseline_total else 0.0

    @property
    def lift(self) -> float:
        overall = max(self.baseline_count, 0.5) / max(self.baseline_total, 1.0)
        return self.in_signature / overall

    @property
    def significant(self) -> bool:
        return self.supported and self.log10_p < LOG10_ALPHA and self.lift >= MIN_LIFT

    def as_json(self) -> FindingView:
        return {
            "attribute": self.attribute,
            "value": self.value,
            "in_signature": round(self.in_signature, 6),
            "overall": round(self.overall, 6),
            "lift": round(self.lift, 3),
            "p_value": to_p_value(self.log10_p),
            "log10_p": round(max(self.log10_p, -10_000.0), 3),
            "events": self.events,
            "explained_by": "=".join(self.explained_by) if self.explained_by else None,
            "baseline": self.baseline,
        }


@dataclass(frozen=True)
class Scored:
    """Every over-represented value of a signature, strongest first."""

    candidates: tuple[Finding, ...]
    tests: int  # how many values were tested (the multiple-testing family)
    baseline: Baseline
    findings: tuple[Finding, ...] = field(default=())  # kept: significant, unexplained
    explained: tuple[Finding, ...] = field(default=())  # significant but explained


def _strength(f: Finding) -> tuple:
    return (f.log10_p, f.log10_p_raw, -f.lift, SPECIFICITY_RANK.get(f.attribute, 99), f.value)


UNSUPPORTED_KEPT = 20  # below-support candidates kept (by lift) for "how many more events"


def score(
    counts: Mapping[AttributeValue, int],
    events: int,
    baseline: Baseline,
    min_support: int = MIN_SUPPORT,
    correction: str = "holm",
    hosts: int | None = None,
) -> tuple[list[Finding], int]:
    """Test each over-represented value with enough support (in clumps: `hosts` distinct hosts
    carry the `events`) and adjust over every testable value; of the rest keep the few with
    the highest lift (they can only say how many more events). With the family's size."""
    raw: list[Finding] = []
    for (attribute, value), k in counts.items():
        base = baseline.counts.get((attribute, value), 0.0)
        if not events or k / events <= baseline.share((attribute, value)):
            continue
        finding = Finding(
            attribute=attribute,
            value=value,
            events=k,
            signature_events=events,
            baseline_count=base,
            baseline_total=baseline.total,
            log10_p_raw=0.0,
            log10_p=0.0,
            supported=False,
            baseline=baseline.name,
            test=baseline.test,
            clump=clump_size(attribute, k, events, hosts),
        )
        raw.append(replace(finding, supported=finding.clumps(k) >= min_support))
    supported = [f for f in raw if f.supported]
    unsupported = sorted((f for f in raw if not f.supported), key=lambda f: -f.lift)[:UNSUPPORTED_KEPT]
    tested = [
        replace(f, log10_p_raw=f.log10_p_of(f.events, events, f.baseline_count, f.baseline_total))
        for f in supported + unsupported
    ]
    supported, unsupported = tested[: len(supported)], tested[len(supported) :]
    family = max(len(supported), baseline.testable(counts, events))
    padded = [f.log10_p_raw for f in supported] + [0.0] * (family - len(supported))  # untested: p 1
    adjusted = CORRECTIONS[correction](padded)
    out = [replace(f, log10_p=a) for f, a in zip(supported, adjusted, strict=False)]
    out += [replace(f, log10_p=min(0.0, f.log10_p_raw + math.log10(max(family, 1)))) for f in unsupported]
    return sorted(out, key=_strength), family


def _pair(a: AttributeValue, b: AttributeValue) -> Pair:
    return (a, b) if a <= b else (b, a)


def explains(
    a: Finding,
    b: Finding,
    baseline: Baseline,
    both_events: float,
    both_baseline: float,
    tests: int,
) -> bool:
    """Does the (stronger) finding `a` account for finding `b`? `both_*`: how many signature
    events and baseline units carry both values."""
    family = math.log10(max(tests, 1))
    outside = b.log10_p_of(
        b.events - both_events,
        b.signature_events - a.events,
        b.baseline_count - both_baseline,
        b.baseline_total - a.baseline_count,
    )
    within = b.log10_p_of(both_events, a.events, both_baseline, a.baseline_count)
    return outside + family >= LOG10_ALPHA and within + family >= LOG10_ALPHA


def select(
    candidates: Sequence[Finding], baseline: Baseline, signature_joint: JointCounts, tests: int
) -> tuple[list[Finding], list[Finding]]:
    """Split significant candidates into kept findings and ones a stronger finding explains
    (`tests`: the multiple-testing family)."""
    significant = [f for f in candidates if f.significant]
    keys = [f.key for f in significant]
    in_signature = signature_joint(keys) if keys else {}
    in_baseline = baseline.joint(keys) if keys else {}
    kept: list[Finding] = []
    explained: list[Finding] = []
    for finding in significant:
        parent = next(
            (
                k
                for k in kept
                if explains(
                    k,
                    finding,
                    baseline,
                    in_signature.get(_pair(k.key, finding.key), 0),
                    in_baseline.get(_pair(k.key, finding.key), 0.0),
                    tests,
                )
            ),
            None,
        )
        if parent is None:
            kept.append(finding)
        else:
            explained.append(replace(finding, explained_by=parent.key))
    return kept, explained


def analyse_attributes(
    counts: Mapping[AttributeValue, int],
    events: int,
    baseline: Baseline,
    signature_joint: JointCounts,
    min_support: int = MIN_SUPPORT,
    correction: str = "holm",
    hosts: int | None = None,
) -> Scored:
    candidates, tests = score(counts, events, baseline, min_support, correction, hosts)
    kept, explained = select(candidates, baseline, signature_joint, tests)
    return Scored(
        candidates=tuple(candidates),
        tests=tests,
        baseline=baseline,
        findings=tuple(kept),
        explained=tuple(explained),
    )


def joint_from_units(units: Sequence[tuple[float, frozenset[AttributeValue]]]) -> JointCounts:
    """Joint counts over plain (weight, values) units: fleet host states or crash events."""

    def joint(keys: Sequence[AttributeValue]) -> dict[Pair, float]:
        wanted = set(keys)
        out: dict[Pair, float] = defaultdict(float)
        for weight, values in units:
            present = sorted(values & wanted)
            for i, a in enumerate(present):
                for b in present[i + 1 :]:
                    out[(a, b)] += weight
        return dict(out)

    return joint
