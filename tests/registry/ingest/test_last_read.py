"""A report's one write planned on what the worker's last read of its bug found
(registry.ingest.last_read): taken when all of it still holds, refused by the write itself when
anything changed since (the token, the slots, the signature, the report_id, a pstore record),
and then the report gets what a read would have given it. On PostgreSQL the planned write is
the report's only statement; SQLite reads every time, and both must answer alike."""

from __future__ import annotations

from typing import Any

from registry.auth.models import ApiToken
from registry.core.jira_links import JiraLink
from registry.db import utcnow
from registry.signatures.merging import REBUILD, set_alias
from testkit.reports import crash_report
from tests.support.capture import patch_policy, post_capture, report, storm_report
from tests.support.http import auth
from tests.support.statements import counted

K = 3  # full captures a bug gets in its window (the settings' default)


def warmed(client, token: str, bug: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """K full captures of `bug` and a skip: its slots are held and the worker has read them."""
    answers = [report(client, token, storm_report(bug)) for _ in range(K + 1)]
    assert [answer["capture"]["action"] for answer in answers] == ["full"] * K + ["skip"]
    return answers


def posted(client, database, token: str, body: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The response, and whether it cost the one planned write alone (PostgreSQL)."""
    response, statements = posted_counted(client, database, token, body)
    return response, len(statements) == 1


def posted_counted(client, database, token: str, body: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The response, and the statements it cost."""
    with counted(database) as seen:
        response = client.post("/api/v1/reports", json=body, headers=auth(token))
    return response, seen.statements


def one_write_on_postgresql(database, alone: bool) -> bool:  # type: ignore[no-untyped-def]
    return alone == (database.engine.dialect.name == "postgresql")


def replayed_after_one_write_on_postgresql(database, statements: list[str]) -> bool:  # type: ignore[no-untyped-def]
    """PostgreSQL: the planned write, which found the report_id stored and gave its report's id,
    then that report's answer read by its id (a plan that reads one partition)."""
    if database.engine.dialect.name != "postgresql":
        return len(statements) != 1  # SQLite reads first, every time
    return len(statements) == 2 and "FROM reports \nWHERE reports.id = " in statements[1]


def test_the_planned_write_answers_what_a_read_would(client, database, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    signature_id = warmed(client, token, "ldr_counts")[0]["signature"]["id"]
    with database.session() as session:  # a Jira issue is linked meanwhile
        session.add(JiraLink(signature_id=int(signature_id), issue_key="CRASH-7"))
    late = storm_report("ldr_counts", crashed_at="2026-11-30T08:00:00.250000Z")
    response, alone = posted(client, database, token, late)
    assert response.status_code == 201 and one_write_on_postgresql(database, alone)
    answer = response.json
    assert answer["known"] is True and answer["duplicate"] is False
    assert answer["capture"]["action"] == "skip"
    assert answer["signature"]["event_count"] == K + 2
    assert answer["signature"]["jira_key"] == "CRASH-7"
    assert answer["signature"]["last_seen"] == "2026-11-30T08:00:00.250000+00:00"
    listed = client.get(f"/api/v1/signatures/{signature_id}", headers=auth(reader)).json
    assert (listed["event_count"], listed["last_seen"]) == (K + 2, answer["signature"]["last_seen"])
    assert answer["signature"]["first_seen"] == listed["first_seen"]
    event = client.get(f"/api/v1/events/{answer['event_id']}", headers=auth(reader)).json
    assert event["signature_id"] == signature_id and event["capture"]["action"] == "skip"
    # A whole second, and an earlier crash: last_seen stays the latest, written as Python would.
    on_the_second = report(client, token, storm_report("ldr_counts", crashed_at="2026-11-30T09:00:00Z"))
    assert on_the_second["signature"]["last_seen"] == "2026-11-30T09:00:00+00:00"
    earlier = report(client, token, storm_report("ldr_counts", crashed_at="2026-11-29T13:00:00Z"))
    assert earlier["signature"]["last_seen"] == "2026-11-30T09:00:00+00:00"
    assert earlier["signature"]["event_count"] == K + 4
    # A resend gets the first answer: the planned write found the report_id and wrote nothing.
    again, statements = posted_counted(client, database, token, late)
    assert again.status_code == 200 and again.json == answer | {"duplicate": True}
    assert replayed_after_one_write_on_postgresql(database, statements)
    changed, statements = posted_counted(client, database, token, late | {"uptime_s": 7})
    assert changed.status_code == 409 and replayed_after_one_write_on_postgresql(database, statements)
    listed = client.get(f"/api/v1/signatures/{signature_id}", headers=auth(reader)).json
    assert listed["event_count"] == K + 4


def test_a_token_revoked_after_the_read_is_refused(client, database, make_token) -> None:
    token, reader = make_token("report", name="soon-revoked"), make_token("read")
    signature_id = warmed(client, token, "ldr_revoked")[0]["signature"]["id"]
    stored = storm_report("ldr_revoked")
    assert report(client, token, stored)["capture"]["action"] == "skip"
    with database.session() as session:
        session.query(ApiToken).filter_by(name="soon-revoked").one().revoked_at = utcnow()
    resend, _ = posted(client, database, token, stored)  # the planned write answers no resend
    assert resend.status_code == 401
    for _ in range(2):  # nor stores a report, and then the read alone refuses it
        response, _ = posted(client, database, token, storm_report("ldr_revoked"))
        assert response.status_code == 401
    listed = client.get(f"/api/v1/signatures/{signature_id}", headers=auth(reader)).json
    assert listed["event_count"] == K + 2  # nothing stored


def test_a_slot_freed_after_the_read_is_claimed(client, database, make_token) -> None:
    token = make_token("report")
    answers = warmed(client, token, "ldr_slot")
    assert post_capture(client, token, answers[1]["event_id"], status="failed").status_code == 201
    freed, alone = posted(client, database, token, storm_report("ldr_slot"))
    assert freed.json["capture"]["action"] == "full" and not alone
    held, _ = posted(client, database, token, storm_report("ldr_slot"))
    assert held.json["capture"]["action"] == "skip"


def test_a_policy_changed_after_the_read_is_answered(client, database, make_token) -> None:
    token, triage = make_token("report"), make_token("triage")
    signature_id = warmed(client, token, "ldr_policy")[0]["signature"]["id"]
    assert patch_policy(client, triage, signature_id, mode="filtered", dump_level=31).status_code == 200
    filtered, alone = posted(client, database, token, storm_report("ldr_policy"))
    assert filtered.json["capture"] == {"action": "filtered", "reason": filtered.json["capture"]["reason"],
                                        "dump_level": 31}
    assert not alone
    again, alone = posted(client, database, token, storm_report("ldr_policy"))
    assert again.json["capture"]["action"] == "filtered" and one_write_on_postgresql(database, alone)
    assert patch_policy(client, triage, signature_id, mode="auto").status_code == 200
    url = f"/api/v1/signatures/{signature_id}"
    ignored = client.patch(url, json={"status": "ignored"}, headers=auth(triage))
    assert ignored.status_code == 200
    after, _ = posted(client, database, token, storm_report("ldr_policy"))
    assert after.json["signature"]["status"] == "ignored" and after.json["capture"]["action"] == "skip"


def test_a_fingerprint_routed_elsewhere_after_the_read_goes_there(client, database, make_token) -> None:
    """A rebuild's or an unmerge's alias can route a fingerprint to another signature without
    writing to the one it routed to before."""
    token = make_token("report")
    before = warmed(client, token, "ldr_route")[0]["signature"]
    other = report(client, token, storm_report("ldr_elsewhere"))["signature"]
    with database.session() as session:
        set_alias(session, before["fingerprint"], int(other["id"]), REBUILD)
    routed, alone = posted(client, database, token, storm_report("ldr_route"))
    assert routed.json["signature"]["id"] == other["id"] and not alone
    again, alone = posted(client, database, token, storm_report("ldr_route"))
    assert again.json["signature"]["id"] == other["id"]


def test_an_inventory_host_fills_in_what_its_report_leaves_out(client, database, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    inventory = {"hostname": "inv-7", "sku": "hgx-h100", "bios_version": "2.1", "kernel_version": "6.8.0-40",
                 "labels": {"rack": "r12", "pool": "infer"}}
    assert client.post("/api/v1/hosts", json={"hosts": [inventory]}, headers=auth(token)).status_code == 200
    warmed(client, token, "ldr_inventory")
    body = storm_report("ldr_inventory")
    body["host"] = {"hostname": "inv-7", "kernel_version": "6.8.0-52", "labels": {"pool": "train"}}
    response, alone = posted(client, database, token, body)
    assert response.status_code == 201 and one_write_on_postgresql(database, alone)
    host = client.get(f"/api/v1/events/{response.json['event_id']}", headers=auth(reader)).json["host"]
    assert (host["sku"], host["bios_version"], host["kernel_version"]) == ("hgx-h100", "2.1", "6.8.0-52")
    assert host["labels"] == {"rack": "r12", "pool": "train"}
    # A host first seen in a crash joins the inventory with what it reported.
    body = storm_report("ldr_inventory")
    response, alone = posted(client, database, token, body)
    assert one_write_on_postgresql(database, alone)
    event = client.get(f"/api/v1/events/{response.json['event_id']}", headers=auth(reader)).json
    assert event["hostname"] == body["host"]["hostname"]
    assert (event["host"]["kernel_version"], event["host"]["sku"]) == ("6.8.0-52", None)


def panic_after_a_record(client, database, token: str, record_at: str):  # type: ignore[no-untyped-def]
    """The bug read by this worker, a pstore record of a crash of the host at `record_at`, the
    bug read again, then a DPU's report of a panic at 12:00:30: the record's answer, the
    panic's response, and whether it cost the one planned write alone."""
    for number in range(K + 1):  # the bug of crash_report's log, read by this worker
        report(client, token, crash_report(host={"hostname": f"warm-{number}"}))
    record = report(client, token, crash_report(source="pstore", boot_id=None, crashed_at=record_at))
    report(client, token, crash_report(host={"hostname": "warm-again"}))  # read again after the record
    panic = crash_report(source="dpu", crashed_at="2026-11-29T12:00:30Z")
    dpu, alone = posted(client, database, token, panic)
    return record, dpu, alone


def test_a_panic_after_its_pstore_record_joins_it_when_the_bug_was_read(client, database, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    record, dpu, alone = panic_after_a_record(client, database, token, "2026-11-29T11:59:58Z")
    assert dpu.json["event_id"] == record["event_id"] and not alone
    event = client.get(f"/api/v1/events/{record['event_id']}", headers=auth(reader)).json
    assert event["sources"] == ["pstore", "dpu"]
    assert event["signature"]["event_count"] == K + 3


def test_a_panic_long_after_its_hosts_last_pstore_record_is_one_write(client, database, make_token) -> None:
    """The write knows from the host's row (pstore_first_crash_at) that no record of this panic
    came first: a record of an older crash of the host sends no panic to the read."""
    record, dpu, alone = panic_after_a_record(client, database, make_token("report"), "2026-11-29T08:00:00Z")
    assert dpu.status_code == 201 and dpu.json["event_id"] != record["event_id"]
    assert one_write_on_postgresql(database, alone)
