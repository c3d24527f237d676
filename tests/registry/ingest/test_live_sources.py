"""The live_kernel and pstore sources: one event per live report, repeats counted once, a
pstore record joined to its crash kernel's event (by boot_id, else by fingerprint and time)."""

from __future__ import annotations

from testkit.reports import NULL_DEREF_LOG, crash_report
from tests.support.http import auth
from tests.support.signatures import GPF_LOG, WARNING_LOG


def post(client, token, body):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/reports", json=body, headers=auth(token))


def event_of(client, token, answer):  # type: ignore[no-untyped-def]
    return client.get(f"/api/v1/events/{answer['event_id']}", headers=auth(token)).json


def live(**overrides):  # type: ignore[no-untyped-def]
    defaults = {"source": "live_kernel", "console_log": WARNING_LOG, "boot_id": "boot-live-1"}
    return crash_report(**defaults | overrides)


def test_a_live_report_is_an_event_no_dump_can_follow(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    first = post(client, token, live())
    assert first.status_code == 201
    assert first.json["capture"]["action"] == "none"
    other = post(client, token, live(console_log=NULL_DEREF_LOG))
    # Two reports of one boot are two events: a live report does not end its boot.
    assert other.json["event_id"] != first.json["event_id"]
    event = event_of(client, reader, first.json)
    assert event["sources"] == ["live_kernel"] and event["repeats"] == 0
    assert event["boot_id"] == "boot-live-1"
    savings = client.get("/api/v1/captures/savings", headers=auth(reader)).json
    assert savings["totals"]["dumps_skipped"] == 0  # `none` is no skipped dump


def test_repeats_join_the_first_report_and_count_once(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    first = post(client, token, live()).json
    repeat = live(repeat_of=_report_id_of(client, reader, first), repeat_count=500)
    answers = [post(client, token, repeat), post(client, token, repeat)]
    assert [a.status_code for a in answers] == [201, 200]  # the resend is a replay
    assert {a.json["event_id"] for a in answers} == {first["event_id"]}
    more = post(client, token, repeat | {"report_id": repeat["report_id"] + "-2", "repeat_count": 300})
    assert more.json["event_id"] == first["event_id"]
    event = event_of(client, reader, first)
    assert event["repeats"] == 800
    assert event["signature"]["event_count"] == 1
    listed = client.get(f"/api/v1/signatures/{first['signature']['id']}/events", headers=auth(reader)).json
    assert [e["repeats"] for e in listed["events"]] == [800]


def _report_id_of(client, reader, answer) -> str:  # type: ignore[no-untyped-def]
    return event_of(client, reader, answer)["reports"][0]["report_id"]


def test_repeat_of_is_refused_on_other_sources(client, make_token) -> None:
    response = post(client, make_token("report"), crash_report(repeat_of="r-1", repeat_count=3))
    assert response.status_code == 400
    assert "repeat_of" in response.json["error"]["fields"]
    negative = post(client, make_token("report"), live(repeat_count=-1))
    assert negative.status_code == 400 and "repeat_count" in negative.json["error"]["fields"]


def test_pstore_with_the_crashed_boot_id_joins_the_crash_kernels_event(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    kernel = post(client, token, crash_report()).json
    boot_id = event_of(client, reader, kernel)["boot_id"]
    pstore = post(client, token, crash_report(source="pstore", boot_id=boot_id,
                                              crashed_at="2026-11-29T11:59:40Z"))
    assert pstore.status_code == 201
    assert pstore.json["event_id"] == kernel["event_id"]
    assert pstore.json["capture"] == kernel["capture"]  # the crash kernel's answer stands
    assert event_of(client, reader, kernel)["sources"] == ["crash_kernel", "pstore"]


def test_pstore_without_boot_id_joins_by_fingerprint_within_the_window(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    kernel = post(client, token, crash_report(crashed_at="2026-11-29T12:00:30Z")).json
    near = post(client, token, crash_report(source="pstore", boot_id=None, crashed_at="2026-11-29T11:59:58Z"))
    assert near.json["event_id"] == kernel["event_id"]
    # Another host's panic, and this host's panic an hour later, are other crashes.
    elsewhere = post(client, token, crash_report(source="pstore", boot_id=None, host={"hostname": "b2"}))
    hour_later = crash_report(source="pstore", boot_id=None, crashed_at="2026-11-29T13:00:00Z")
    later = post(client, token, hour_later)
    assert len({kernel["event_id"], elsewhere.json["event_id"], later.json["event_id"]}) == 3
    event = event_of(client, reader, later.json)
    assert event["sources"] == ["pstore"] and event["capture"]["action"] == "none"
    assert event["signature"]["event_count"] == 3  # a failed dump still counts its crash


def test_a_panics_report_after_its_pstore_record_joins_the_record_s_event(client, make_token) -> None:
    """A DPU's report delayed past the host's reboot (or a crash kernel's, resent) arrives after
    the pstore record of the same panic: one event, as in the other order."""
    token, reader = make_token("report"), make_token("read")
    pstore = crash_report(source="pstore", boot_id=None, crashed_at="2026-11-29T11:59:58Z")
    record = post(client, token, pstore)
    assert record.status_code == 201
    dpu = post(client, token, crash_report(source="dpu", crashed_at="2026-11-29T12:00:30Z"))
    assert dpu.status_code == 201
    assert dpu.json["event_id"] == record.json["event_id"]
    assert dpu.json["capture"] == record.json["capture"]  # the host has rebooted: nothing to dump
    kernel = post(client, token, crash_report(crashed_at="2026-11-29T12:00:10Z"))
    assert kernel.json["event_id"] == record.json["event_id"]
    event = event_of(client, reader, record.json)
    assert event["sources"] == ["pstore", "dpu", "crash_kernel"]
    assert event["signature"]["event_count"] == 1
    # Another host's panic, this host's panic an hour later and another bug are other crashes.
    others = [
        crash_report(source="dpu", host={"hostname": "b2"}),
        crash_report(source="dpu", crashed_at="2026-11-29T13:00:00Z"),
        crash_report(source="dpu", console_log=GPF_LOG),
    ]
    answers = [post(client, token, other).json for other in others]
    assert len({record.json["event_id"], *(answer["event_id"] for answer in answers)}) == 4


def test_a_pstore_crash_records_its_failed_capture(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    answer = post(client, token, crash_report(source="pstore")).json
    capture = {"method": "makedumpfile", "status": "failed", "capture_key": "kdump-x-makedumpfile"}
    recorded = client.post(f"/api/v1/events/{answer['event_id']}/captures", json=capture, headers=auth(token))
    assert recorded.status_code == 201
    event = event_of(client, reader, answer)
    assert [(c["method"], c["status"]) for c in event["captures"]] == [("makedumpfile", "failed")]
