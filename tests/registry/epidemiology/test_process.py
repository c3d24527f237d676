"""A userspace signature's processes (release, age, start week) against the program's other
crashes: plain data, then through the HTTP API on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from registry.core.events import Event
from registry.epidemiology.process import MIN_SHARE, ProcessCrash, process_findings
from tests.support.http import auth

DAY0 = datetime(2026, 10, 1, tzinfo=UTC)


def _crashes(count: int, uptime_s: float, version: str = "3.1.4", day: int = 0) -> list[ProcessCrash]:
    return [ProcessCrash(version, DAY0 + timedelta(days=day, hours=i), uptime_s) for i in range(count)]


def test_a_start_up_race_stands_out_by_process_age() -> None:
    race = _crashes(20, 120.0) + _crashes(6, 5 * 86_400.0)
    others = _crashes(40, 3 * 3_600.0) + _crashes(2, 300.0)
    found = process_findings(race, others)
    assert [(f["attribute"], f["value"], f["events"]) for f in found] == [
        ("process_uptime", "under 15 minutes", 20)]
    assert found[0]["statement"].startswith("process up under 15 minutes: 20 of 26 crashes, where 5% of the "
                                            "program's other crashes in the window predicts 1 (p ")
    assert found[0]["p_value"] < 0.01 and found[0]["baseline"] == "program"


def test_a_release_and_a_start_week_stand_out_when_they_carry_the_signature() -> None:
    new_release = _crashes(15, 3_600.0 * 5, "3.2.0", day=14)
    others = _crashes(30, 3_600.0 * 5, "3.1.4") + _crashes(5, 3_600.0 * 5, "3.2.0", day=14)
    found = {(f["attribute"], f["value"]): f for f in process_findings(new_release, others)}
    assert set(found) == {("program_version", "3.2.0"), ("process_start_week", "2026-10-12")}
    assert found[("program_version", "3.2.0")]["in_signature"] == 1.0


def test_alike_processes_and_minor_shares_say_nothing() -> None:
    alike = _crashes(20, 3_600.0 * 5)
    assert process_findings(alike, _crashes(40, 3_600.0 * 5)) == []
    minor = _crashes(8, 120.0) + _crashes(12, 86_400.0 * 2)  # young, but under half of them
    assert MIN_SHARE > 8 / 20 and process_findings(minor, _crashes(40, 86_400.0 * 2)) == []
    assert process_findings(_crashes(20, 120.0), []) == []  # nothing to compare with


def _userspace(i: int, function: str, process: dict) -> dict:
    return {
        "report_id": f"{function}-{i}",
        "source": "userspace",
        "crashed_at": (DAY0 + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"hostname": f"vm-{i % 9}", "physical_host": f"hv-{i % 5}"},
        "uptime_s": 30 * 86_400,
        "stack": {"executable": "/usr/bin/ingest-worker", "signal": "SIGSEGV", "build_id": "ab" * 20,
                  "frames": [{"function": function, "module": "ingest-worker"}, {"function": "worker_loop"}],
                  "process": process},
    }


def test_the_api_reads_process_findings_from_the_reports_stacks(client, make_token, database) -> None:  # type: ignore[no-untyped-def]
    token = auth(make_token("report", kind="agent"))
    for i in range(14):
        young = {"uptime_s": 90.5, "version": "3.2.0"}  # the start time is derived
        report = _userspace(i, "ring_buffer_commit", young)
        answer = client.post("/api/v1/reports", json=report, headers=token)
        assert answer.status_code == 201, answer.json
        race = answer.json["signature"]["id"]
        old = {"started_at": (DAY0 - timedelta(days=20)).isoformat(), "version": "3.2.0"}  # uptime derived
        assert client.post("/api/v1/reports", json=_userspace(i, "chunk_index_merge", old),
                           headers=token).status_code == 201
    with database.session() as session:
        event = session.query(Event).filter(Event.title.contains("ring_buffer_commit")).first()
        assert (event.program_version, event.process_uptime_s) == ("3.2.0", 90)
        assert event.process_started_at == event.crashed_at - timedelta(seconds=90.5)
        other = session.query(Event).filter(Event.title.contains("chunk_index_merge")).first()
        assert other.process_uptime_s == (other.crashed_at - (DAY0 - timedelta(days=20))).total_seconds()
    body = client.get(f"/api/v1/signatures/{race}/epidemiology", headers=auth(make_token("read"))).json
    assert body["population"]["kind"] == "program"
    process = [f for f in body["time_findings"] if f["attribute"].startswith(("process", "program"))]
    # young processes, all started this week, where the other signature's ran for weeks
    assert sorted((f["attribute"], f["value"], f["events"]) for f in process) == [
        ("process_start_week", "2026-09-28", 14), ("process_uptime", "under 15 minutes", 14)]
    assert any(s.startswith("process up under 15 minutes: 14 of 14 crashes") for s in body["statements"])


def test_a_bad_process_start_is_refused_by_name(client, make_token) -> None:  # type: ignore[no-untyped-def]
    report = _userspace(0, "ring_buffer_commit", {"started_at": "0001-01-01T00:00:00+00:01"})
    answer = client.post("/api/v1/reports", json=report, headers=auth(make_token("report", kind="agent")))
    assert answer.status_code == 400 and "started_at" in str(answer.json["error"]["fields"])
