"""The retention tables as plain functions over plain data: every rule, in its order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from registry.retention.policy import (
    DELETE,
    DUMP_RULES,
    KEEP,
    LOG_RULES,
    TRIM,
    Ages,
    Dump,
    EventLog,
    SignatureState,
    decide_dumps,
    decide_log,
    exemplar_dumps,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AGES = Ages(exemplars=3, dump=timedelta(days=30), resolved_grace=timedelta(days=14), log=timedelta(days=30))
OPEN = SignatureState("triaged", None)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def dump(capture_id: int, age_days: float, **flags: bool) -> Dump:
    return Dump(capture_id, event_id=capture_id + 1000, stored_at=days_ago(age_days), **flags)


def actions(decisions) -> dict[int, str]:  # type: ignore[no-untyped-def]
    return {capture_id: decision.action for capture_id, decision in decisions.items()}


def test_slot_holders_are_the_exemplars_before_newer_dumps() -> None:
    dumps = [
        dump(1, 40, holds_slot=True),
        dump(2, 35, holds_slot=True),
        dump(3, 2, holds_slot=False),  # newest, but an engineer's "N more", not a slot
        dump(4, 50, holds_slot=True),
        dump(5, 31, holds_slot=False),
    ]
    assert exemplar_dumps(dumps, 3) == {1, 2, 4}
    assert exemplar_dumps(dumps, 4) == {1, 2, 3, 4}
    assert exemplar_dumps(dumps, 0) == frozenset()


def test_without_slots_the_newest_are_the_exemplars_ties_by_id() -> None:
    same = days_ago(40)
    dumps = [
        Dump(7, 1, same, False),
        Dump(9, 2, same, False),
        Dump(8, 3, same, False),
        dump(1, 60, holds_slot=False),
    ]
    assert exemplar_dumps(dumps, 2) == {9, 8}


def test_k_exemplars_kept_others_expire_after_the_dump_age() -> None:
    dumps = [
        dump(n, age, holds_slot=n <= 3)
        for n, age in [(1, 400), (2, 200), (3, 100), (4, 31), (5, 30), (6, 29)]
    ]
    decided = decide_dumps(dumps, OPEN, NOW, AGES)
    assert actions(decided) == {1: KEEP, 2: KEEP, 3: KEEP, 4: DELETE, 5: DELETE, 6: KEEP}
    assert {c: d.rule for c, d in decided.items()} == {
        1: "exemplar",
        2: "exemplar",
        3: "exemplar",
        4: "expired",
        5: "expired",
        6: "recent",
    }
    assert decided[4].reason == "not an exemplar and older than 30 days"
    assert decided[1].reason == "one of the signature's 3 exemplar dumps"


def test_fewer_dumps_than_k_are_all_exemplars_however_old() -> None:
    decided = decide_dumps([dump(1, 900, holds_slot=False), dump(2, 800, holds_slot=False)], OPEN, NOW, AGES)
    assert actions(decided) == {1: KEEP, 2: KEEP}


@pytest.mark.parametrize("flag, rule", [("pinned", "pinned"), ("cited", "rca")])
def test_a_pin_or_an_open_rca_keeps_a_dump_that_would_expire(flag: str, rule: str) -> None:
    dumps = [dump(n, 5, holds_slot=True) for n in (1, 2, 3)] + [
        dump(4, 365, holds_slot=False, **{flag: True})
    ]
    decided = decide_dumps(dumps, OPEN, NOW, AGES)
    assert decided[4].action == KEEP and decided[4].rule == rule


@pytest.mark.parametrize("flag, rule", [("pinned", "pinned"), ("cited", "rca")])
def test_a_pin_or_an_open_rca_outlasts_the_resolution_grace(flag: str, rule: str) -> None:
    resolved = SignatureState("resolved", days_ago(100))
    decided = decide_dumps(
        [dump(1, 200, holds_slot=True, **{flag: True}), dump(2, 1, holds_slot=True)], resolved, NOW, AGES
    )
    assert (decided[1].action, decided[1].rule) == (KEEP, rule)
    assert (decided[2].action, decided[2].rule) == (DELETE, "resolved")


def test_resolved_signature_keeps_its_rules_during_the_grace_then_lets_all_go() -> None:
    dumps = [dump(1, 60, holds_slot=True), dump(2, 45, holds_slot=False), dump(3, 1, holds_slot=False)]
    within = SignatureState("resolved", NOW - AGES.resolved_grace + timedelta(seconds=1))
    assert actions(decide_dumps(dumps, within, NOW, AGES)) == {1: KEEP, 2: KEEP, 3: KEEP}
    dumps.append(dump(4, 31, holds_slot=False))
    dumps.append(dump(5, 32, holds_slot=False))
    # exemplars: the slot holder, then the newest (3, then 4 over 2)
    assert actions(decide_dumps(dumps, within, NOW, AGES)) == {
        1: KEEP,
        2: DELETE,
        3: KEEP,
        4: KEEP,
        5: DELETE,
    }
    over = SignatureState("resolved", NOW - AGES.resolved_grace)
    decided = decide_dumps(dumps, over, NOW, AGES)
    assert set(actions(decided).values()) == {DELETE}
    assert decided[1].reason == f"signature resolved {over.resolved_at:%Y-%m-%d}; its 14-day grace is over"


def test_regression_restores_the_exemplars() -> None:
    dumps = [dump(1, 200, holds_slot=True), dump(2, 100, holds_slot=True), dump(3, 50, holds_slot=False)]
    resolved_at = days_ago(90)
    assert set(actions(decide_dumps(dumps, SignatureState("resolved", resolved_at), NOW, AGES)).values()) == {
        DELETE
    }
    regressed = decide_dumps(dumps, SignatureState("regressed", resolved_at), NOW, AGES)
    assert actions(regressed) == {1: KEEP, 2: KEEP, 3: KEEP}


def test_resolved_without_a_resolution_time_is_never_past_its_grace() -> None:
    decided = decide_dumps([dump(1, 400, holds_slot=True)], SignatureState("resolved", None), NOW, AGES)
    assert decided[1].rule == "exemplar"


@pytest.mark.parametrize("status", ["new", "triaged", "ignored", "regressed"])
def test_other_statuses_follow_the_ordinary_rules(status: str) -> None:
    dumps = [dump(n, 100, holds_slot=False) for n in range(1, 6)]
    decided = decide_dumps(dumps, SignatureState(status, days_ago(500)), NOW, AGES)
    assert actions(decided) == {1: DELETE, 2: DELETE, 3: KEEP, 4: KEEP, 5: KEEP}


def test_unfingerprinted_dumps_have_no_exemplars() -> None:
    decided = decide_dumps([dump(1, 31, holds_slot=True), dump(2, 29, holds_slot=False)], None, NOW, AGES)
    assert actions(decided) == {1: DELETE, 2: KEEP}


def test_the_dump_age_boundary_is_inclusive() -> None:
    ages = Ages(exemplars=0, dump=timedelta(days=30), resolved_grace=AGES.resolved_grace, log=AGES.log)
    edge = [
        Dump(1, 1, NOW - ages.dump, False),
        Dump(2, 2, NOW - ages.dump + timedelta(microseconds=1), False),
    ]
    assert actions(decide_dumps(edge, OPEN, NOW, ages)) == {1: DELETE, 2: KEEP}


def test_every_dump_gets_exactly_one_decision_and_the_tables_end_with_a_catch_all() -> None:
    dumps = [dump(n, n * 7, holds_slot=n % 2 == 0, pinned=n % 5 == 0, cited=n % 7 == 0) for n in range(1, 40)]
    decided = decide_dumps(dumps, OPEN, NOW, AGES)
    assert sorted(decided) == list(range(1, 40))
    assert sum(d.rule == "exemplar" for d in decided.values()) <= AGES.exemplars
    assert DUMP_RULES[-1].action == KEEP and LOG_RULES[-1].action == TRIM


def log(event_id: int, age_days: float, **flags: bool) -> EventLog:
    return EventLog(event_id, received_at=days_ago(age_days), **flags)


def test_logs_beyond_the_window_are_trimmed_unless_exemplar_dump_kept_or_cited() -> None:
    logs = [
        log(1, 29, holds_slot=False),
        log(2, 31, holds_slot=False),
        log(3, 300, holds_slot=True),
        log(4, 300, holds_slot=False, dump_kept=True),
        log(5, 300, holds_slot=False, cited=True),
        log(6, 30, holds_slot=False),
    ]
    decided = {log.event_id: decide_log(log, NOW, AGES) for log in logs}
    assert {e: (d.action, d.rule) for e, d in decided.items()} == {
        1: (KEEP, "recent"),
        2: (TRIM, "trim"),
        3: (KEEP, "exemplar"),
        4: (KEEP, "dump-kept"),
        5: (KEEP, "rca"),
        6: (TRIM, "trim"),
    }
    assert decided[2].reason == "not an exemplar and older than 30 days"


def test_the_log_window_is_its_own_setting() -> None:
    short = Ages(
        exemplars=3, dump=timedelta(days=30), resolved_grace=timedelta(days=14), log=timedelta(days=7)
    )
    assert decide_log(log(1, 8, holds_slot=False), NOW, short).action == TRIM
    assert decide_log(log(1, 8, holds_slot=False), NOW, AGES).action == KEEP
