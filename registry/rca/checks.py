"""Evidence checks: does an RCA's evidence hold up against what the registry knows?

Pure functions over plain data. The registry loads `SignatureFacts` for the RCA's signature
and the events and captures the RCA cites; every check in `CHECKS` then judges one kind of
claim. A check passes, fails (the claim contradicts the record) or is skipped (the RCA makes
no claim of that kind). An RCA with any failed check is flagged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from registry.signatures.regression import compare_kernel_versions

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class EventFacts:
    """A cited event as the registry knows it."""

    id: str
    signature_id: str | None
    kernel_version: str | None
    functions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class KernelCrashes:
    """How often, and last where, the signature crashed on one kernel version."""

    kernel_version: str
    events: int
    last_event_id: str
    last_crashed_at: str


@dataclass(frozen=True)
class SignatureFacts:
    id: str
    functions: frozenset[str]  # the signature's frames, guilty function and its events' frames
    kernels: Sequence[KernelCrashes]  # every kernel version it crashed on
    events: Mapping[str, EventFacts] = field(default_factory=dict)  # cited events that exist
    captures: Mapping[str, str | None] = field(default_factory=dict)  # capture id -> its signature id


@dataclass(frozen=True)
class Outcome:
    """What one check found: pass, fail or skip, why, and each problem."""

    status: str
    message: str
    problems: tuple[str, ...] = ()


class CheckResultView(TypedDict):
    """A check's result as stored on the RCA and returned with it."""

    name: str
    status: str
    message: str
    problems: list[str]


class RcaClaims(TypedDict):
    """What the checks read of an RCA: its author kind, evidence items and fix."""

    author_kind: str
    evidence: list[dict[str, Any]]  # items of EVIDENCE_TYPES, each with its own fields
    fix: dict[str, str]  # {"kernel_version": ...} when the RCA names the first fixed kernel


@dataclass(frozen=True)
class CheckResult(Outcome):
    name: str = ""

    def as_dict(self) -> CheckResultView:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "problems": list(self.problems),
        }


