"""Identical reports arriving at the same instant on several connections are stored once."""

from __future__ import annotations

import requests
from sqlalchemy import func, select

from registry.core.events import Event, Report
from testkit.reports import crash_report
from tests.support.http import auth, release_together

PARALLEL = 12


def test_concurrent_identical_reports_store_one(live_server, make_token, database) -> None:
    report = crash_report()
    responses = release_together(live_server, make_token("report"), [report] * PARALLEL)
    assert sorted(r.status_code for r in responses) == [200] * (PARALLEL - 1) + [201]
    answers = [r.json() for r in responses]
    assert len({a["event_id"] for a in answers}) == 1
    assert sum(not a["duplicate"] for a in answers) == 1
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Report)) == 1
        assert session.scalar(select(func.count()).select_from(Event)) == 1


def test_concurrent_sources_of_one_crash_join_one_event(live_server, make_token, database) -> None:
    """The kernel crash's reporters join one event; a process's core of the same boot, sent at
    the same moment, is a crash of its own (a boot may dump many processes)."""
    boot = crash_report()["boot_id"]
    bodies = [
        crash_report(boot_id=boot, source=source)
        for source in ("dpu", "crash_kernel", "post_boot", "userspace")
    ]
    responses = release_together(live_server, make_token("report"), bodies)
    assert [r.status_code for r in responses] == [201] * 4
    kernel = {r.json()["event_id"] for r in responses[:3]}
    assert len(kernel) == 1
    assert responses[3].json()["event_id"] not in kernel
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 2
        event = session.get(Event, int(kernel.pop()))
        assert sorted(event.sources) == ["crash_kernel", "dpu", "post_boot"]


def test_concurrent_first_reports_of_a_new_bug_make_one_signature(live_server, make_token) -> None:
    bodies = [crash_report(host={"hostname": f"gpu-{i:03d}"}) for i in range(PARALLEL)]
    responses = release_together(live_server, make_token("report"), bodies)
    assert all(r.status_code == 201 for r in responses)
    assert len({r.json()["signature"]["id"] for r in responses}) == 1
    signature_id = responses[0].json()["signature"]["id"]
    final = requests.get(
        f"{live_server}/api/v1/signatures/{signature_id}", headers=auth(make_token("read")), timeout=30
    ).json()
    assert final["event_count"] == PARALLEL


def test_concurrent_resends_of_a_bug_the_worker_has_read_store_one(live_server, make_token, database) -> None:
    """On PostgreSQL each of these is the write planned on the worker's last read: the first to
    commit stores the report, the others find it stored (or lose the insert race) and replay."""
    token = make_token("report")
    for number in range(4):  # K full captures and a skip: the bug is read, its slots held
        warm = crash_report(host={"hostname": f"warm-{number}"})
        assert requests.post(f"{live_server}/api/v1/reports", json=warm, headers=auth(token), timeout=60).ok
    report = crash_report(host={"hostname": "resent"})
    responses = release_together(live_server, token, [report] * PARALLEL)
    assert sorted(r.status_code for r in responses) == [200] * (PARALLEL - 1) + [201]
    answers = [r.json() for r in responses]
    assert len({a["event_id"] for a in answers}) == 1
    assert {a["capture"]["action"] for a in answers} == {"skip"}
    assert {a["signature"]["event_count"] for a in answers} == {5}
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Report)) == 5
        assert session.scalar(select(func.count()).select_from(Event)) == 5
