"""POST /api/v1/reports: answers, idempotency, joining, validation, auth."""

from __future__ import annotations

import json
import random

import pytest
from sqlalchemy import text

from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.signatures import GPF_LOG, WARNING_LOG


def post(client, token, body):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/reports", json=body, headers=auth(token))


def test_new_report_is_stored_and_answered(client, make_token) -> None:
    response = post(client, make_token("report"), crash_report())
    assert response.status_code == 201
    answer = response.json
    assert answer["duplicate"] is False and answer["known"] is False
    assert answer["signature"]["event_count"] == 1
    assert answer["signature"]["status"] == "new"
    assert answer["capture"]["action"] in {"full", "filtered", "skip"}
    assert answer["capture"]["reason"]


def test_replay_returns_the_first_answer_and_stores_nothing(client, make_token) -> None:
    token, report = make_token("report"), crash_report()
    first = post(client, token, report).json
    replay = post(client, token, report)
    assert replay.status_code == 200
    assert replay.json == first | {"duplicate": True}
    reader = make_token("read")
    events = client.get(f"/api/v1/signatures/{first['signature']['id']}/events", headers=auth(reader))
    assert len(events.json["events"]) == 1
    assert (
        client.get(f"/api/v1/signatures/{first['signature']['id']}", headers=auth(reader)).json["event_count"]
        == 1
    )


def test_reused_report_id_with_another_body_is_a_conflict(client, make_token) -> None:
    token, report = make_token("report"), crash_report()
    post(client, token, report)
    response = post(client, token, report | {"uptime_s": 5})
    assert response.status_code == 409
    assert "report_id" in response.json["error"]["fields"]


def test_second_crash_of_a_bug_is_known(client, make_token) -> None:
    token = make_token("report")
    first = post(client, token, crash_report()).json
    second = post(client, token, crash_report(host={"hostname": "gpu-b2"})).json
    assert second["known"] is True
    assert second["signature"]["id"] == first["signature"]["id"]
    assert second["signature"]["event_count"] == 2
    assert second["event_id"] != first["event_id"]


def test_reports_of_one_crash_from_several_sources_join_one_event(client, make_token) -> None:
    token = make_token("report")
    dpu = crash_report(source="dpu", console_log="[ 8812.1] mlx5_core 0000:08:00.0: link down\n")
    kernel = crash_report(source="crash_kernel", boot_id=dpu["boot_id"])
    first = post(client, token, dpu)
    second = post(client, token, kernel)
    assert first.status_code == second.status_code == 201
    assert first.json["event_id"] == second.json["event_id"]
    event = client.get(f"/api/v1/events/{first.json['event_id']}", headers=auth(make_token("read"))).json
    assert event["sources"] == ["dpu", "crash_kernel"]
    assert [r["source"] for r in event["reports"]] == ["dpu", "crash_kernel"]
    # The DPU could not fingerprint; the crash kernel's log attaches the event to its signature.
    assert event["signature"]["event_count"] == 1


def test_event_keeps_host_attributes_at_crash_time(client, make_token) -> None:
    token = make_token("admin")
    report = crash_report()
    event_id = post(client, token, report).json["event_id"]
    upgraded = report["host"] | {"kernel_version": "6.8.0-60"}
    assert client.post("/api/v1/hosts", json={"hosts": [upgraded]}, headers=auth(token)).status_code == 200
    event = client.get(f"/api/v1/events/{event_id}", headers=auth(token)).json
    assert event["host"]["kernel_version"] == "6.8.0-52"
    assert event["host"]["labels"] == {"pool": "train"}


def test_report_whose_log_shows_no_crash_is_kept_and_captured(client, make_token) -> None:
    response = post(client, make_token("report"), crash_report(console_log="[ 1.0] booting\n"))
    assert response.status_code == 201
    assert response.json["signature"] is None
    assert response.json["capture"]["action"] == "full"


def test_bad_fields_are_named(client, make_token) -> None:
    body = crash_report(source="toaster", crashed_at="yesterday", uptime_s=-1)
    body["host"] = {"region": "x"}
    response = post(client, make_token("report"), body)
    assert response.status_code == 400
    error = response.json["error"]
    assert set(error["fields"]) == {"source", "crashed_at", "uptime_s", "host"}
    assert "hostname" in error["fields"]["host"]