def _items(rca: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [item for item in rca.get("evidence") or [] if item.get("type") == kind]


def _verdict(checked: int, problems: list[str], what: str) -> Outcome:
    if checked == 0:
        return Outcome(SKIP, f"no {what} cited")
    if problems:
        return Outcome(FAIL, f"{len(problems)} of {checked} cited {what} do not hold", tuple(problems))
    return Outcome(PASS, f"all {checked} cited {what} hold")


def check_events(rca: Mapping[str, Any], facts: SignatureFacts) -> Outcome:
    """Cited events exist and are crashes of this signature."""
    cited = [str(item["event_id"]) for item in _items(rca, "event")]
    problems = []
    for event_id in cited:
        event = facts.events.get(event_id)
        if event is None:
            problems.append(f"event {event_id} does not exist")
        elif event.signature_id != facts.id:
            problems.append(f"event {event_id} belongs to signature {event.signature_id}, not {facts.id}")
    return _verdict(len(cited), problems, "events")


def check_captures(rca: Mapping[str, Any], facts: SignatureFacts) -> Outcome:
    """Cited captures exist and were taken of this signature's crashes."""
    cited = [str(item["capture_id"]) for item in _items(rca, "capture")]
    problems = []
    for capture_id in cited:
        if capture_id not in facts.captures:
            problems.append(f"capture {capture_id} does not exist")
        elif facts.captures[capture_id] != facts.id:
            problems.append(
                f"capture {capture_id} is of signature {facts.captures[capture_id]}, not {facts.id}"
            )
    return _verdict(len(cited), problems, "captures")


def cited_functions(rca: Mapping[str, Any]) -> list[str]:
    functions = [item["function"] for item in _items(rca, "function")]
    functions += [item["function"] for item in _items(rca, "source") if item.get("function")]
    return functions


def check_functions(rca: Mapping[str, Any], facts: SignatureFacts) -> Outcome:
    """Cited functions appear in the signature's frames or its events' frames."""
    cited = cited_functions(rca)
    known = facts.functions | frozenset().union(*(e.functions for e in facts.events.values()))
    problems = [
        f"function {name} is in none of the signature's frames" for name in cited if name not in known
    ]
    return _verdict(len(cited), problems, "functions")


def cited_kernel_versions(rca: Mapping[str, Any]) -> list[str]:
    return [
        item["kernel_version"]
        for item in _items(rca, "source") + _items(rca, "kernel")
        if item.get("kernel_version")
    ]


def same_release(a: str, b: str) -> bool:
    """6.8.0-52 and 6.8.0-52-generic are one release; strings that are no versions match exactly."""
    return a == b or compare_kernel_versions(a, b) == 0


def check_kernel_versions(rca: Mapping[str, Any], facts: SignatureFacts) -> Outcome:
    """Cited kernel versions are versions the signature crashed on."""
    cited = cited_kernel_versions(rca)
    crashed = [k.kernel_version for k in facts.kernels]
    problems = [
        f"kernel {version} is not one this signature crashed on ({', '.join(crashed) or 'none recorded'})"
        for version in cited
        if not any(same_release(version, seen) for seen in crashed)
    ]
    return _verdict(len(cited), problems, "kernel versions")


def check_fix_version(rca: Mapping[str, Any], facts: SignatureFacts) -> Outcome:
    """A claimed fix is contradicted by any crash on that kernel version or a newer one.

    Versions compare as versions, and only within one flavour (-azure and -generic ABI
    numbers are separate series): regression.py's rules, so both agree on "fixed".
    """
    fixed_in = (rca.get("fix") or {}).get("kernel_version")
    if not fixed_in:
        return Outcome(SKIP, "no fix version claimed")
    contradicting = [
        f"crashed on {k.kernel_version} (>= fix {fixed_in}): {k.events} events, last event "
        f"{k.last_event_id} at {k.last_crashed_at}"
        for k in facts.kernels
        if compare_kernel_versions(k.kernel_version, fixed_in) in (0, 1)
    ]
    if contradicting:
        return Outcome(
            FAIL,
            f"the signature still crashes on kernels at or after the claimed fix {fixed_in}",
            tuple(contradicting),
        )
    return Outcome(PASS, f"no crash on {fixed_in} or newer")


# What an RCA must cite, by author kind: each group needs at least one item of its types.
REQUIRED_EVIDENCE: dict[str, tuple[tuple[str, ...], ...]] = {
    "ai": (("event", "capture"), ("function", "source")),
    "human": (),
}


def check_required_evidence(rca: Mapping[str, Any], facts: SignatureFacts) -> Outcome:
    """AI-written RCAs cite an event or capture, and a function or source line (REQUIRED_EVIDENCE)."""
    groups = REQUIRED_EVIDENCE.get(rca.get("author_kind", "human"), ())
    if not groups:
        return Outcome(SKIP, "not required for this author kind")
    present = {item.get("type") for item in rca.get("evidence") or []}
    missing = [" or ".join(group) for group in groups if not present.intersection(group)]
    if missing:
        return Outcome(
            FAIL,
            "an AI-written RCA must cite evidence the registry can check",
            tuple(f"no {group} evidence cited" for group in missing),
        )
    return Outcome(PASS, "cites checkable evidence")


# check name (stored, shown in the API, Jira and Grafana) -> the rule
CHECKS: dict[str, Callable[[Mapping[str, Any], SignatureFacts], Outcome]] = {
    "cites_checkable_evidence": check_required_evidence,
    "events_belong_to_signature": check_events,
    "captures_belong_to_signature": check_captures,
    "functions_in_frames": check_functions,
    "kernel_versions_crashed_on": check_kernel_versions,
    "fix_version_consistent": check_fix_version,
}


def run_checks(rca: Mapping[str, Any], facts: SignatureFacts) -> list[CheckResult]:
    results = []
    for name, check in CHECKS.items():
        outcome = check(rca, facts)
        results.append(CheckResult(outcome.status, outcome.message, outcome.problems, name))
    return results


def passed(results: Sequence[CheckResult]) -> bool:
    return all(result.status != FAIL for result in results)
