"""POST /api/v1/events/{id}/captures and PATCH /api/v1/captures/{id}."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from registry.capture.models import Capture
from tests.support.capture import post_capture, report, storm_report
from tests.support.http import auth


@pytest.fixture
def event_id(client, make_token) -> str:  # type: ignore[no-untyped-def]
    return report(client, make_token("report"), storm_report("capture_target"))["event_id"]


def test_a_capture_is_recorded_and_shown_on_its_event(client, make_token, event_id) -> None:
    token = make_token("report")
    body = {"method": "makedumpfile", "status": "completed", "dump_level": 31, "bytes": 7_340_032_000,
            "duration_s": 1820.5, "downtime_s": 1900.0, "target": "nfs:/dumps", "uri": "nfs://dumps/a.vmcore"}
    response = client.post(f"/api/v1/events/{event_id}/captures", json=body, headers=auth(token))
    assert response.status_code == 201
    capture = response.json
    assert {k: capture[k] for k in body} == body
    assert capture["event_id"] == event_id and capture["processing_state"] is None
    event = client.get(f"/api/v1/events/{event_id}", headers=auth(make_token("read"))).json
    assert [c["id"] for c in event["captures"]] == [capture["id"]]
    assert event["captures"][0]["bytes"] == 7_340_032_000


def test_a_resent_capture_with_its_key_is_stored_once(client, make_token, event_id, database) -> None:
    token = make_token("report")
    first = post_capture(client, token, event_id, capture_key="kdump-1", status="started")
    again = post_capture(client, token, event_id, capture_key="kdump-1", status="started")
    other = post_capture(client, token, event_id, capture_key="kdump-2", status="started")
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert again.json["id"] == first.json["id"] != other.json["id"]
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Capture)) == 2


def test_raw_capture_is_processed_later(client, make_token, event_id) -> None:
    token = make_token("report")
    raw = post_capture(client, token, event_id, method="raw", bytes=2_199_023_255_552).json
    assert raw["processing_state"] == "pending"
    url = f"/api/v1/captures/{raw['id']}"
    processing = client.patch(url, json={"processing_state": "processing"}, headers=auth(token))
    assert processing.json["processing_state"] == "processing"
    done = client.patch(url, json={"processing_state": "done", "bytes": 9_000_000_000,
                                   "uri": "s3://dumps/filtered.vmcore"}, headers=auth(token))
    assert done.status_code == 200
    assert (done.json["processing_state"], done.json["bytes"], done.json["uri"]) == (
        "done", 9_000_000_000, "s3://dumps/filtered.vmcore")
    back = client.patch(url, json={"processing_state": "pending"}, headers=auth(token))
    assert back.status_code == 409
    assert "processing_state" in back.json["error"]["fields"]


def test_status_moves_forward_only(client, make_token, event_id) -> None:
    token = make_token("report")
    started = post_capture(client, token, event_id, status="started").json
    url = f"/api/v1/captures/{started['id']}"
    assert client.patch(url, json={"status": "failed"}, headers=auth(token)).status_code == 200
    assert client.patch(url, json={"status": "failed"}, headers=auth(token)).status_code == 200
    reopened = client.patch(url, json={"status": "completed"}, headers=auth(token))
    assert reopened.status_code == 409
    assert reopened.json["error"]["code"] == "conflict"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"method": "scp", "status": "completed"}, "method"),
        ({"method": "raw"}, "status"),
        ({"method": "raw", "status": "completed", "bytes": -1}, "bytes"),
        ({"method": "raw", "status": "completed", "dump_level": 32}, "dump_level"),
        ({"method": "raw", "status": "completed", "processing_state": "queued"}, "processing_state"),
        ({"method": "raw", "status": "completed", "capture_key": "k" * 129}, "capture_key"),
    ],
)
def test_bad_captures_name_the_field(client, make_token, event_id, body, field) -> None:  # type: ignore[no-untyped-def]
    url = f"/api/v1/events/{event_id}/captures"
    response = client.post(url, json=body, headers=auth(make_token("report")))
    assert response.status_code == 400
    assert field in response.json["error"]["fields"]


def test_unknown_event_and_capture_are_404_and_scope_is_enforced(client, make_token, event_id) -> None:
    token = make_token("report")
    assert post_capture(client, token, "999999").status_code == 404
    assert client.patch("/api/v1/captures/999999", json={"status": "failed"},
                        headers=auth(token)).status_code == 404
    assert post_capture(client, make_token("read"), event_id).status_code == 403
    assert client.post(f"/api/v1/events/{event_id}/captures", json={}).status_code == 401
    empty = client.patch("/api/v1/captures/1", json={}, headers=auth(token))  # a no-op, of no capture
    assert empty.status_code == 404
