"""The answer ingest stores with the event's insert: only when no claim can win."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from registry.capture.decide import decision_without_claim
from registry.capture.policy import SLOT_COMPLETED, SLOT_GRANTED, Slot
from registry.config import Settings
from registry.signatures.service import SignatureSnapshot

NOW = datetime.now(UTC)
SETTINGS = Settings(database_url="sqlite://")  # K = 3 in 7 days
SIGNATURE = SignatureSnapshot(
    id=1, fingerprint="f" * 64, title="BUG: x", kind="kasan", labels=[], status="triaged",
    first_seen=NOW - timedelta(days=30), resolved_at=None, fixed_in_kernel=None,
    capture_policy="auto", capture_dump_level=None, extra_full_captures=0, merged_into_id=None,
)
HELD = [Slot(number, SLOT_GRANTED, NOW - timedelta(minutes=1), number) for number in (1, 2, 3)]


def plan(signature=SIGNATURE, slots=HELD, regressed=False, new=False):  # type: ignore[no-untyped-def]
    return decision_without_claim(signature, regressed, SETTINGS, new, slots)


def test_every_slot_held_is_skip_without_a_claim() -> None:
    decision = plan()
    assert decision is not None and decision.action == "skip"


def test_a_free_slot_or_unread_slots_leave_it_to_the_claim() -> None:
    assert plan(slots=HELD[:2]) is None
    assert plan(slots=[]) is None
    assert plan(slots=None) is None
    aged_out = [replace(slot, state=SLOT_COMPLETED, since=NOW - timedelta(days=8)) for slot in HELD]
    assert plan(slots=aged_out) is None


def test_a_regressed_event_ignores_captures_from_before_the_fix() -> None:
    before_fix = [replace(slot, state=SLOT_COMPLETED, since=NOW - timedelta(days=2)) for slot in HELD]
    resolved = replace(SIGNATURE, status="resolved", resolved_at=NOW - timedelta(days=1))
    assert plan(resolved, before_fix, regressed=False).action == "skip"  # type: ignore[union-attr]
    assert plan(resolved, before_fix, regressed=True) is None


def test_modes_without_a_claim_and_extra_captures() -> None:
    assert plan(replace(SIGNATURE, capture_policy="full"), slots=None).action == "full"  # type: ignore[union-attr]
    assert plan(replace(SIGNATURE, capture_policy="skip"), slots=None).action == "skip"  # type: ignore[union-attr]
    assert plan(replace(SIGNATURE, extra_full_captures=2)) is None  # "N more" is claimed in the database
    assert plan(None, slots=None) is None  # no signature: its own budget's slots are claimed
