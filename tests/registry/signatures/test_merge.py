"""Manual merge / unmerge over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select

from registry.capture.models import Capture, CaptureSlot
from tests.support.http import auth
from tests.support.signatures import GPF_LOG, WARNING_LOG, report, signature


def test_merge_routes_future_events_and_answers_under_both_fingerprints(client, make_token) -> None:
    reporter, triage = make_token("report"), make_token("triage")
    a = report(client, reporter, GPF_LOG)["signature"]
    b = report(client, reporter, WARNING_LOG)["signature"]
    report(client, reporter, WARNING_LOG)
    assert a["id"] != b["id"]

    merged = client.post(f"/api/v1/signatures/{a['id']}/merge", json={"other": b["fingerprint"]},
                         headers=auth(triage))
    assert merged.status_code == 200, merged.json
    assert merged.json["event_count"] == 3
    assert merged.json["merged"] == [b["id"]]

    for key in (a["fingerprint"], b["fingerprint"], b["id"]):
        assert signature(client, triage, key)["id"] == a["id"]
    later = report(client, reporter, WARNING_LOG)
    assert later["signature"]["id"] == a["id"] and later["known"] is True
    assert signature(client, triage, a["id"])["event_count"] == 4
    listed = client.get("/api/v1/signatures", headers=auth(triage)).json["signatures"]
    assert [s["id"] for s in listed] == [a["id"]]
    events = client.get(f"/api/v1/signatures/{a['id']}/events", headers=auth(triage)).json
    assert len(events["events"]) == 4


def test_unmerge_restores_both_signatures_with_their_own_events(client, make_token) -> None:
    reporter, triage = make_token("report"), make_token("triage")
    a = report(client, reporter, GPF_LOG)["signature"]
    b = report(client, reporter, WARNING_LOG)["signature"]
    client.post(f"/api/v1/signatures/{a['id']}/merge", json={"other": b["id"]}, headers=auth(triage))
    report(client, reporter, WARNING_LOG)  # arrives while merged: lands on a

    undone = client.post(f"/api/v1/signatures/{a['id']}/unmerge", json={"other": b["id"]},
                         headers=auth(triage))
    assert undone.status_code == 200, undone.json
    assert undone.json["event_count"] == 1
    assert signature(client, triage, b["fingerprint"])["id"] == b["id"]
    assert signature(client, triage, b["id"])["event_count"] == 2
    assert report(client, reporter, WARNING_LOG)["signature"]["id"] == b["id"]


def test_merge_refusals(client, make_token) -> None:
    reporter, triage, reader = make_token("report"), make_token("triage"), make_token("read")
    a = report(client, reporter, GPF_LOG)["signature"]
    b = report(client, reporter, WARNING_LOG)["signature"]
    url = f"/api/v1/signatures/{a['id']}/merge"
    assert client.post(url, json={"other": b["id"]}, headers=auth(reader)).status_code == 403
    missing = client.post(url, json={}, headers=auth(triage))
    assert missing.status_code == 400 and "other" in missing.json["error"]["fields"]
    unknown = client.post(url, json={"other": "f" * 32}, headers=auth(triage))
    assert unknown.status_code == 404 and "other" in unknown.json["error"]["fields"]
    itself = client.post(url, json={"other": a["fingerprint"]}, headers=auth(triage))
    assert itself.status_code == 409
    not_merged = client.post(f"/api/v1/signatures/{a['id']}/unmerge", json={"other": b["id"]},
                             headers=auth(triage))
    assert not_merged.status_code == 409


def test_merge_and_unmerge_are_in_the_openapi_document(client, make_token) -> None:
    spec = client.get("/api/v1/openapi.json").json
    assert "post" in spec["paths"]["/api/v1/signatures/{key}/merge"]
    assert "post" in spec["paths"]["/api/v1/signatures/{key}/unmerge"]


def _dumped(client, reporter: str, log: str) -> dict:
    """A crash answered full, and its full dump recorded as the reporter does."""
    answer = report(client, reporter, log)
    assert answer["capture"]["action"] == "full"
    capture = {"method": "makedumpfile", "status": "completed", "dump_level": 0, "bytes": 1000,
               "downtime_s": 60.0, "capture_key": f"{answer['event_id']}-makedumpfile"}
    recorded = client.post(f"/api/v1/events/{answer['event_id']}/captures", json=capture,
                           headers=auth(reporter))
    assert recorded.status_code == 201, recorded.json
    return answer


def test_captures_and_their_slots_follow_events_through_merge_and_unmerge(
    client, database, make_token
) -> None:
    """One bug under two signatures: merged, its dumps count once against one budget (K = 3):
    two taken, one left; unmerged, each signature has its own dumps and budget back."""
    reporter, reader, triage = make_token("report"), make_token("read"), make_token("triage")
    a = _dumped(client, reporter, GPF_LOG)["signature"]
    b = _dumped(client, reporter, WARNING_LOG)["signature"]

    def state() -> tuple[dict[int, int], dict[int, int]]:
        with database.session() as session:
            captures = Counter(session.scalars(select(Capture.signature_id)).all())
            slots = Counter(session.scalars(select(CaptureSlot.signature_id)).all())
        return dict(captures), dict(slots)

    def full_captures(signature_id: str) -> int:
        answer = client.get(f"/api/v1/captures/savings?signature={signature_id}", headers=auth(reader)).json
        return sum(row["full_captures"] for row in answer["signatures"])

    merged = client.post(f"/api/v1/signatures/{a['id']}/merge", json={"other": b["id"]}, headers=auth(triage))
    assert merged.status_code == 200, merged.json
    assert state() == ({int(a["id"]): 2}, {int(a["id"]): 2})
    assert full_captures(a["id"]) == 2
    third = _dumped(client, reporter, WARNING_LOG)
    assert third["signature"]["id"] == a["id"]
    assert report(client, reporter, GPF_LOG)["capture"]["action"] == "skip", "K = 3 dumps of one bug"

    undone = client.post(f"/api/v1/signatures/{a['id']}/unmerge", json={"other": b["id"]},
                         headers=auth(triage))
    assert undone.status_code == 200, undone.json
    assert state() == ({int(a["id"]): 1, int(b["id"]): 2}, {int(a["id"]): 1, int(b["id"]): 2})
    assert (full_captures(a["id"]), full_captures(b["id"])) == (1, 2)
    assert report(client, reporter, GPF_LOG)["capture"]["action"] == "full", "a's own budget is back"
