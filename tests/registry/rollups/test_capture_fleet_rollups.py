"""The captures' and the fleet's rollups (migration 0037) equal a scan of every capture, event
and host after each kind of change: captures posted and updated through the API, an event's
decision, memory and crash time changed, captures and events deleted (the cascade too), hosts
first seen, back-filled, retired and deleted; and the views Grafana reads show them with the
materialized views' columns. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, text, update

from registry.capture.models import Capture
from registry.core.events import Event
from registry.core.hosts import Host
from registry.db import Database
from tests.support.capture import post_capture
from tests.support.http import auth
from tests.support.rollups import assert_exact, ingest_some, scanned, scanned_captures

DAY = timedelta(days=1)


def view(database: Database, name: str) -> list[tuple[Any, ...]]:
    with database.session() as session:
        return [tuple(row) for row in session.execute(text(f"SELECT * FROM {name} ORDER BY 1, 2"))]


def day_of(value: Any) -> str:
    return value.date().isoformat() if hasattr(value, "date") else str(value)[:10]


def test_captures_are_counted_through_every_change(database: Database, client: Any, make_token: Any) -> None:
    answers = ingest_some(client, make_token("report"))
    agent = make_token("report", "agent")
    events = {name: answer["event_id"] for name, answer in answers.items()}
    posted = [
        post_capture(client, agent, events["gpf"], bytes=2_000_000_000, duration_s=41.5, downtime_s=60.25),
        post_capture(client, agent, events["gpf"], status="failed", capture_key="second"),
        post_capture(client, agent, events["warning"], bytes=10, duration_s=0.0, downtime_s=0.000001),
        post_capture(client, agent, events["kasan"], duration_s=7.0),
    ]
    assert [answer.status_code for answer in posted] == [201] * 4, [answer.json for answer in posted]
    assert_exact(database)
    with database.session() as session:
        assert sum(n[0] for n in scanned_captures(session).values()) == 4

    capture_id = posted[3].json["id"]
    patched = client.patch(f"/api/v1/captures/{capture_id}", json={"status": "failed", "bytes": 5},
                           headers=auth(agent))
    assert patched.status_code == 200, patched.json
    with database.session() as session:  # what the decision, the memory or the crash time changing does
        session.execute(update(Event).where(Event.id == int(events["gpf"]))
                        .values(capture_action="skip", memory_gb=512,
                                crashed_at=datetime(2026, 1, 2, 23, 59, tzinfo=UTC)))
        warning_capture = int(posted[2].json["id"])
        session.execute(update(Capture).where(Capture.id == warning_capture).values(downtime_s=None))
    assert_exact(database)
    with database.session() as session:
        session.execute(delete(Capture).where(Capture.id == int(capture_id)))
        session.execute(delete(Event).where(Event.id == int(events["gpf"])))  # its captures by the cascade
    assert_exact(database)
    with database.session() as session:
        left = scanned_captures(session)
    assert sum(n[0] for n in left.values()) == 1
    ((day, action, status, memory, duration), _), = left.items()
    memory_gb = None if memory == -1 else memory
    (shown,) = view(database, "rpt_capture_daily")  # the warning's capture: its downtime cleared
    assert day_of(shown[0]) == day
    assert shown[1:6] == (action or None, status, memory_gb, duration, 1)
    assert (float(shown[6]), shown[7], shown[8]) == (10 / 1e9, memory_gb, None)  # GB numeric on PostgreSQL


def test_the_fleet_follows_first_sightings_crashes_and_retirements(
    database: Database, client: Any, make_token: Any
) -> None:
    answers = ingest_some(client, make_token("report"))
    assert_exact(database)
    with database.session() as session:
        hosts = {host.hostname: host for host in session.scalars(select(Host))}
        crashes = list(session.scalars(select(Event.crashed_at)))
        first = min([host.first_seen for host in hosts.values()] + crashes)
        early = first - 3 * DAY
        session.execute(update(Event).where(Event.id == int(answers["kbug"]["event_id"]))
                        .values(crashed_at=early))  # a back-filled crash: node-d was there already
        session.execute(update(Host).where(Host.hostname == "node-b").values(retired_at=first + DAY))
        session.execute(update(Host).where(Host.hostname == "node-c").values(first_seen=first - DAY))
        assert {"node-b", "node-c", "node-d"} <= set(hosts)
        session.add(Host(hostname="spare", first_seen=first - 2 * DAY, retired_at=first - 2 * DAY))
    assert_exact(database)
    fleet = view(database, "rpt_fleet_daily")
    assert day_of(fleet[0][0]) == day_of(early) and int(fleet[0][1]) == 1  # node-d, from its crash
    assert day_of(fleet[-1][0]) == datetime.now(UTC).date().isoformat()
    by_day = {day_of(day): int(hosts) for day, hosts in fleet}
    assert by_day[day_of(first - 2 * DAY)] == by_day[day_of(first - 3 * DAY)]  # the spare came and went
    assert int(fleet[-1][1]) == 3  # four hosts, node-b retired
    assert len(fleet) == (datetime.now(UTC).date() - early.date()).days + 1  # every day, none twice

    with database.session() as session:  # the back-filled crash deleted: node-d joins when first seen
        session.execute(delete(Event).where(Event.id == int(answers["kbug"]["event_id"])))
        session.execute(delete(Host).where(Host.hostname == "spare"))
        session.execute(update(Host).where(Host.hostname == "node-b").values(retired_at=None))
    assert_exact(database)
    with database.session() as session:
        earliest = min(day for _, day in scanned(session)["host_days"])
    fleet = view(database, "rpt_fleet_daily")
    assert day_of(fleet[0][0]) == earliest > day_of(early) and int(fleet[-1][1]) == 4