def test_host_attributes_are_limited_in_bytes_not_only_characters(client, make_token) -> None:
    """Index entries are limited in bytes: 4-byte characters up to the character limits of
    the indexed attributes would make the event's insert fail (and a 503 invites retries
    forever); the limits count UTF-8 bytes and the answer names each field."""
    wide = random.Random(1)

    def emoji(n: int) -> str:
        return "".join(chr(wide.randint(0x1F300, 0x1FAFF)) for _ in range(n))

    host = {"hostname": emoji(255), "physical_host": emoji(255), "region": emoji(128),
            "sku": emoji(128), "kernel_version": emoji(128), "bios_version": emoji(128)}
    response = post(client, make_token("report"), crash_report(host=host))
    assert response.status_code == 400, response.json
    assert set(response.json["error"]["fields"]["host"]) == set(host)
    assert response.json["error"]["fields"]["host"]["sku"] == ["longer than 128 bytes (UTF-8)"]
    fits = {"hostname": emoji(63), "physical_host": emoji(63), "region": emoji(32), "sku": "é" * 64}
    assert post(client, make_token("report"), crash_report(host=fits)).status_code == 201


def test_a_value_too_large_for_the_database_is_422_not_503(app, client, database, db_url) -> None:
    """Whatever slips past validation and exceeds one of PostgreSQL's limits: retrying cannot
    help, so the answer says so instead of inviting retries with a 503."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no index entry size limit")

    @app.get("/too-large-for-an-index")
    def too_large() -> None:
        with database.session() as session:
            session.execute(text("CREATE TEMPORARY TABLE wide (value text PRIMARY KEY)"))
            session.execute(text("INSERT INTO wide SELECT string_agg(md5(g::text), '') "
                                 "FROM generate_series(1, 200) AS g"))

    response = client.get("/too-large-for-an-index")
    assert response.status_code == 422
    assert response.json["error"]["code"] == "too_large"
    assert "index row size" in response.json["error"]["message"]
    assert "Retry-After" not in response.headers


def test_postgresql_stores_the_console_log_compressed_with_lz4(client, database, db_url, make_token) -> None:
    """A console log past the TOAST threshold is compressed by every report's INSERT: lz4, the
    cheaper method, where the server has it (migration 0018)."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite does not compress")
    lines = [f"[{n:5d}.000000] random noise {random.Random(n).getrandbits(128):032x}" for n in range(200)]
    report = crash_report(console_log="\n".join([GPF_LOG, *lines]))
    assert post(client, make_token("report"), report).status_code == 201
    with database.session() as session:
        method = session.scalar(text("SELECT pg_column_compression(console_log) FROM reports"))
    assert method == "lz4"


def test_missing_required_fields(client, make_token) -> None:
    response = post(client, make_token("report"), {})
    assert response.status_code == 400
    assert set(response.json["error"]["fields"]) == {"report_id", "source", "crashed_at", "host"}


def test_malformed_json_and_non_object(client, make_token) -> None:
    headers = auth(make_token("report")) | {"Content-Type": "application/json"}
    bad = client.post("/api/v1/reports", data=b'{"report_id": ', headers=headers)
    assert bad.status_code == 400 and bad.json["error"]["code"] == "malformed_json"
    array = client.post("/api/v1/reports", data=b"[1, 2]", headers=headers)
    assert array.status_code == 400 and "object" in array.json["error"]["message"]


