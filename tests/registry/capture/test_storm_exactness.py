"""A crash storm over real HTTP connections: exactly K full answers, exactly N "more"."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import requests
from sqlalchemy import func, select

from registry.capture.models import CaptureSlot
from registry.core.events import Event
from tests.support.capture import storm_report
from tests.support.http import auth

HOSTS = 48  # concurrent reporters, each its own connection and database session


def storm(url: str, token: str, bodies: list[dict]) -> list[dict]:
    """Release every report at the same instant; each thread has its own HTTP connection."""
    barrier = threading.Barrier(len(bodies))

    def send(body: dict) -> dict:
        with requests.Session() as http:
            barrier.wait()
            response = http.post(f"{url}/api/v1/reports", json=body, headers=auth(token), timeout=120)
            assert response.status_code in (200, 201), response.text
            return response.json()

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


def test_a_storm_of_one_new_bug_gets_exactly_k_full(live_server, make_token, database) -> None:
    bodies = [storm_report("storm_bug") for _ in range(HOSTS)]
    answers = storm(live_server, make_token("report"), bodies)
    full = [a for a in answers if a["capture"]["action"] == "full"]
    assert len(full) == 3
    assert sum(a["capture"]["action"] == "skip" for a in answers) == HOSTS - 3
    assert sum(not a["known"] for a in answers) == 1
    with database.session() as session:
        slots = session.execute(select(CaptureSlot.slot, CaptureSlot.event_id)).all()
        assert sorted(s.slot for s in slots) == [1, 2, 3]
        assert {str(s.event_id) for s in slots} == {a["event_id"] for a in full}
        assert session.scalar(select(func.count()).where(Event.capture_action == "full")) == 3


def test_a_storm_with_retries_stays_exact(live_server, make_token, database) -> None:
    """Every report sent twice at once: one event each, still exactly K full."""
    bodies = [storm_report("retried_bug") for _ in range(HOSTS // 2)]
    answers = storm(live_server, make_token("report"), bodies + bodies)
    by_event: dict[str, set[str]] = {}
    for answer in answers:
        by_event.setdefault(answer["event_id"], set()).add(answer["capture"]["action"])
    assert len(by_event) == HOSTS // 2
    assert all(len(seen) == 1 for seen in by_event.values())  # a replay repeats the answer
    assert sum(seen == {"full"} for seen in by_event.values()) == 3


def test_n_more_is_exact_under_a_storm(live_server, make_token) -> None:
    token = make_token("report")
    first = storm(live_server, token, [storm_report("wanted_bug")])[0]
    storm(live_server, token, [storm_report("wanted_bug") for _ in range(2)])
    requests.patch(
        f"{live_server}/api/v1/signatures/{first['signature']['id']}",
        json={"capture_policy": {"extra_full_captures": 5}},
        headers=auth(make_token("triage")),
        timeout=30,
    ).raise_for_status()
    answers = storm(live_server, token, [storm_report("wanted_bug") for _ in range(HOSTS)])
    assert sum(a["capture"]["action"] == "full" for a in answers) == 5


def test_a_storm_of_a_regressed_bug_gets_k_full_again(live_server, make_token) -> None:
    """The reports racing the one that flips the status to regressed are regressions too."""
    token = make_token("report")
    before = storm(live_server, token, [storm_report("back_again") for _ in range(4)])
    for answer in before:
        if answer["capture"]["action"] == "full":
            requests.post(f"{live_server}/api/v1/events/{answer['event_id']}/captures",
                          json={"method": "makedumpfile", "status": "completed"},
                          headers=auth(token), timeout=30).raise_for_status()
    requests.patch(
        f"{live_server}/api/v1/signatures/{before[0]['signature']['id']}",
        json={"status": "resolved"}, headers=auth(make_token("triage")), timeout=30,
    ).raise_for_status()
    after_fix = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    bodies = [storm_report("back_again", crashed_at=after_fix) for _ in range(HOSTS)]
    answers = storm(live_server, token, bodies)
    assert sum(a["capture"]["action"] == "full" for a in answers) == 3
    assert all(a["signature"]["status"] == "regressed" for a in answers)
