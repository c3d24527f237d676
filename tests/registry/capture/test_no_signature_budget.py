"""Reports with no recognisable crash in them (garbled, truncated, crash-free) are captured
within a budget of their own, per host and per fleet, with the reason in the answer; each can
be found on /unfingerprinted and through GET /api/v1/unfingerprinted with its text; /metrics
counts them. On both databases, over the app and over real HTTP connections at once."""

from __future__ import annotations

import html
import re
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
import requests
from sqlalchemy import select

from registry.capture.models import NoSignatureSlot
from registry.config import Settings
from registry.core.events import Event
from registry.signatures.identify import identify
from testkit.pages import login
from testkit.reports import crash_report
from tests.support.engines import app_with_a_failing_engine
from tests.support.http import auth

PER_HOST, PER_FLEET = 1, 2
# What a crash kernel sends when the log it read is not a crash the engine knows.
GARBLED_LOG = (
    "[  812.1] \ufffd\ufffd\x1b[0m mlx5_core 0000:3b:00.0: \ufffd\ufffdq\ufffd\n"
    "[  812.2] \ufffd\ufffd\ufffd\n"
)
TRUNCATED_LOG = (
    "[    0.000000] Linux version 6.8.0-52-generic (buildd@lcy02) #53-Ubuntu SMP\n[    3.2] nvme nvme0: pci"
)
CRASH_FREE_LOG = (
    "[    1.0] systemd[1]: Started Journal Service.\n[    2.0] EXT4-fs (nvme0n1p1): mounted filesystem\n"
)
NO_CRASH_LOGS = (GARBLED_LOG, TRUNCATED_LOG, CRASH_FREE_LOG)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return replace(settings, no_signature_full_per_host=PER_HOST, no_signature_full_per_fleet=PER_FLEET)


def no_crash_report(host: str, log: str = GARBLED_LOG) -> dict[str, Any]:
    report = crash_report(console_log=log)
    report["host"] = report["host"] | {"hostname": host}
    return report


