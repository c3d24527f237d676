"""PUT/DELETE /api/v1/captures/{id}/pin and the pins' history, on both databases."""

from __future__ import annotations

from testkit.pages import csrf_from, login
from tests.support.capture import post_capture, report, storm_report
from tests.support.http import auth


def capture_id(client, make_token) -> str:  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    event_id = report(client, reporter, storm_report("pinned_bug"))["event_id"]
    return post_capture(client, reporter, event_id, bytes=1 << 30).json["id"]


def test_pin_unpin_and_the_history_says_who_when_and_why(client, make_token) -> None:
    capture = capture_id(client, make_token)
    alice, bob = make_token("triage", name="alice"), make_token("triage", name="bob")
    pinned = client.put(
        f"/api/v1/captures/{capture}/pin", json={"note": "RCA in progress"}, headers=auth(alice)
    )
    assert pinned.status_code == 201
    assert (pinned.json["pinned_by"], pinned.json["note"], pinned.json["unpinned_at"]) == (
        "alice",
        "RCA in progress",
        None,
    )
    again = client.put(f"/api/v1/captures/{capture}/pin", headers=auth(bob))  # no body: a plain pin
    assert again.status_code == 200 and again.json["id"] == pinned.json["id"]  # alice's pin stands
    assert again.json["pinned_by"] == "alice"
    unpinned = client.delete(f"/api/v1/captures/{capture}/pin", headers=auth(bob))
    assert unpinned.status_code == 200
    assert (unpinned.json["unpinned_by"], unpinned.json["id"]) == ("bob", pinned.json["id"])
    assert client.delete(f"/api/v1/captures/{capture}/pin", headers=auth(bob)).status_code == 404
    repinned = client.put(f"/api/v1/captures/{capture}/pin", json={}, headers=auth(bob))
    assert repinned.status_code == 201 and repinned.json["id"] != pinned.json["id"]
    history = client.get(f"/api/v1/captures/{capture}/pins", headers=auth(make_token("read"))).json["pins"]
    assert [(p["pinned_by"], p["unpinned_by"]) for p in history] == [("alice", "bob"), ("bob", None)]


def test_pins_need_the_triage_scope_and_a_capture(client, make_token) -> None:
    capture = capture_id(client, make_token)
    reader = make_token("read")
    assert client.put(f"/api/v1/captures/{capture}/pin", headers=auth(reader)).status_code == 403
    assert client.delete(f"/api/v1/captures/{capture}/pin", headers=auth(reader)).status_code == 403
    triage = make_token("triage")
    missing = client.put("/api/v1/captures/987654/pin", headers=auth(triage))
    assert missing.status_code == 404 and "no capture 987654" in missing.json["error"]["message"]
    assert client.get("/api/v1/captures/987654/pins", headers=auth(reader)).status_code == 404
    long_note = client.put(f"/api/v1/captures/{capture}/pin", json={"note": "x" * 501}, headers=auth(triage))
    assert long_note.status_code == 400 and "note" in long_note.json["error"]["fields"]


def test_the_event_page_pins_and_unpins_with_the_triage_scope(client, make_token) -> None:  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    event_id = report(client, reporter, storm_report("page_pinned_bug"))["event_id"]
    capture = post_capture(client, reporter, event_id, bytes=1 << 30).json["id"]
    login(client, make_token("triage", name="carol"))
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    # a note past the pin's 500 characters is the API's 400, not a 500 on PostgreSQL
    long_note = client.post(f"/captures/{capture}/pin", data={"csrf_token": csrf_from(page), "action": "pin",
                                                               "note": "n" * 501})
    assert long_note.status_code == 400 and "note" in long_note.get_data(as_text=True)
    pinned = client.post(f"/captures/{capture}/pin", data={"csrf_token": csrf_from(page), "action": "pin"})
    assert pinned.status_code == 302 and pinned.location.endswith(f"/events/{event_id}#capture")
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    assert "pinned by carol" in page and ">Unpin<" in page
    history = client.get(f"/api/v1/captures/{capture}/pins", headers=auth(make_token("read"))).json["pins"]
    assert [(p["pinned_by"], p["unpinned_by"]) for p in history] == [("carol", None)]
    login(client, make_token("triage", kind="agent"))  # an AI's token: it may pin, never unpin
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    agent = client.post(f"/captures/{capture}/pin", data={"csrf_token": csrf_from(page), "action": "unpin"})
    assert agent.status_code == 403
    assert "pinned by carol" in client.get(f"/events/{event_id}").get_data(as_text=True)
    login(client, make_token("triage", name="carol"))
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    client.post(f"/captures/{capture}/pin", data={"csrf_token": csrf_from(page), "action": "unpin"})
    assert "pinned by" not in client.get(f"/events/{event_id}").get_data(as_text=True)
    forged = client.post(f"/captures/{capture}/pin", data={"action": "pin"})
    assert forged.status_code == 400  # no CSRF token

    login(client, make_token("read"))
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    assert ">Pin<" not in page
    refused = client.post(f"/captures/{capture}/pin", data={"csrf_token": csrf_from(page), "action": "pin"})
    assert refused.status_code == 403


def test_an_id_past_the_column_is_a_404_for_every_method_of_the_pin(client, make_token) -> None:
    """Two methods share the path: an id no row can have is a 404 for both, not werkzeug's 405
    (the other method's route matched the path before the id was read)."""
    triage = auth(make_token("triage"))
    for method in (client.put, client.delete):
        answer = method("/api/v1/captures/1957189393187142656/pin", headers=triage)
        assert answer.status_code == 404, answer.json
        assert answer.json["error"]["code"] == "not_found"
