"""What an engineer reads first: the analysis in sentences, and timing as findings.

Uptime and start date are findings like an attribute value: "only after 30 days up" and
"only since 2026-09-15" come with the share of the signature they cover, the share the
baseline predicts, a lift and a p-value, so the page, Grafana and the verdict read them alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from .exact import binomial_upper_log10, to_p_value
from .findings import LOG10_ALPHA, MIN_LIFT
from .shapes import FindingView, PopulationView, TimeFinding

STARTING_SHAPES = ("clear start", "step up", "slow rise")
WORDED_FINDINGS = 3
BASELINE_WORDS: dict[str, str] = {
    "fleet": "of the population's host-time (inventory)",
    "crashes": "of the other crashes of the same window and population (case-control)",
    "exposure": "of the population's host-days from then on",
    "program": "of the program's other crashes in the window",
}


@dataclass(frozen=True)
class Population:
    """The hosts that could have had the crash: the fleet (kernel crashes) or the hosts running
    the program (userspace crashes)."""

    kind: str  # "fleet" | "program"
    program: str | None = None
    hosts: int | None = None
    source: str = "the inventory"  # how the hosts were known

    def as_json(self) -> PopulationView:
        return {"kind": self.kind, "program": self.program, "hosts": self.hosts, "source": self.source}

    def statement(self) -> str:
        if self.kind == "fleet":
            return "compared with the whole fleet (a kernel crash can happen on any host)"
        size = f"{self.hosts} hosts" if self.hosts is not None else "the hosts"
        return f"compared with the {size} running {self.program} (known from {self.source}), not the fleet"


FLEET = Population("fleet")


def finding_view(
    attribute: str, value: str, k: int, n: int, share: float, log10_p: float, baseline: str
) -> FindingView:
    return {
        "attribute": attribute,
        "value": value,
        "in_signature": round(k / n, 6) if n else 0.0,
        "overall": round(share, 6),
        "lift": round((k / n) / share, 3) if n and share > 0 else None,
        "p_value": to_p_value(log10_p),
        "log10_p": round(max(log10_p, -10_000.0), 3),
        "events": k,
        "explained_by": None,
        "baseline": baseline,
    }


def uptime_finding(uptime: Mapping) -> TimeFinding | None:
    """ "At least / at most N days up" from the uptime profile, when it says so."""
    if not uptime.get("bound"):
        return None
    n = uptime["events"]
    days = uptime["bound_days"]
    sign = ">=" if uptime["bound"] == "at least" else "<="
    share = 1.0 - uptime["outside_share"]
    found = finding_view("uptime", f"{sign} {days} days", n, n, share, uptime["log10_p"], "crashes")
    return {**found, "statement": f"uptime: {uptime['statement']}"}


def start_finding(
    daily: Mapping[date, int],
    onset: Mapping,
    start: date,
    end: date,
    exposure: Mapping[date, float] | None,
) -> TimeFinding | None:
    """ "Only since <day>": the events from the change point on, against the share of the
    population's host-days from then on (binomial), corrected for every day of the window the
    change point could have been (it was chosen from the same crashes it is tested on)."""
    change = onset.get("change_point")
    if not change or onset.get("shape") not in STARTING_SHAPES:
        return None
    since = date.fromisoformat(change)
    days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    weight = {d: float((exposure or {}).get(d, 0.0)) or 1.0 for d in days}
    total = sum(weight.values())
    share = sum(w for d, w in weight.items() if d >= since) / total if total else 1.0
    n = sum(daily.values())
    k = sum(c for d, c in daily.items() if d >= since)
    if not n or share >= 1.0:
        return None
    log10_p = min(0.0, binomial_upper_log10(k, n, share) + math.log10(len(days)))
    if log10_p >= LOG10_ALPHA or (k / n) / share < MIN_LIFT:
        return None
    words = "rising" if onset["shape"] == "slow rise" else "only"
    found = finding_view("start_date", f">= {change}", k, n, share, log10_p, "exposure")
    return {
        **found,
        "statement": (
            f"start date: {words} since {change} ({onset['shape']}): {k} of {n} crashes from then on, "
            f"where {share:.0%} {BASELINE_WORDS['exposure']} predicts {share * n:.0f}"
        )
    }


def finding_sentence(finding: Mapping) -> str:
    return (
        f"{finding['attribute']}={finding['value']}: {finding['in_signature']:.0%} of the crashes, "
        f"{finding['overall']:.2%} {BASELINE_WORDS.get(finding.get('baseline', ''), '')} "
        f"(lift {finding['lift']:.1f}, p {finding['p_value']:.1e})"
    )


def statements(
    verdict: Mapping,
    population: Population,
    case_control_why: str | None,
    components: Sequence[Mapping],
    findings: Sequence[Mapping],
    onset: Mapping,
    timing: Sequence[Mapping],
) -> list[str]:
    """The analysis in the order an engineer reads it: verdict, the parts of a mixture, the
    population and baselines, the strongest findings, start and uptime."""
    out = [f"{verdict['verdict']}: {verdict['reason']}"]
    out += [c["statement"] for c in components]
    out.append(population.statement())
    if case_control_why:
        out.append(
            "kernel, firmware, microcode and driver values are compared with the other crashes of "
            f"the same window (case-control), because {case_control_why}"
        )
    out += [finding_sentence(f) for f in findings[:WORDED_FINDINGS]]
    if onset.get("first_seen"):
        lined = onset.get("lined_up") or []
        rollout = (
            f"; {lined[0]['hosts']} hosts took {lined[0]['attribute']}={lined[0]['value']} that day"
            if lined
            else ""
        )
        shape = f", {onset['shape']}" + (f" on {onset['change_point']}" if onset.get("change_point") else "")
        out.append(f"first seen {onset['first_seen']}{shape}{rollout}")
    out += [t["statement"] for t in timing]
    return out
