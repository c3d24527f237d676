"""From findings to a verdict an operator can act on (the rules are a table)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .attributes import FAMILY
from .findings import LOG10_ALPHA, MIN_SUPPORT, Finding, Scored
from .shapes import VerdictDetail


@dataclass(frozen=True)
class VerdictRule:
    verdict: str
    family: str  # attributes.FAMILY of the finding
    min_share: float  # the value carries at least this share of the signature's events
    min_lift: float  # ... and at least this many times its share of the baseline


VERDICT_RULES: tuple[VerdictRule, ...] = (
    # One physical host carries the signature while it is a sliver of the fleet: drain it.
    VerdictRule("single-host", "host", 0.5, 5.0),
    VerdictRule("hardware-config", "hardware", 0.5, 1.0),
    VerdictRule("software", "software", 0.5, 1.0),
)

# A signature on many hosts with no concentration anywhere is a software bug.
SPREAD_MIN_EVENTS = 10
SPREAD_MIN_HOSTS = 5
SPREAD_MAX_HOST_SHARE = 0.5
MAX_MORE_EVENTS = 100_000


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    finding: Finding | None = None
    more_events_needed: int | None = None

    def as_json(self) -> VerdictDetail:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "finding": self.finding.as_json() if self.finding else None,
            "more_events_needed": self.more_events_needed,
        }


def _matching_rule(finding: Finding) -> VerdictRule | None:
    family = FAMILY.get(finding.attribute)
    for rule in VERDICT_RULES:
        if rule.family == family and finding.in_signature >= rule.min_share and finding.lift >= rule.min_lift:
            return rule
    return None


def _decides_after(candidate: Finding, extra: int, tests: int, test_name: str) -> bool:
    """Would `extra` more events, shared (and clumped) like the ones seen so far, make it
    significant?"""
    n = candidate.signature_events + extra
    k = round(candidate.events * n / candidate.signature_events)
    if candidate.clumps(k) < MIN_SUPPORT:
        return False
    grown = k - candidate.events if test_name == "fisher" else 0
    log10_p = candidate.log10_p_of(
        k, n, candidate.baseline_count + grown, candidate.baseline_total + (extra if grown else 0)
    )
    return log10_p + math.log10(max(tests, 1)) < LOG10_ALPHA


def _events_to_decide(candidate: Finding, tests: int, test_name: str) -> int | None:
    high = 1
    while not _decides_after(candidate, high, tests, test_name):
        high *= 2
        if high > MAX_MORE_EVENTS:
            return None
    low = high // 2 + 1 if high > 1 else 1
    while low < high:
        middle = (low + high) // 2
        if _decides_after(candidate, middle, tests, test_name):
            high = middle
        else:
            low = middle + 1
    return high


def _events_to_show_spread(events: int, hosts: int) -> int:
    return max(SPREAD_MIN_EVENTS - events, SPREAD_MIN_HOSTS - hosts, 1)


def decide(scored: Scored, events: int, hosts: int, top_host_share: float) -> Verdict:
    """`hosts`: distinct physical hosts in the signature; `top_host_share`: share of its
    events on the busiest one."""
    for finding in scored.findings:
        rule = _matching_rule(finding)
        if rule is not None:
            return Verdict(
                rule.verdict,
                f"{finding.attribute}={finding.value} carries {finding.in_signature:.0%} of "
                f"the events but {finding.overall:.2%} of the {finding.baseline} "
                f"(lift {finding.lift:.1f})",
                finding,
            )
    return _spread_or_inconclusive(scored, hosts, top_host_share, events)


def is_spread(events: int, hosts: int, top_host_share: float) -> bool:
    """Enough events on enough hosts, none of them carrying half."""
    enough = events >= SPREAD_MIN_EVENTS and hosts >= SPREAD_MIN_HOSTS
    return enough and top_host_share < SPREAD_MAX_HOST_SHARE


def _spread_or_inconclusive(scored: Scored, hosts: int, top_host_share: float, events: int) -> Verdict:
    if is_spread(events, hosts, top_host_share):
        return Verdict(
            "software",
            f"spread across {hosts} hosts with no host, hardware or software concentration",
        )
    options = [_events_to_show_spread(events, hosts)]
    for candidate in scored.candidates[:5]:
        if FAMILY.get(candidate.attribute) in {rule.family for rule in VERDICT_RULES}:
            needed = _events_to_decide(candidate, scored.tests, candidate.test)
            if needed is not None:
                options.append(needed)
    more = min(options)
    return Verdict(
        "inconclusive",
        f"{events} events on {hosts} hosts are too few to say; about {more} more events would decide",
        more_events_needed=more,
    )
