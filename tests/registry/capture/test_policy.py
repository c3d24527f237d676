"""The capture decision table and slot accounting, as plain functions over plain data."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from registry.capture.policy import (
    GRANT_TIMEOUT,
    NO_SIGNATURE_CAUSES,
    SLOT_COMPLETED,
    SLOT_GRANTED,
    SLOT_RELEASED,
    CaptureDecision,
    Limits,
    NoSignatureBudget,
    SignatureFacts,
    Slot,
    claimable_slots,
    decision_if_no_claim_can_win,
    no_signature_decision,
    offline_action,
    offline_no_signature,
    walk,
    window_start,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LIMITS = Limits(full_per_window=3, window=timedelta(days=7))


def facts(**overrides) -> SignatureFacts:  # type: ignore[no-untyped-def]
    values = dict(mode="auto", status="triaged", is_new=False, dump_level=None,
                  extra_full_captures=0, resolved_at=None)
    return SignatureFacts(**(values | overrides))


def first_decision(f: SignatureFacts, claims_won: bool) -> CaptureDecision:
    """The table's walk with every claim won (as claim 1) or lost."""
    decision = walk(f, LIMITS, lambda claim: 1 if claims_won else None)
    assert decision is not None
    return decision


@pytest.mark.parametrize(
    ("overrides", "claims_won", "action", "reason_has"),
    [
        ({"is_new": True}, True, "full", "new signature"),
        ({}, True, "full", "known signature: full capture 1 of 3 in the 7-day window"),
        ({}, False, "skip", "3 full captures already in the 7-day window"),
        ({"status": "regressed"}, True, "full", "regressed signature"),
        ({"status": "regressed"}, False, "skip", "since the fix"),
        ({"status": "ignored"}, True, "skip", "ignored"),
        ({"status": "ignored", "is_new": True}, True, "skip", "ignored"),
        ({"mode": "full"}, False, "full", "always capture full"),
        ({"mode": "skip", "is_new": True}, True, "skip", "never capture"),
        ({"mode": "filtered", "dump_level": 31}, False, "filtered", "dump level 31"),
        ({"mode": "skip", "extra_full_captures": 2}, True, "full", "more full captures"),
        ({"mode": "skip", "extra_full_captures": 2}, False, "skip", "never capture"),
        ({"status": "ignored", "extra_full_captures": 1}, True, "full", "an engineer asked"),
    ],
)
def test_decision_table(overrides, claims_won, action, reason_has) -> None:  # type: ignore[no-untyped-def]
    decision = first_decision(facts(**overrides), claims_won)
    assert decision.action == action
    assert reason_has in decision.reason


def test_only_filtered_carries_a_dump_level() -> None:
    assert first_decision(facts(mode="filtered", dump_level=17), False).dump_level == 17
    assert first_decision(facts(mode="full", dump_level=17), False).dump_level is None


def test_every_mode_and_status_reaches_a_decision_without_any_claim() -> None:
    for mode in ("auto", "full", "filtered", "skip"):
        for status in ("new", "triaged", "resolved", "regressed", "ignored"):
            f = facts(mode=mode, status=status, dump_level=7)
            assert first_decision(f, claims_won=False).action in {"full", "filtered", "skip"}


def slot(number: int, state: str, age: timedelta) -> Slot:
    return Slot(number, state, NOW - age)


def test_slots_count_until_they_leave_the_window_and_failures_free_them() -> None:
    since = window_start(NOW, LIMITS, facts())
    assert claimable_slots([], LIMITS, NOW, since) == [1, 2, 3]
    held = [slot(1, "completed", timedelta(days=1)), slot(2, "granted", timedelta(hours=1)),
            slot(3, "completed", timedelta(days=6, hours=23))]
    assert claimable_slots(held, LIMITS, NOW, since) == []
    aged = [*held[:2], slot(3, "completed", timedelta(days=7, minutes=1))]
    assert claimable_slots(aged, LIMITS, NOW, since) == [3]
    released = [slot(1, "released", timedelta(minutes=1)), *held[1:]]
    assert claimable_slots(released, LIMITS, NOW, since) == [1]
    abandoned = [held[0], slot(2, "granted", GRANT_TIMEOUT + timedelta(minutes=1)), held[2]]
    assert claimable_slots(abandoned, LIMITS, NOW, since) == [2]


def test_a_regression_restarts_the_window_at_the_fix() -> None:
    fixed = NOW - timedelta(days=1)
    regressed = facts(status="regressed", resolved_at=fixed)
    assert window_start(NOW, LIMITS, regressed) == fixed
    assert window_start(NOW, LIMITS, facts(resolved_at=fixed)) == NOW - LIMITS.window
    before_fix = [slot(n, "completed", timedelta(days=2)) for n in (1, 2, 3)]
    assert claimable_slots(before_fix, LIMITS, NOW, window_start(NOW, LIMITS, regressed)) == [1, 2, 3]
    assert claimable_slots(before_fix, LIMITS, NOW, window_start(NOW, LIMITS, facts())) == []


def test_a_larger_k_opens_more_slots() -> None:
    wider = Limits(full_per_window=5, window=timedelta(days=7))
    held = [slot(n, "completed", timedelta(days=1)) for n in (1, 2, 3)]
    assert claimable_slots(held, wider, NOW, NOW - wider.window) == [4, 5]


