"""Manual merge / unmerge over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

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