def metric(client: Any, name: str) -> float:
    scraped = client.get("/metrics").get_data(as_text=True)
    found = re.search(rf"^{re.escape(name)} (\S+)$", scraped, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_the_logs_hold_no_crash_the_engine_knows() -> None:
    assert all(identify(log, None) is None for log in NO_CRASH_LOGS)


def test_repeated_reports_without_a_crash_stay_within_the_host_and_fleet_budget(
    client: Any, make_token: Any, database: Any
) -> None:
    reporter = make_token("report")
    counted = 'crashreg_reports_without_crash_total{source="crash_kernel"}'
    before = metric(client, counted)

    def send(host: str, log: str = GARBLED_LOG) -> dict[str, Any]:
        response = client.post("/api/v1/reports", json=no_crash_report(host, log), headers=auth(reporter))
        assert response.status_code == 201, response.get_data(as_text=True)
        assert response.json["signature"] is None and response.json["known"] is False
        return response.json["capture"]

    first = send("gpu-a001")
    assert first["action"] == "full"
    assert first["reason"] == (
        "no recognisable crash in the report: full capture 1 of 1 for this host and 1 of 2 for the fleet "
        "in the 7-day window"
    )
    for log in NO_CRASH_LOGS:  # the same host again: its own budget is spent
        again = send("gpu-a001", log)
        assert again["action"] == "skip"
        assert again["reason"].startswith("no recognisable crash in the report: this host has had its 1 ")
    assert send("gpu-a002", CRASH_FREE_LOG)["action"] == "full"
    spent = send("gpu-a003", TRUNCATED_LOG)
    assert spent["action"] == "skip"
    assert spent["reason"].startswith("no recognisable crash in the report: the fleet has had its 2 ")

    with database.session() as session:
        held = session.execute(select(NoSignatureSlot.budget, NoSignatureSlot.slot)).all()
        actions = Counter(session.scalars(select(Event.capture_action).where(Event.signature_id.is_(None))))
    # the third host's slot, won before the fleet's was lost, was given back
    assert sorted(held) == [("fleet", 1), ("fleet", 2), *sorted((b, 1) for b, _ in held if b != "fleet")]
    assert len([b for b, _ in held if b != "fleet"]) == 2
    assert actions == {"full": 2, "skip": 4}
    assert metric(client, counted) == before + 6
    assert metric(client, "crashreg_events_without_crash") == 6

    # A crash the engine knows is no part of this budget.
    known = client.post("/api/v1/reports", json=crash_report(), headers=auth(reporter)).json
    assert known["capture"]["action"] == "full" and known["signature"] is not None


def test_a_failed_capture_frees_the_budget_and_a_completed_one_holds_it(client: Any, make_token: Any) -> None:
    reporter = make_token("report")
    answers = [client.post("/api/v1/reports", json=no_crash_report(f"gpu-b{n}"), headers=auth(reporter)).json
               for n in range(3)]
    assert [a["capture"]["action"] for a in answers] == ["full", "full", "skip"]
    completed = {"method": "makedumpfile", "status": "completed", "bytes": 10**9}
    assert client.post(f"/api/v1/events/{answers[0]['event_id']}/captures", json=completed,
                       headers=auth(reporter)).status_code == 201
    failed = {"method": "makedumpfile", "status": "failed"}
    assert client.post(f"/api/v1/events/{answers[1]['event_id']}/captures", json=failed,
                       headers=auth(reporter)).status_code == 201
    # the failed capture's fleet slot (and its host's) is free again; the completed one's is not
    again = client.post("/api/v1/reports", json=no_crash_report("gpu-b2"), headers=auth(reporter)).json
    assert again["capture"]["action"] == "full"
    assert "2 of 2 for the fleet" in again["capture"]["reason"]
    assert client.post("/api/v1/reports", json=no_crash_report("gpu-b1"), headers=auth(reporter)).json[
        "capture"]["action"] == "skip"  # the fleet's two slots are held again


def test_a_replayed_report_gets_its_first_answer_and_takes_nothing(client: Any, make_token: Any) -> None:
    reporter = make_token("report")
    report = no_crash_report("gpu-c1")
    first = client.post("/api/v1/reports", json=report, headers=auth(reporter))
    replay = client.post("/api/v1/reports", json=report, headers=auth(reporter))
    assert replay.status_code == 200 and replay.json == first.json | {"duplicate": True}
    assert client.post("/api/v1/reports", json=no_crash_report("gpu-c2"),
                       headers=auth(reporter)).json["capture"]["action"] == "full"  # the fleet's 2nd


def test_every_report_without_a_crash_is_listed_with_its_text(client: Any, make_token: Any) -> None:
    reporter, reader = make_token("report"), make_token("read")
    sent = {}
    for n, log in enumerate(NO_CRASH_LOGS * 2):
        report = no_crash_report(f"gpu-d{n}", log + f"[ 9.{n}] marker-{n}\n")
        sent[client.post("/api/v1/reports", json=report, headers=auth(reporter)).json["event_id"]] = report
    userspace = crash_report(source="userspace", console_log=None,
                             stack={"executable": "/usr/bin/trainer", "frames": [{"address": "0x1"}]})
    stack_only = client.post("/api/v1/reports", json=userspace, headers=auth(reporter)).json
    assert stack_only["signature"] is None, "a stack of one bare address is no crash the engine names"
    client.post("/api/v1/reports", json=crash_report(), headers=auth(reporter))  # fingerprinted: not listed

    listed, cursor = [], None
    while True:
        query = {"limit": 3, "cause": "no_crash"} | ({"cursor": cursor} if cursor else {})
        page = client.get("/api/v1/unfingerprinted", query_string=query, headers=auth(reader))
        assert page.status_code == 200, page.json
        listed += page.json["events"]
        cursor = page.json["next_cursor"]
        if cursor is None:
            break
    by_id = {event["id"]: event for event in listed}
    assert set(by_id) == {*sent, stack_only["event_id"]}
    assert [int(event["id"]) for event in listed] == sorted(map(int, by_id), reverse=True)
    for event_id, report in sent.items():
        event = by_id[event_id]
        assert (event["cause"], event["fingerprint_error"], event["hostname"]) == (
            "no_crash", None, report["host"]["hostname"])
        assert event["capture"]["reason"].startswith("no recognisable crash in the report")
        assert event["text"]["console_log_tail"] == report["console_log"]
        assert event["text"]["console_log_chars"] == len(report["console_log"])
    assert by_id[stack_only["event_id"]]["text"]["stack"]["frames"] == [{"address": "0x1"}]
    assert client.get("/api/v1/unfingerprinted", query_string={"cause": "engine_failed"},
                      headers=auth(reader)).json == {"events": [], "next_cursor": None}

    login(client, reader)
    shown, url = "", "/unfingerprinted?cause=no_crash"
    while url:
        page = client.get(url).get_data(as_text=True)
        shown += page
        older = re.search(r'id="older" href="([^"]+)"', page)
        url = html.unescape(older.group(1)) if older else ""
    for event_id, report in sent.items():
        assert f'href="/events/{event_id}"' in shown
        assert html.escape(report["console_log"].splitlines()[-1]) in shown
    assert "has fingerprinted every report" not in shown
    assert "no crash found (7)" in shown


def test_the_tail_of_a_long_log_is_listed(client: Any, make_token: Any) -> None:
    reporter, reader = make_token("report"), make_token("read")
    log = "".join(f"[ {n}.0] line {n} of a console that stops short\n" for n in range(2000))
    client.post("/api/v1/reports", json=no_crash_report("gpu-e1", log), headers=auth(reporter))
    event = client.get("/api/v1/unfingerprinted", headers=auth(reader)).json["events"][0]
    assert log.endswith(event["text"]["console_log_tail"]) and len(event["text"]["console_log_tail"]) == 4000
    assert event["text"]["console_log_chars"] == len(log)


@pytest.mark.parametrize("query", [
    {"cause": "nothing"}, {"limit": 0}, {"limit": 10**30}, {"cursor": "bm9wZQ=="}, {"cursor": "\x00"},
    {"cursor": "W251bGwsIDk5OTk5OTk5OTk5OTk5OTk5OTk5OV0="},  # [null, 10**21]: past the id range
])
def test_hostile_queries_are_refused_with_a_4xx(client: Any, make_token: Any, query: dict[str, Any]) -> None:
    reader = make_token("read")
    assert client.get("/api/v1/unfingerprinted", query_string=query, headers=auth(reader)).status_code == 400
    login(client, reader)
    assert client.get("/unfingerprinted", query_string=query).status_code == 400


def test_the_list_needs_a_read_token(client: Any, make_token: Any) -> None:
    assert client.get("/api/v1/unfingerprinted").status_code == 401
    assert client.get("/api/v1/unfingerprinted", headers=auth(make_token("report"))).status_code == 403


def test_a_storm_of_reports_without_a_crash_stays_within_the_budget(
    live_server: str, make_token: Any
) -> None:
    """Every host sends twice at once from 12 hosts: one full per host at most, two in all."""
    token = make_token("report")
    hosts = [f"gpu-s{n}-{uuid.uuid4().hex[:4]}" for n in range(12)]
    bodies = [no_crash_report(host, log) for host in hosts for log in (GARBLED_LOG, CRASH_FREE_LOG)]
    barrier = threading.Barrier(len(bodies))

    def send(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        with requests.Session() as http:
            barrier.wait()
            response = http.post(f"{live_server}/api/v1/reports", json=body, headers=auth(token), timeout=120)
            assert response.status_code == 201, response.text
            return body["host"]["hostname"], response.json()["capture"]

    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(send, bodies))
    full = [host for host, capture in answers if capture["action"] == "full"]
    assert len(full) == PER_FLEET and len(set(full)) == PER_FLEET
    assert all(capture["reason"].startswith("no recognisable crash in the report") for _, capture in answers)



def test_the_policy_bundle_says_what_a_report_without_a_crash_gets_offline(
    client: Any, make_token: Any
) -> None:
    """The fleet's budget, and with ?host= that host's; an answer that changes changes the
    version, so a host holding the old bundle fetches the new one."""
    reporter, reader = make_token("report"), make_token("read")

    def bundle(query: str = "", etag: str | None = None) -> Any:
        headers = auth(reader) | ({"If-None-Match": etag} if etag else {})
        return client.get(f"/api/v1/policy-bundle{query}", headers=headers)

    fresh = bundle()
    assert fresh.json["no_signature"] == {
        "action": "full", "dump_level": None,
        "reason": "no recognisable crash in the report: full capture 1 of 2 for the fleet in the "
                  "7-day window (this host's own budget not known)"}
    assert bundle("?host=gpu-f1").json["no_signature"]["reason"].startswith(
        "no recognisable crash in the report: full capture 1 of 1 for this host and 1 of 2")
    client.post("/api/v1/reports", json=no_crash_report("gpu-f1"), headers=auth(reporter))

    changed = bundle(etag=fresh.headers["ETag"])
    assert changed.status_code == 200 and changed.json["version"] != fresh.json["version"]
    assert changed.json["no_signature"]["reason"].startswith(
        "no recognisable crash in the report: full capture 2 of 2 for the fleet")
    spent_host = bundle("?host=gpu-f1&format=text")
    text = spent_host.get_data(as_text=True)
    [line] = [line for line in text.splitlines() if line.startswith("#no_signature")]
    assert line.split("\t")[:4] == ["#no_signature", "skip", "-", "-"]
    assert line.split("\t")[4].startswith("no recognisable crash in the report: this host has had its 1 ")
    assert bundle("?host=gpu-f2").json["no_signature"]["action"] == "full"  # a host not seen yet

    client.post("/api/v1/reports", json=no_crash_report("gpu-f2"), headers=auth(reporter))
    assert bundle().json["no_signature"]["action"] == "skip"  # the fleet's two are taken
    assert bundle("?host=gpu-f9").json["no_signature"]["reason"].startswith(
        "no recognisable crash in the report: the fleet has had its 2 ")
    assert bundle("?host=" + "x" * 256).status_code == 400


def test_a_crash_named_by_a_later_source_of_the_event_is_decided_by_its_signature(
    client: Any, make_token: Any
) -> None:
    """The host's budget is spent, so a DPU's garbled report of a crash is told skip; the crash
    kernel's report of the same crash names a new bug, which gets its full capture."""
    reporter = make_token("report")
    client.post("/api/v1/reports", json=no_crash_report("gpu-g1"), headers=auth(reporter))
    dpu = no_crash_report("gpu-g1") | {"source": "dpu"}
    told = client.post("/api/v1/reports", json=dpu, headers=auth(reporter)).json
    assert told["capture"]["action"] == "skip"
    kernel = crash_report(boot_id=dpu["boot_id"], host=dpu["host"])
    named = client.post("/api/v1/reports", json=kernel, headers=auth(reporter)).json
    assert named["event_id"] == told["event_id"] and named["signature"] is not None
    assert named["capture"]["action"] == "full"
    assert named["capture"]["reason"].startswith("new signature: full capture 1 of 3")
    assert client.post("/api/v1/reports", json=dpu, headers=auth(reporter)).json["capture"] == told["capture"]


def test_reports_the_engine_fails_on_share_the_budget_and_are_listed_apart(
    settings: Settings, database: Any, client: Any, make_token: Any
) -> None:
    """An engine bug that fails on every report does not dump the whole fleet either."""
    failing = app_with_a_failing_engine(settings, database)
    reporter, reader = make_token("report"), make_token("read")
    answers = [failing.test_client().post("/api/v1/reports", json=crash_report(host={"hostname": host}),
                                          headers=auth(reporter)).json["capture"]
               for host in ("gpu-h1", "gpu-h1", "gpu-h2", "gpu-h3")]
    assert [answer["action"] for answer in answers] == ["full", "skip", "full", "skip"]
    cause = "the signature engine failed on this report: "
    assert all(answer["reason"].startswith(cause) for answer in answers)
    assert "the fleet has had its 2" in answers[3]["reason"]
    listed = client.get("/api/v1/unfingerprinted?cause=engine_failed", headers=auth(reader)).json["events"]
    assert len(listed) == 4 and all(e["fingerprint_error"].startswith("IndexError") for e in listed)
    assert client.get("/api/v1/unfingerprinted?cause=no_crash", headers=auth(reader)).json["events"] == []