def test_offline_action_follows_free_slots_and_modes() -> None:
    assert offline_action(facts(), LIMITS, free_slots=1).action == "full"
    assert offline_action(facts(), LIMITS, free_slots=0).action == "skip"
    assert offline_action(facts(mode="filtered", dump_level=31), LIMITS, 0).dump_level == 31
    assert offline_action(facts(mode="skip", extra_full_captures=1), LIMITS, 0).action == "full"


def every_fact() -> list[SignatureFacts]:
    """Every combination of the values the table's rules look at."""
    values = itertools.product(
        ["auto", "full", "filtered", "skip"],
        ["new", "triaged", "resolved", "regressed", "ignored"],
        [False, True],
        [None, 31],
        [0, 1, 2],
        [None, NOW - timedelta(days=1), NOW - timedelta(days=10)],
    )
    return [SignatureFacts(*combination) for combination in values]


def three(state: str, age: timedelta) -> list[Slot]:
    return [slot(number, state, age) for number in (1, 2, 3)]


# The slots of K = 3 as read: held now, held from before a fix a day ago, aged out, released,
# abandoned grants, one free, none yet.
SLOT_READS = [
    three(SLOT_GRANTED, timedelta(minutes=1)),
    three(SLOT_COMPLETED, timedelta(days=2)),
    three(SLOT_COMPLETED, timedelta(days=8)),
    three(SLOT_RELEASED, timedelta(minutes=1)),
    three(SLOT_GRANTED, GRANT_TIMEOUT + timedelta(hours=1)),
    three(SLOT_GRANTED, timedelta(minutes=1))[:2],
    [],
]


def database_claims(f: SignatureFacts, slots: list[Slot]) -> Callable[[str], int | None]:
    """Claims settled as decide_capture's are, alone on these slots: the lowest free slot; one of
    the "N more" while any is left."""
    free = claimable_slots(slots, LIMITS, NOW, window_start(NOW, LIMITS, f))
    won = {"slot": free[0] if free else None,
           "extra": f.extra_full_captures - 1 if f.extra_full_captures else None}
    return won.__getitem__


def test_the_answer_known_before_the_insert_is_the_one_the_claims_give() -> None:
    """Over every input of the table: decision_without_claim's answer (stored with the event) is
    decide_capture's, as both walk RULES; it gives up only where a claim might be won; and the
    policy bundle's offline answer has the same action. Unread slots: whatever is stored."""
    disagreements = []
    for f, stored, read_them in itertools.product(every_fact(), SLOT_READS, [True, False]):
        free = claimable_slots(stored, LIMITS, NOW, window_start(NOW, LIMITS, f))
        planned = decision_if_no_claim_can_win(f, LIMITS, stored if read_them else None, NOW)
        decided = walk(f, LIMITS, database_claims(f, stored))
        offline = offline_action(f, LIMITS, len(free))
        if decided is None or (planned is not None and planned != decided):
            disagreements.append(f"{f}, {stored if read_them else 'unread'}: {planned} != {decided}")
        elif planned is None and read_them and not free and not f.extra_full_captures:
            disagreements.append(f"{f}, {stored}: gave up though no claim can win")
        elif (offline.action, offline.dump_level) != (decided.action, decided.dump_level):
            disagreements.append(f"{f}, {stored}: offline {offline} != {decided}")
    assert disagreements == []


NO_SIGNATURE_BUDGET = NoSignatureBudget(per_host=1, per_fleet=3, window=timedelta(days=7))


@pytest.mark.parametrize(("host", "fleet", "action", "says"), [
    (1, 2, "full", "full capture 1 of 1 for this host and 2 of 3 for the fleet in the 7-day window"),
    (None, None, "skip", "this host has had its 1 full capture(s)"),
    (1, None, "skip", "the fleet has had its 3 full capture(s)"),
])
def test_a_report_without_a_signature_is_full_only_with_a_host_and_a_fleet_slot(
    host: int | None, fleet: int | None, action: str, says: str
) -> None:
    for cause, words in NO_SIGNATURE_CAUSES.items():
        decision = no_signature_decision(cause, NO_SIGNATURE_BUDGET, host, fleet)
        assert (decision.action, decision.dump_level) == (action, None)
        assert decision.reason.startswith(f"{words}: {says}")


def test_offline_a_report_without_a_crash_is_full_exactly_when_both_budgets_have_room() -> None:
    def offline(free_host: int | None, free_fleet: int) -> str:
        return offline_no_signature(NO_SIGNATURE_BUDGET, free_host, free_fleet).action

    assert [offline(1, 3), offline(1, 1), offline(0, 3), offline(1, 0)] == ["full", "full", "skip", "skip"]
    assert [offline(None, 1), offline(None, 0)] == ["full", "skip"]  # no host named: the fleet's alone
    assert "3 of 3 for the fleet" in offline_no_signature(NO_SIGNATURE_BUDGET, None, 1).reason
    none_per_host = NoSignatureBudget(per_host=0, per_fleet=3, window=timedelta(days=7))
    assert offline_no_signature(none_per_host, 0, 3).action == "skip"  # a budget of 0: never
