"""The capture decision table and slot accounting, as plain functions over plain data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from registry.capture.policy import (
    GRANT_TIMEOUT,
    Limits,
    SignatureFacts,
    Slot,
    answer,
    applicable_rules,
    claimable_slots,
    offline_action,
    window_start,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LIMITS = Limits(full_per_window=3, window=timedelta(days=7))


def facts(**overrides) -> SignatureFacts:  # type: ignore[no-untyped-def]
    values = dict(mode="auto", status="triaged", is_new=False, dump_level=None,
                  extra_full_captures=0, resolved_at=None)
    return SignatureFacts(**(values | overrides))


def first_decision(f: SignatureFacts, claims_won: bool):  # type: ignore[no-untyped-def]
    """Walk the table as the database-side caller does, with every claim won or lost."""
    for rule in applicable_rules(f):
        if rule.claim is not None and not claims_won:
            continue
        return answer(rule, f, LIMITS, 1 if rule.claim else None)
    raise AssertionError


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
