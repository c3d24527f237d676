"""Is a signature two populations under one fingerprint: a concentrated part plus a spread one?

The "impossible" bug that was really two: a bad physical host crashing its VMs with the same
stack as a rare race spread over every VM. The whole signature then over-represents the host,
but the host carries only part of it, and without the host the rest is spread over many hosts.
A unit (physical host, host, cluster) is a concentrated component when it is a finding with a
large lift, the events outside it are spread (enough of them, on enough hosts, none carrying
half), and the unit holds far more events than the spread part predicts for a unit of its
size (Poisson upper tail of its events given the outside events and its baseline share,
counted in the clumps the spread part's hosts crash in: a bug that recurs on whichever host it
hits puts several crashes on each, and a unit holding as many as they do is one of them;
corrected for every unit it could have been: the baseline's size, not only the values with
enough events to be tested, since the busiest of many hosts always looks busy). Then the
verdict belongs to the spread part, and the unit is reported beside it.

The lift floor is lower than the single-host rule's: when a program's hosts are known only
from its crash reports, a bad host's VMs are all in that population (they crashed), which
inflates its baseline share; the Poisson test then carries the decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .exact import poisson_upper_log10, to_p_value
from .findings import LOG10_ALPHA, Finding, Scored
from .shapes import (
    ConcentratedComponent,
    FindingView,
    OnsetView,
    SpreadComponent,
    UptimeProfile,
    VerdictDetail,
)
from .verdict import SPREAD_MIN_EVENTS, is_spread

if TYPE_CHECKING:
    from .analysis import SignatureSample

# Attributes that name one place crashes can concentrate on -> how a person calls it.
CONCENTRATED: dict[str, str] = {
    "physical_host": "physical host",
    "hostname": "host",
    "cluster": "cluster",
}
MIN_COMPONENT_LIFT = 3.0
MAX_COMPONENTS = 3  # a second bad host is possible; a signature of many is a hardware problem

# value -> (the events carrying it, the events not carrying it)
Split = Callable[[tuple[str, str]], tuple["SignatureSample", "SignatureSample"]]


@dataclass(frozen=True)
class Part:
    """A concentrated component found in a sample, and what remains without it."""

    finding: Finding
    inside: SignatureSample
    outside: SignatureSample
    expected: float  # events the spread part predicts on a unit of its size
    log10_p: float

    @property
    def name(self) -> str:
        return CONCENTRATED[self.finding.attribute]


def concentrated_part(sample: SignatureSample, scored: Scored) -> Part | None:
    """The strongest concentrated component of `sample` (scored against its baseline), if any."""
    if sample.split is None:
        return None
    for finding in scored.findings:
        if (
            finding.attribute not in CONCENTRATED
            or finding.lift < MIN_COMPONENT_LIFT
            or sample.events - finding.events < SPREAD_MIN_EVENTS  # the rest cannot be spread
        ):
            continue
        inside, outside = sample.split(finding.key)
        if not is_spread(outside.events, outside.hosts, outside.top_host_share):
            continue
        share = min(max(finding.baseline_count, 0.5) / max(finding.baseline_total, 1.0), 0.5)
        expected = outside.events * share / (1.0 - share)
        # a spread host's crashes: the clumps the test counts in
        clump = max(1.0, outside.events / max(outside.hostnames or outside.hosts, 1))
        family = math.log10(max(scored.tests, finding.baseline_total, 1.0))
        clumps = max(1, round(inside.events / clump))
        log10_p = min(0.0, poisson_upper_log10(clumps, expected / clump) + family)
        if log10_p < LOG10_ALPHA:
            return Part(finding, inside, outside, expected, log10_p)
    return None


def component_json(part: Part, whole: int, uptime: UptimeProfile, onset: OnsetView) -> ConcentratedComponent:
    """The concentrated part as the answer carries it: which unit, how many crashes, since
    when, its uptime profile, and a sentence."""
    inside = part.inside
    hosts = sorted(value for (attribute, value) in inside.counts if attribute == "hostname")
    first = inside.first_seen.isoformat() if inside.first_seen else None
    since = onset.get("change_point") or first
    words = (
        f"{part.name} {part.finding.value} carries {inside.events} of the {whole} crashes "
        f"({inside.events / whole:.0%}) where the spread part predicts {part.expected:.1f} for it"
        f"; {len(hosts)} of its hosts crashed"
        + (f", from {first}" if first else "")
        + (f" (clearly more since {since})" if since and since != first else "")
    )
    if uptime.get("median_days") is not None:
        words += f"; median uptime at crash {uptime['median_days']:.1f} days"
    if uptime.get("statement"):
        words += f", {uptime['statement']}"
    return {
        "kind": "concentrated",
        "attribute": part.finding.attribute,
        "value": part.finding.value,
        "events": inside.events,
        "share": round(inside.events / whole, 4) if whole else 0.0,
        "expected_events": round(part.expected, 3),
        "lift": round(part.finding.lift, 3),
        "p_value": to_p_value(part.log10_p),
        "log10_p": round(max(part.log10_p, -10_000.0), 3),
        "baseline": part.finding.baseline,
        "hosts": len(hosts),
        "hostnames": hosts[:20],
        "first_seen": first,
        "last_seen": inside.last_seen.isoformat() if inside.last_seen else None,
        "since": since,
        "onset": onset,
        "uptime": uptime,
        "statement": words,
    }


def spread_json(
    rest: SignatureSample, verdict: VerdictDetail, findings: list[FindingView], uptime: UptimeProfile
) -> SpreadComponent:
    """The spread part that remains: the events the verdict is about."""
    return {
        "kind": "spread",
        "events": rest.events,
        "hosts": rest.hosts,
        "verdict": verdict["verdict"],
        "reason": verdict["reason"],
        "findings": findings[:5],
        "first_seen": rest.first_seen.isoformat() if rest.first_seen else None,
        "last_seen": rest.last_seen.isoformat() if rest.last_seen else None,
        "uptime": uptime,
        "statement": f"the other {rest.events} crashes on {rest.hosts} physical hosts: {verdict['reason']}",
    }