def test_body_over_two_mib_is_413(client, make_token) -> None:
    body = json.dumps(crash_report(console_log="x" * (2 * 1024 * 1024 + 10)))
    response = client.post(
        "/api/v1/reports", data=body, headers=auth(make_token("report")), content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json["error"]["code"] == "body_too_large"


def test_console_log_over_one_mib_is_400(client, make_token) -> None:
    response = post(client, make_token("report"), crash_report(console_log="y" * (1024 * 1024 + 1)))
    assert response.status_code == 400
    assert "console_log" in response.json["error"]["fields"]


def test_missing_unknown_and_revoked_tokens_are_401(client, make_token, database) -> None:
    assert client.post("/api/v1/reports", json=crash_report()).status_code == 401
    unknown = post(client, "crs_0000_not-a-token", crash_report())
    assert unknown.status_code == 401 and unknown.json["error"]["code"] == "unauthorized"
    token = make_token("report", name="revoked-one")
    from registry.auth.models import ApiToken
    from registry.db import utcnow

    with database.session() as session:
        row = session.query(ApiToken).filter_by(name="revoked-one").one()
        row.revoked_at = utcnow()
    assert post(client, token, crash_report()).status_code == 401


def test_wrong_scope_is_403(client, make_token) -> None:
    response = post(client, make_token("read"), crash_report())
    assert response.status_code == 403
    assert "report" in response.json["error"]["message"]
    assert client.get("/api/v1/signatures", headers=auth(make_token("report"))).status_code == 403


def test_scope_implications(client, make_token) -> None:
    assert post(client, make_token("admin"), crash_report()).status_code == 201
    assert client.get("/api/v1/signatures", headers=auth(make_token("triage"))).status_code == 200
    assert client.get("/api/v1/signatures", headers=auth(make_token("admin"))).status_code == 200


def test_late_report_moves_first_seen_earlier_and_last_seen_never_back(client, make_token) -> None:
    """A post-boot resend or an import older than the signature's first event (issue 15)."""
    token, reader = make_token("report"), make_token("read")
    sightings = [
        ("2026-11-29T12:00:00Z", "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
        ("2026-09-03T08:30:00Z", "2026-09-03T08:30:00+00:00", "2026-11-29T12:00:00+00:00"),  # imported
        ("2026-10-01T00:00:00Z", "2026-09-03T08:30:00+00:00", "2026-11-29T12:00:00+00:00"),  # in between
        ("2026-11-30T06:00:00Z", "2026-09-03T08:30:00+00:00", "2026-11-30T06:00:00+00:00"),  # newest
    ]
    for n, (crashed_at, first_seen, last_seen) in enumerate(sightings):
        answer = post(client, token, crash_report(crashed_at=crashed_at, host={"hostname": f"gpu-{n}"})).json
        answered = answer["signature"]
        assert (answered["first_seen"], answered["last_seen"]) == (first_seen, last_seen)
        stored = client.get(f"/api/v1/signatures/{answered['id']}", headers=auth(reader)).json
        assert (stored["first_seen"], stored["last_seen"]) == (first_seen, last_seen)
        assert stored["event_count"] == n + 1
    listed = client.get("/api/v1/signatures?sort=first_seen", headers=auth(reader)).json
    assert listed["signatures"][0]["first_seen"] == "2026-09-03T08:30:00+00:00"


def test_merge_keeps_the_earlier_first_sighting(client, make_token) -> None:
    token, triage = make_token("report"), make_token("triage")
    late = post(client, token, crash_report(console_log=GPF_LOG, crashed_at="2026-11-20T00:00:00Z")).json
    early = post(client, token, crash_report(console_log=WARNING_LOG, crashed_at="2026-09-01T00:00:00Z")).json
    merged = client.post(
        f"/api/v1/signatures/{late['signature']['id']}/merge",
        json={"other": early["signature"]["id"]},
        headers=auth(triage),
    )
    assert merged.status_code == 200, merged.json
    assert merged.json["first_seen"] == "2026-09-01T00:00:00+00:00"
    assert merged.json["last_seen"] == "2026-11-20T00:00:00+00:00"


def test_hostile_stack_evidence_is_a_400_naming_the_field(client, make_token) -> None:
    """The evidence labels are decided from is bounded and typed: what ingest stores is what
    `signatures rebuild` re-derives labels from, so a value read two ways is refused."""
    from tests.support.userspace import returned_to

    token = make_token("report")
    good = returned_to("0x0", "")
    stored = post(client, token, crash_report(source="userspace", console_log=None, stack=good))
    assert stored.status_code == 201, stored.json
    assert stored.json["signature"]["labels"] == ["return-to-null", "segfault"]
    bad_slots = [{"offset": -8, "value": "0x0", "call": "yes"}] + [{"offset": 0, "value": "0x1"}] * 32
    for evidence, field in (({"slots": bad_slots}, "slots"), ({"pc_bytes": "zz"}, "pc_bytes"),
                            ({"si_code": 1.5}, "si_code"), ({"pc_entry": "true"}, "pc_entry"),
                            ({"pc_entry": 1}, "pc_entry"),
                            ({"caught_fault_address": "0x" + "f" * 40}, "caught_fault_address"),
                            ({"caught_fault_sp": "0x1\u0000"}, "caught_fault_sp")):
        body = crash_report(source="userspace", console_log=None, stack=dict(good, evidence=evidence))
        response = post(client, token, body)
        assert response.status_code == 400, (field, response.json)
        assert field in response.json["error"]["fields"]["stack"]["evidence"]
