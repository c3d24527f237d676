"""The capture policy as a decision table: plain facts about a signature in, an answer out.

No database here. `walk` is the one walk of the table, in order: a rule that needs a *claim*
(a capture slot, or one of the engineer's "N more" captures) only applies if the claim is won,
otherwise the next rule is tried. The last rule of every mode needs no claim, so a decision is
always reached. Its callers differ only in how a claim is settled: in the database
(registry.capture.decide.decide_capture), not at all when no claim can win
(`decision_if_no_claim_can_win`, before the event is stored), or as if granted exactly when
something is free (`offline_action`, the policy bundle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from registry.core.events import CaptureAnswer

# A grant that no capture followed (the crash kernel died, the host was reimaged) stops
# holding its slot after this long: a full dump of a 2 TB host takes hours, not a day.
GRANT_TIMEOUT = timedelta(hours=24)

SLOT_GRANTED, SLOT_COMPLETED, SLOT_RELEASED = "granted", "completed", "released"


@dataclass(frozen=True)
class CaptureDecision:
    action: str  # full | filtered | skip
    reason: str
    dump_level: int | None = None

    def as_dict(self) -> CaptureAnswer:
        return {"action": self.action, "reason": self.reason, "dump_level": self.dump_level}


@dataclass(frozen=True)
class Limits:
    full_per_window: int
    window: timedelta


@dataclass(frozen=True)
class SignatureFacts:
    """What the policy needs to know about a signature at decision time."""

    mode: str  # auto | full | filtered | skip
    status: str  # new | triaged | resolved | regressed | ignored
    is_new: bool  # this event created the signature
    dump_level: int | None
    extra_full_captures: int
    resolved_at: datetime | None


@dataclass(frozen=True)
class Slot:
    number: int
    state: str  # granted | completed | released
    since: datetime  # granted_at for granted slots, settled_at otherwise
    event_id: int | None = None  # the holder


@dataclass(frozen=True)
class Rule:
    """One row of the decision table."""

    name: str
    applies: Callable[[SignatureFacts], bool]
    action: str
    reason: str  # str.format template over the facts, limits and the claim
    claim: str | None = None  # None | "slot" | "extra"


def _auto(facts: SignatureFacts) -> bool:
    return facts.mode == "auto"


RULES: tuple[Rule, ...] = (
    Rule(
        "extra",
        lambda f: f.extra_full_captures > 0,
        "full",
        "an engineer asked for more full captures of this signature ({claimed} more wanted after this one)",
        claim="extra",
    ),
    Rule("mode-full", lambda f: f.mode == "full", "full", "signature policy: always capture full"),
    Rule(
        "mode-filtered",
        lambda f: f.mode == "filtered",
        "filtered",
        "signature policy: filtered capture at makedumpfile dump level {facts.dump_level}",
    ),
    Rule("mode-skip", lambda f: f.mode == "skip", "skip", "signature policy: never capture"),
    Rule(
        "ignored",
        lambda f: _auto(f) and f.status == "ignored",
        "skip",
        "signature is ignored: no capture",
    ),
    Rule(
        "new",
        lambda f: _auto(f) and f.is_new,
        "full",
        "new signature: full capture {claimed} of {limits.full_per_window}",
        claim="slot",
    ),
    Rule(
        "regressed",
        lambda f: _auto(f) and f.status == "regressed",
        "full",
        "regressed signature: full capture {claimed} of {limits.full_per_window} since the fix",
        claim="slot",
    ),
    Rule(
        "regressed-enough",
        lambda f: _auto(f) and f.status == "regressed",
        "skip",
        "regressed signature already has {limits.full_per_window} full captures since the fix",
    ),
    Rule(
        "known",
        _auto,
        "full",
        "known signature: full capture {claimed} of {limits.full_per_window} in the "
        "{limits.window.days}-day window",
        claim="slot",
    ),
    Rule(
        "known-enough",
        _auto,
        "skip",
        "known signature: {limits.full_per_window} full captures already in the "
        "{limits.window.days}-day window",
    ),
)


def applicable_rules(facts: SignatureFacts) -> list[Rule]:
    """The rules to try, in order; the first whose claim (if any) is won decides."""
    return [rule for rule in RULES if rule.applies(facts)]


class Undecided:
    """A claim only the database can settle: the walk gives no answer."""


UNDECIDED = Undecided()
# a rule's claim ("slot" or "extra") -> what it won (the slot number, or the "N more" captures
# left), None when it was lost (the next rule decides), or UNDECIDED.
Claimer = Callable[[str], int | Undecided | None]


def walk(facts: SignatureFacts, limits: Limits, claim: Claimer) -> CaptureDecision | None:
    """The first applicable rule that needs no claim, or whose claim is won, decides; None when
    a claim was UNDECIDED."""
    for rule in applicable_rules(facts):
        claimed = claim(rule.claim) if rule.claim is not None else None
        if isinstance(claimed, Undecided):
            return None
        if rule.claim is not None and claimed is None:
            continue  # lost (the race, or nothing left): the next rule decides
        return answer(rule, facts, limits, claimed)
    raise AssertionError("every mode ends with a rule that needs no claim")


def answer(rule: Rule, facts: SignatureFacts, limits: Limits, claimed: int | None = None) -> CaptureDecision:
    """The decision a rule gives; `claimed` is the slot number or the extras left."""
    reason = rule.reason.format(facts=facts, limits=limits, claimed=claimed)
    dump_level = facts.dump_level if rule.action == "filtered" else None
    return CaptureDecision(rule.action, reason[:255], dump_level)


def window_start(now: datetime, limits: Limits, facts: SignatureFacts) -> datetime:
    """Captures older than this no longer count: the rolling window, cut at the last fix."""
    start = now - limits.window
    if facts.status == "regressed" and facts.resolved_at is not None:
        return max(start, facts.resolved_at)
    return start


def slot_is_held(slot: Slot, now: datetime, since: datetime) -> bool:
    """Does this slot still count against K? Released slots never do; others until they age out."""
    if slot.state == SLOT_RELEASED:
        return False
    if slot.state == SLOT_GRANTED and slot.since < now - GRANT_TIMEOUT:
        return False
    return slot.since >= since


def claimable_slots(slots: Iterable[Slot], limits: Limits, now: datetime, since: datetime) -> list[int]:
    """Slot numbers (1..K) a new full capture may claim, lowest first."""
    held = {slot.number for slot in slots if slot_is_held(slot, now, since)}
    return [number for number in range(1, limits.full_per_window + 1) if number not in held]


def decision_if_no_claim_can_win(
    facts: SignatureFacts, limits: Limits, slots: list[Slot] | None, now: datetime
) -> CaptureDecision | None:
    """The answer when, given the slots read, every slot claim is lost (all K held: a storm's
    common `skip`); None when a claim might win (a free slot, unread slots, "N more")."""
    all_held = slots is not None and not claimable_slots(slots, limits, now, window_start(now, limits, facts))
    return walk(facts, limits, lambda claim: None if claim == "slot" and all_held else UNDECIDED)


def offline_action(facts: SignatureFacts, limits: Limits, free_slots: int) -> CaptureDecision:
    """What a crash kernel with no network should do: the decision if claims were granted
    exactly when something is free, with no claim taken (the bundle is advisory)."""
    offline_claims = {
        "slot": limits.full_per_window - free_slots + 1 if free_slots else None,
        "extra": facts.extra_full_captures - 1,
    }
    decision = walk(facts, limits, offline_claims.__getitem__)
    assert decision is not None  # no claim is undecided offline
    return decision


# --- reports without a signature ----------------------------------------------------------
# A report the engine found no crash in (a garbled, truncated or crash-free log) or failed on
# has no signature whose slots could count its dumps. It is treated like any unknown bug under
# a budget of its own: at most `per_host` full captures per host and `per_fleet` per fleet in
# the capture window, each held by a slot as a signature's are; past either, skip.

NO_CRASH, ENGINE_FAILED = "no_crash", "engine_failed"
# Why a report has no signature -> how its answers say so.
NO_SIGNATURE_CAUSES: dict[str, str] = {
    NO_CRASH: "no recognisable crash in the report",
    ENGINE_FAILED: "the signature engine failed on this report",
}
FLEET_BUDGET = "fleet"


def host_budget(host_id: int) -> str:
    """The budget key of one host's slots (the fleet's is FLEET_BUDGET)."""
    return f"host:{host_id}"


@dataclass(frozen=True)
class NoSignatureBudget:
    per_host: int
    per_fleet: int
    window: timedelta

    def limits(self, budget: str) -> Limits:
        return Limits(self.per_fleet if budget == FLEET_BUDGET else self.per_host, self.window)


# rule -> (action, reason template over cause, budget and the slots won)
NO_SIGNATURE_RULES: dict[str, tuple[str, str]] = {
    "within": (
        "full",
        "{cause}: full capture {host} of {budget.per_host} for this host and {fleet} of "
        "{budget.per_fleet} for the fleet in the {budget.window.days}-day window",
    ),
    "within-fleet": (
        "full",
        "{cause}: full capture {fleet} of {budget.per_fleet} for the fleet in the "
        "{budget.window.days}-day window (this host's own budget not known)",
    ),
    "host-spent": (
        "skip",
        "{cause}: this host has had its {budget.per_host} full capture(s) of reports without a "
        "signature in the {budget.window.days}-day window",
    ),
    "fleet-spent": (
        "skip",
        "{cause}: the fleet has had its {budget.per_fleet} full capture(s) of reports without a "
        "signature in the {budget.window.days}-day window",
    ),
}


def no_signature_decision(
    cause: str,
    budget: NoSignatureBudget,
    host_slot: int | None,
    fleet_slot: int | None,
    host_known: bool = True,
) -> CaptureDecision:
    """The answer for a report without a signature, given the host's and the fleet's slot it
    won (None: lost, all held); the fleet is only asked once the host's slot is won."""
    if host_known and host_slot is None:
        rule = "host-spent"
    elif fleet_slot is None:
        rule = "fleet-spent"
    else:
        rule = "within" if host_known else "within-fleet"
    action, template = NO_SIGNATURE_RULES[rule]
    reason = template.format(
        cause=NO_SIGNATURE_CAUSES[cause], budget=budget, host=host_slot, fleet=fleet_slot
    )
    return CaptureDecision(action, reason[:255])


def offline_no_signature(
    budget: NoSignatureBudget, free_host: int | None, free_fleet: int
) -> CaptureDecision:
    """What a crash kernel with no network should do with a report it finds no crash in: the
    decision if slots were granted exactly when free. `free_host` None: the bundle was made for
    no host in particular, so only the fleet's budget is known."""
    def slot(limit: int, free: int) -> int | None:
        return limit - free + 1 if free else None

    host = slot(budget.per_host, free_host) if free_host is not None else None
    return no_signature_decision(
        NO_CRASH, budget, host, slot(budget.per_fleet, free_fleet), host_known=free_host is not None
    )
