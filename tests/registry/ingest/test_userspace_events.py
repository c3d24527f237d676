"""A process's crash does not end its host's boot: each userspace report is an event of its
own, though every core of one boot carries the same boot_id."""

from __future__ import annotations

from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.userspace import stack


def test_two_cores_of_one_boot_are_two_events_of_one_signature(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    reports = [
        crash_report(source="userspace", console_log=None, stack=stack(), boot_id="boot-7") for _ in range(2)
    ]
    answers = [client.post("/api/v1/reports", json=report, headers=auth(token)) for report in reports]
    assert [answer.status_code for answer in answers] == [201, 201]
    first, second = (answer.json for answer in answers)
    assert first["event_id"] != second["event_id"]
    assert first["signature"]["id"] == second["signature"]["id"]
    event = client.get(f"/api/v1/events/{second['event_id']}", headers=auth(reader)).json
    assert event["boot_id"] == "boot-7" and event["signature"]["event_count"] == 2
    replay = client.post("/api/v1/reports", json=reports[0], headers=auth(token))
    assert (replay.status_code, replay.json["event_id"]) == (200, first["event_id"])
