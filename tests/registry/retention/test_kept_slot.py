"""A stored dump keeps its event's capture slot whatever else is recorded of the event: a failed
capture after the good one changes nothing that is kept, and a good capture after a failed one
takes the slot back (when nobody claimed it meanwhile). Retention then keeps those dumps as the
bug's exemplars. Through the API and a real local store, on both databases."""

from __future__ import annotations

from sqlalchemy import select

from registry.capture.models import CaptureSlot
from registry.config import Settings
from registry.db import Database, utcnow
from registry.retention.gc import collect
from registry.storage.store import DumpStore
from tests.support.capture import post_capture, report, storm_report
from tests.support.retention import LATER, Fleet, store_dump


def slots(database: Database) -> dict[int, tuple[str, str]]:
    """slot number -> (event id, state)."""
    with database.session() as session:
        rows = session.execute(select(CaptureSlot.slot, CaptureSlot.event_id, CaptureSlot.state))
        return {row.slot: (str(row.event_id), row.state) for row in rows}


def test_a_failed_capture_after_a_stored_dump_changes_nothing_that_is_kept(
    client, make_token, database: Database, store: DumpStore, gc_settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    fleet = Fleet(client, make_token, database, store)
    exemplars = fleet.crash("held_bug", 3)
    held = slots(database)
    assert sorted(state for _, state in held.values()) == ["completed"] * 3
    event = fleet.event_of(exemplars[0])
    for attempt in ("drgn", "dpu_rdma"):  # the DPU's attempts after a good makedumpfile
        failed = post_capture(client, fleet.reporter, event, method=attempt, status="failed")
        assert failed.status_code == 201, failed.json
    assert slots(database) == held
    assert report(client, fleet.reporter, storm_report("held_bug"))["capture"]["action"] == "skip"

    newer = fleet.crash("held_bug", 3)  # "N more": newer than the exemplars, no slots
    outcome = collect(database, store, gc_settings, now=utcnow() + LATER)
    assert outcome.kept_by_rule == {"exemplar": 3} and outcome.dumps_deleted == 3
    assert fleet.present() == set(exemplars)
    assert fleet.states() == {c: "deleted" if c in newer else "stored" for c in fleet.captures}


def test_a_good_capture_after_a_failed_one_takes_its_slot_back_and_its_dump_is_kept(
    client, make_token, database: Database, store: DumpStore, gc_settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    fleet = Fleet(client, make_token, database, store)
    answer = report(client, fleet.reporter, storm_report("late_bug"))
    event = answer["event_id"]
    assert answer["capture"]["action"] == "full"
    assert post_capture(client, fleet.reporter, event, status="failed").status_code == 201
    assert slots(database) == {1: (event, "released")}
    good = post_capture(client, fleet.reporter, event, method="drgn", bytes=1000).json["id"]
    store_dump(database, store, good)
    fleet.captures.append(good)
    assert slots(database) == {1: (event, "completed")}

    others = fleet.crash("late_bug", 2)  # the other two slots
    newer = fleet.crash("late_bug", 3)  # "N more"
    assert {state for _, state in slots(database).values()} == {"completed"}
    outcome = collect(database, store, gc_settings, now=utcnow() + LATER)
    assert outcome.kept_by_rule == {"exemplar": 3} and outcome.dumps_deleted == 3
    assert fleet.present() == {good, *others}
    assert fleet.states() == {c: "deleted" if c in newer else "stored" for c in fleet.captures}


def test_a_slot_another_crash_claimed_after_the_failure_is_not_taken_back(
    client, make_token, database: Database, store: DumpStore
) -> None:  # type: ignore[no-untyped-def]
    fleet = Fleet(client, make_token, database, store)
    event = report(client, fleet.reporter, storm_report("busy_bug"))["event_id"]
    assert post_capture(client, fleet.reporter, event, status="failed").status_code == 201
    [claimer] = fleet.crash("busy_bug", 1)  # takes the released slot 1, the lowest free
    claimer_event = fleet.event_of(claimer)
    assert slots(database) == {1: (claimer_event, "completed")}
    assert post_capture(client, fleet.reporter, event, method="drgn").status_code == 201
    assert slots(database) == {1: (claimer_event, "completed")}
