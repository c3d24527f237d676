"""Capture answers through POST /api/v1/reports: auto policy, slots, window, modes, "N more"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from registry.app import create_app
from registry.capture.decide import decide_capture
from registry.capture.models import CaptureSlot
from registry.config import Settings
from registry.core.events import Event
from registry.core.signatures import Signature
from registry.signatures.regression import REGRESSED
from tests.support.capture import actions, patch_policy, post_capture, report, storm_report
from tests.support.http import auth


@pytest.fixture
def tokens(make_token):  # type: ignore[no-untyped-def]
    return {"report": make_token("report"), "triage": make_token("triage")}


def test_new_bug_gets_k_full_captures_then_skip(client, tokens) -> None:
    first = report(client, tokens["report"], storm_report("mlx_poll"))
    assert first["capture"]["action"] == "full"
    assert first["capture"]["reason"].startswith("new signature")
    rest = actions(client, tokens["report"], "mlx_poll", 4)
    assert rest == ["full", "full", "skip", "skip"]
    skip = report(client, tokens["report"], storm_report("mlx_poll"))["capture"]
    assert skip["reason"] == "known signature: 3 full captures already in the 7-day window"
    assert skip["dump_level"] is None


def test_k_and_window_come_from_settings(db_url, database, make_token) -> None:
    settings = Settings.from_env(
        {"CRASHREG_DATABASE_URL": db_url, "CRASHREG_CAPTURE_FULL_PER_WINDOW": "1",
         "CRASHREG_CAPTURE_WINDOW_DAYS": "2"}
    )
    assert (settings.full_captures_per_window, settings.capture_window_days) == (1, 2)
    client = create_app(settings, database).test_client()
    assert actions(client, make_token("report"), "tiny_k", 3) == ["full", "skip", "skip"]
    skip = report(client, make_token("report"), storm_report("tiny_k"))["capture"]
    assert "1 full captures already in the 2-day window" in skip["reason"]


def test_a_failed_capture_frees_its_slot(client, tokens) -> None:
    answers = [report(client, tokens["report"], storm_report("nvme_reset")) for _ in range(3)]
    assert actions(client, tokens["report"], "nvme_reset", 1) == ["skip"]
    failed = post_capture(client, tokens["report"], answers[1]["event_id"], status="failed")
    assert failed.status_code == 201
    assert actions(client, tokens["report"], "nvme_reset", 2) == ["full", "skip"]


def test_a_skipped_or_failed_processing_frees_the_slot_too(client, tokens) -> None:
    answers = [report(client, tokens["report"], storm_report("xfs_iomap")) for _ in range(3)]
    post_capture(client, tokens["report"], answers[0]["event_id"], status="skipped")
    raw = post_capture(client, tokens["report"], answers[1]["event_id"], method="raw").json
    assert actions(client, tokens["report"], "xfs_iomap", 2) == ["full", "skip"]
    client.patch(f"/api/v1/captures/{raw['id']}", json={"processing_state": "failed"},
                 headers=auth(tokens["report"]))
    assert actions(client, tokens["report"], "xfs_iomap", 2) == ["full", "skip"]


def test_completed_captures_hold_their_slot_until_they_leave_the_window(client, tokens, database) -> None:
    answers = [report(client, tokens["report"], storm_report("ext4_bug")) for _ in range(3)]
    for answer in answers:
        assert post_capture(client, tokens["report"], answer["event_id"]).status_code == 201
    assert actions(client, tokens["report"], "ext4_bug", 1) == ["skip"]
    signature_id = int(answers[0]["signature"]["id"])
    with database.session() as session:  # the first completed capture is now 8 days old
        session.execute(
            update(CaptureSlot)
            .where(CaptureSlot.signature_id == signature_id, CaptureSlot.slot == 1)
            .values(since=datetime.now(UTC) - timedelta(days=8))
        )
    assert actions(client, tokens["report"], "ext4_bug", 2) == ["full", "skip"]


def test_a_grant_never_followed_by_a_capture_expires(client, tokens, database) -> None:
    answers = [report(client, tokens["report"], storm_report("lost_grant")) for _ in range(3)]
    with database.session() as session:
        session.execute(
            update(CaptureSlot)
            .where(CaptureSlot.signature_id == int(answers[0]["signature"]["id"]), CaptureSlot.slot == 2)
            .values(since=datetime.now(UTC) - timedelta(hours=25))
        )
    assert actions(client, tokens["report"], "lost_grant", 2) == ["full", "skip"]


def test_regressed_signature_is_captured_again(client, tokens) -> None:
    answers = [report(client, tokens["report"], storm_report("sched_bug")) for _ in range(3)]
    for answer in answers:
        post_capture(client, tokens["report"], answer["event_id"])
    signature_id = answers[0]["signature"]["id"]
    resolved = client.patch(f"/api/v1/signatures/{signature_id}", json={"status": "resolved"},
                            headers=auth(tokens["triage"]))
    assert resolved.status_code == 200
    after_fix = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    again = [report(client, tokens["report"], storm_report("sched_bug", crashed_at=after_fix))
             for _ in range(4)]
    assert again[0]["signature"]["status"] == "regressed"
    assert [a["capture"]["action"] for a in again] == ["full", "full", "full", "skip"]
    assert again[0]["capture"]["reason"].startswith("regressed signature: full capture")
    assert "since the fix" in again[3]["capture"]["reason"]


def test_ignored_signature_is_skipped(client, tokens) -> None:
    first = report(client, tokens["report"], storm_report("noisy_warn"))
    client.patch(f"/api/v1/signatures/{first['signature']['id']}", json={"status": "ignored"},
                 headers=auth(tokens["triage"]))
    answer = report(client, tokens["report"], storm_report("noisy_warn"))["capture"]
    assert answer == {"action": "skip", "reason": "signature is ignored: no capture", "dump_level": None}


def test_patch_modes_full_filtered_skip_and_back_to_auto(client, tokens) -> None:
    first = report(client, tokens["report"], storm_report("dma_map"))
    signature_id = first["signature"]["id"]
    assert actions(client, tokens["report"], "dma_map", 3) == ["full", "full", "skip"]

    assert patch_policy(client, tokens["triage"], signature_id, mode="full").status_code == 200
    assert actions(client, tokens["report"], "dma_map", 2) == ["full", "full"]

    response = patch_policy(client, tokens["triage"], signature_id, mode="filtered", dump_level=31)
    assert response.json["capture_policy"] == {"mode": "filtered", "dump_level": 31, "extra_full_captures": 0}
    filtered = report(client, tokens["report"], storm_report("dma_map"))["capture"]
    assert (filtered["action"], filtered["dump_level"]) == ("filtered", 31)
    assert "dump level 31" in filtered["reason"]

    patch_policy(client, tokens["triage"], signature_id, mode="skip")
    assert actions(client, tokens["report"], "dma_map", 1) == ["skip"]

    # Forced full answers took no slot: back on auto, the 3 slots are still the first 3.
    patch_policy(client, tokens["triage"], signature_id, mode="auto")
    assert actions(client, tokens["report"], "dma_map", 1) == ["skip"]


def test_filtered_without_a_dump_level_is_refused(client, tokens) -> None:
    first = report(client, tokens["report"], storm_report("needs_level"))
    response = patch_policy(client, tokens["triage"], first["signature"]["id"], mode="filtered")
    assert response.status_code == 400
    assert "dump_level" in response.json["error"]["fields"]["capture_policy"]


def test_n_more_full_captures(client, tokens) -> None:
    first = report(client, tokens["report"], storm_report("rcu_stall"))
    signature_id = first["signature"]["id"]
    actions(client, tokens["report"], "rcu_stall", 2)
    assert actions(client, tokens["report"], "rcu_stall", 1) == ["skip"]
    assert patch_policy(client, tokens["triage"], signature_id, extra_full_captures=2).status_code == 200
    more = [report(client, tokens["report"], storm_report("rcu_stall"))["capture"] for _ in range(3)]
    assert [m["action"] for m in more] == ["full", "full", "skip"]
    assert "1 more wanted" in more[0]["reason"] and "0 more wanted" in more[1]["reason"]
    detail = client.get(f"/api/v1/signatures/{signature_id}", headers=auth(tokens["triage"])).json
    assert detail["capture_policy"]["extra_full_captures"] == 0


def test_n_more_wins_over_a_skip_mode(client, tokens) -> None:
    first = report(client, tokens["report"], storm_report("skip_but_more"))
    patch_policy(client, tokens["triage"], first["signature"]["id"], mode="skip", extra_full_captures=1)
    assert actions(client, tokens["report"], "skip_but_more", 2) == ["full", "skip"]


def test_replayed_report_keeps_its_answer_and_claims_nothing(client, tokens) -> None:
    body = storm_report("replayed")
    first = report(client, tokens["report"], body)
    for _ in range(3):
        assert report(client, tokens["report"], body)["capture"] == first["capture"]
    assert actions(client, tokens["report"], "replayed", 3) == ["full", "full", "skip"]


def test_an_event_that_regressed_is_decided_as_regressed_even_if_the_row_says_resolved(
    client, tokens, database, settings
) -> None:
    """In a storm, a report racing the one that flipped the status still holds `resolved`."""
    answers = [report(client, tokens["report"], storm_report("raced_fix")) for _ in range(3)]
    for answer in answers:
        post_capture(client, tokens["report"], answer["event_id"])
    signature_id = answers[0]["signature"]["id"]
    client.patch(f"/api/v1/signatures/{signature_id}", json={"status": "resolved"},
                 headers=auth(tokens["triage"]))
    late = report(client, tokens["report"], storm_report("raced_fix"))  # crashed before the fix
    assert late["capture"]["action"] == "skip"
    with database.session() as session:
        signature = session.get_one(Signature, int(signature_id))
        event = session.get_one(Event, int(late["event_id"]))
        assert signature.status == "resolved"
        event.regression = REGRESSED
        decision = decide_capture(session, signature, event, settings)
        session.rollback()
    assert decision.action == "full"
    assert decision.reason.startswith("regressed signature")


def test_capture_updates_settle_the_slot(client, tokens) -> None:
    answers = [report(client, tokens["report"], storm_report("patched_capture")) for _ in range(3)]
    started = post_capture(client, tokens["report"], answers[0]["event_id"], status="started").json
    url = f"/api/v1/captures/{started['id']}"
    assert actions(client, tokens["report"], "patched_capture", 1) == ["skip"]  # started: still held
    client.patch(url, json={"status": "completed", "bytes": 10}, headers=auth(tokens["report"]))
    assert actions(client, tokens["report"], "patched_capture", 1) == ["skip"]  # completed: held
    client.patch(url, json={"status": "failed"}, headers=auth(tokens["report"]))  # truncated after all
    assert actions(client, tokens["report"], "patched_capture", 2) == ["full", "skip"]


def test_a_capture_whose_file_was_removed_is_marked_once_and_frees_its_slot(client, tokens) -> None:
    """A core handler's directory cap deleted the core: POST /captures/removed by capture key
    marks the capture (a resent notice changes nothing) and the bug may be captured again."""
    answers = [report(client, tokens["report"], storm_report("btrfs_csum")) for _ in range(3)]
    for number, answer in enumerate(answers):
        key = f"core-{number:02x}-core"
        recorded = post_capture(client, tokens["report"], answer["event_id"], method="core", capture_key=key)
        assert recorded.status_code == 201
    assert actions(client, tokens["report"], "btrfs_csum", 1) == ["skip"]
    notice = {"capture_keys": ["core-01-core", "core-99-core", "core-01-core"], "reason": "directory cap"}
    answer = client.post("/api/v1/captures/removed", json=notice, headers=auth(tokens["report"]))
    assert answer.status_code == 200
    assert answer.json == {"removed": ["core-01-core"], "unknown": ["core-99-core"]}
    [capture] = captures_of(client, tokens["triage"], answers[1])
    assert capture["status"] == "completed" and capture["removed_reason"] == "directory cap"
    first_removed_at = capture["removed_at"]
    assert first_removed_at is not None
    assert actions(client, tokens["report"], "btrfs_csum", 2) == ["full", "skip"]
    resent = notice | {"reason": "later"}
    again = client.post("/api/v1/captures/removed", json=resent, headers=auth(tokens["report"]))
    assert again.json["removed"] == ["core-01-core"]
    [capture] = captures_of(client, tokens["triage"], answers[1])
    assert (capture["removed_at"], capture["removed_reason"]) == (first_removed_at, "directory cap")


def captures_of(client, token: str, answer: dict) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return client.get(f"/api/v1/events/{answer['event_id']}", headers=auth(token)).json["captures"]


@pytest.mark.parametrize(
    ("notice", "field"),
    [
        ({"capture_keys": [], "reason": "cap"}, "capture_keys"),
        ({"capture_keys": [f"k{n}" for n in range(101)], "reason": "cap"}, "capture_keys"),
        ({"capture_keys": ["k\u0000"], "reason": "cap"}, "capture_keys"),
        ({"capture_keys": ["k" * 129], "reason": "cap"}, "capture_keys"),
        ({"capture_keys": ["k"], "reason": ""}, "reason"),
        ({"capture_keys": "k", "reason": "cap"}, "capture_keys"),
    ],
)
def test_a_bad_removal_notice_is_a_400_naming_the_field(client, tokens, notice, field) -> None:  # type: ignore[no-untyped-def]
    answer = client.post("/api/v1/captures/removed", json=notice, headers=auth(tokens["report"]))
    assert answer.status_code == 400 and field in answer.json["error"]["fields"], answer.json
    read_only = client.post("/api/v1/captures/removed", json={"capture_keys": ["k"], "reason": "x"},
                            headers=auth(tokens["triage"]))
    assert read_only.status_code == 403
