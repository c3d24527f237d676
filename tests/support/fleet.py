"""A simulated fleet loaded into the registry for the Grafana tests and the bench.

Inventory and crash reports go through the HTTP API (the demo simulator's fleet);
captures through the captures API. What a simulated fleet has no reporter for (Jira links
and their resolution, regressions, RCAs, stored epidemiology) is written as the owning
components store it, so every panel has something to show.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text

from registry.core.jira_links import JiraLink
from registry.db import Database
from registry.demo.simulator import FleetConfig, Simulation, inventory_json, simulate
from registry.epidemiology.models import EpidemiologyFinding, EpidemiologySuspectHost, EpidemiologyVerdict
from registry.rca.models import Rca
from registry.storage.models import Dump
from sync.grafana.rollups import refresh_rollups

JIRA_BROWSE = "https://jira.example/browse/"
# Small enough to load in seconds, large enough that every panel has rows.
TEST_FLEET = FleetConfig(physical_per_cluster=8, scale=0.5)


@dataclass
class LoadedFleet:
    simulation: Simulation
    events: list[dict[str, Any]]  # the ingest answers, with the report's host

    @property
    def start(self) -> datetime:
        return self.simulation.config.start

    @property
    def end(self) -> datetime:
        return self.simulation.end + timedelta(days=1)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_fleet(
    client: Any,
    token: str,
    database: Database,
    config: FleetConfig | None = None,
    history: bool = True,
    live_every: int = 0,
    without_crash_every: int = 0,
) -> LoadedFleet:
    """The simulated fleet through the API; `history`: the Jira, RCA and epidemiology records too;
    `live_every`: every so many kernel crashes was also printed on a live host before (a
    `live_kernel` report of the same log, the first of them with 5 repeats);
    `without_crash_every`: every so many crashes, another host reported one whose console log
    was cut short before the crash (no crash the engine recognises)."""
    headers = {"Authorization": f"Bearer {token}"}
    sim = simulate(config or TEST_FLEET)
    for observed_at, snapshot in sim.inventory:
        answer = client.post(
            "/api/v1/hosts",
            json={"hosts": inventory_json(snapshot), "observed_at": iso(observed_at)},
            headers=headers,
        )
        assert answer.status_code == 200, answer.get_json()
    events = []
    for report in sim.reports:
        answer = client.post("/api/v1/reports", json=report, headers=headers)
        assert answer.status_code == 201, answer.get_json()
        events.append({**answer.get_json(), "host": report["host"]})
    if live_every:
        events += live_reports(client, headers, sim.reports[::live_every])
    if without_crash_every:
        events += reports_without_crash(client, headers, sim.reports[::without_crash_every])
    rng = random.Random(11)
    record_captures(client, headers, events, rng)
    if history:
        _annotate_history(database, rng)
        _store_dumps(database, sim.end)
    refresh_rollups(database)  # as `crashreg grafana provision` and the scheduler job do
    return LoadedFleet(sim, events)


def live_reports(client: Any, headers: dict[str, str], crashes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kernel log watcher's reports of these crashes' logs on live hosts, and one repeat."""
    events = []
    bodies = [
        {**crash, "report_id": f"live-{crash['report_id']}", "source": "live_kernel"}
        for crash in crashes
        if crash.get("console_log")
    ]
    first = bodies[0]
    bodies.append({**first, "report_id": f"{first['report_id']}.r1", "repeat_of": first["report_id"],
                   "repeat_count": 5})
    for body in bodies:
        answer = client.post("/api/v1/reports", json=body, headers=headers)
        assert answer.status_code == 201, answer.get_json()
        if "repeat_of" not in body:
            events.append({**answer.get_json(), "host": body["host"]})
    return events


def cut_before_the_crash(report: dict[str, Any]) -> dict[str, Any]:
    """The report as a host whose console was cut short sends it: the log's first line only, a
    new crash of its own (its own report and boot)."""
    first_line = (report.get("console_log") or "").split("\n", 1)[0][:40]
    return {**report, "report_id": f"cut-{report['report_id']}", "boot_id": f"cut-{report.get('boot_id')}",
            "console_log": f"{first_line}\n[    0.1] console: colour dummy device \ufffd\ufffd"}


def reports_without_crash(
    client: Any, headers: dict[str, str], crashes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    events = []
    for report in crashes:
        body = cut_before_the_crash(report)
        answer = client.post("/api/v1/reports", json=body, headers=headers)
        assert answer.status_code == 201 and answer.get_json()["signature"] is None, answer.get_json()
        events.append({**answer.get_json(), "host": body["host"]})
    return events


def record_captures(
    client: Any,
    headers: dict[str, str],
    events: list[dict[str, Any]],
    rng: random.Random,
    failed: Callable[[int], bool] = lambda index: index % 9 == 4,
) -> None:
    """A capture for every event the registry asked to capture; `failed(index)` ones fail."""
    for index, event in enumerate(events):
        action = event["capture"]["action"]
        if action in ("skip", "none"):  # none: a live report, nothing to dump
            continue
        memory_gb = event["host"].get("memory_gb") or 256
        full = action == "full"
        duration = memory_gb * (0.9 if full else 0.08) + rng.uniform(5, 60)
        capture = {
            "method": "makedumpfile",
            "status": "failed" if failed(index) else "completed",
            "dump_level": 0 if full else 31,
            "bytes": int(memory_gb * 1e9 * (0.85 if full else 0.04)),
            "duration_s": round(duration, 1),
            "downtime_s": round(duration + 90, 1),
            "target": "nfs://dumps.example/crash",
            "uri": f"nfs://dumps.example/crash/{event['event_id']}.vmcore?token=secret",
        }
        answer = client.post(f"/api/v1/events/{event['event_id']}/captures", json=capture, headers=headers)
        assert answer.status_code == 201, answer.get_json()


def _store_dumps(database: Database, end: datetime) -> None:
    """Completed captures' dumps in a store (what the simulation has no uploader for): every
    third one deleted by retention 30 days after it was stored (or at the simulation's end)."""
    with database.session() as session:
        captures = session.execute(text(
            "SELECT c.id, c.bytes, e.crashed_at FROM captures c JOIN events e ON e.id = c.event_id "
            "WHERE c.status = 'completed' ORDER BY c.id")).all()
        for index, (capture_id, size, crashed_at) in enumerate(captures):
            stored_at = _aware(crashed_at) + timedelta(hours=2)
            deleted = index % 3 == 0
            session.add(Dump(capture_id=capture_id, store="s3://dumps/crashreg", key=f"{capture_id}.vmcore",
                             state="deleted" if deleted else "stored", encoding="identity", bytes=size or 0,
                             part_size=16 << 20, created_at=stored_at, stored_at=stored_at,
                             deleted_at=min(stored_at + timedelta(days=30), end) if deleted else None))


def _annotate_history(database: Database, rng: random.Random) -> None:
    """Jira links, resolutions, a regression, RCAs and stored epidemiology."""
    with database.session() as session:
        signatures = session.execute(
            text(
                "SELECT s.id, s.first_seen, COUNT(e.id) AS n FROM signatures s "
                "JOIN events e ON e.signature_id = s.id GROUP BY s.id, s.first_seen ORDER BY n DESC, s.id"
            )
        ).all()
        for rank, (signature_id, first_seen, _) in enumerate(signatures[:8]):
            done = rank in (1, 2, 3)
            session.add(
                JiraLink(
                    signature_id=signature_id,
                    issue_key=f"CRASH-{100 + rank}",
                    url=f"{JIRA_BROWSE}CRASH-{100 + rank}",
                    status_category="done" if done else "indeterminate",
                    created_at=_aware(first_seen),
                )
            )
            if done:
                resolved = _aware(first_seen) + timedelta(days=3 + 4 * rank)
                session.execute(
                    text("UPDATE signatures SET status = 'resolved', resolved_at = :r WHERE id = :s"),
                    {"r": resolved, "s": signature_id},
                )
            elif rank in (0, 4):
                session.execute(
                    text("UPDATE signatures SET status = 'triaged' WHERE id = :s"), {"s": signature_id}
                )
        regressed_id = signatures[3][0]
        session.execute(text("UPDATE signatures SET status = 'regressed' WHERE id = :s"), {"s": regressed_id})
        latest = session.execute(
            text("SELECT id FROM events WHERE signature_id = :s ORDER BY crashed_at DESC LIMIT 3"),
            {"s": regressed_id},
        ).scalars()
        for event_id in list(latest):
            session.execute(text("UPDATE events SET regression = 'regressed' WHERE id = :e"), {"e": event_id})
        for rank, (signature_id, first_seen, _) in enumerate(signatures[:6]):
            for author_kind, status in (("ai", "proposed"), ("human", "confirmed"), ("ai", "rejected"))[
                : 1 + rank % 3
            ]:
                created = _aware(first_seen) + timedelta(days=2, hours=rng.randint(0, 48))
                session.add(
                    Rca(
                        signature_id=signature_id,
                        status=status,
                        summary="cause",
                        body="body",
                        author=f"{author_kind}-author",
                        author_kind=author_kind,
                        confidence=0.7,
                        token_name="simulated",
                        checks_passed=True,
                        checked_at=created,
                        created_at=created,
                        updated_at=created,
                    )
                )
        _store_epidemiology(session, signatures)


def _store_epidemiology(session: Any, signatures: list[Any]) -> None:
    """Verdicts, findings and a suspect host as the epidemiology refresh job stores them."""
    _store_suspect(session)
    computed = datetime(2026, 11, 1, tzinfo=UTC)
    rows = (
        (signatures[0][0], "hardware-config", "bios_version", "2.1.4"),
        (signatures[1][0], "software", "kernel_version", "6.1.90-fleet.1"),
        (signatures[2][0], "single-host", "physical_host", "hv-eu-west-c2-007"),
    )
    for rank, (signature_id, verdict, attribute, value) in enumerate(rows, start=1):
        session.add(
            EpidemiologyVerdict(
                signature_id=signature_id,
                verdict=verdict,
                reason="simulated",
                baseline="fleet",
                events=40,
                hosts=3,
                top_attribute=attribute,
                top_value=value,
                top_lift=90.0,
                top_p_value=1e-20,
                analysis={},
                computed_at=computed,
            )
        )
        session.add(
            EpidemiologyFinding(
                signature_id=signature_id,
                baseline="fleet",
                rank=1,
                attribute=attribute,
                value=value,
                in_signature=0.9,
                overall=0.01,
                lift=90.0 / rank,
                p_value=1e-20,
                log10_p=-20.0,
                events=36,
                computed_at=computed,
            )
        )


def _store_suspect(session: Any) -> None:
    session.add(
        EpidemiologySuspectHost(
            rank=1,
            physical_host="hv-eu-west-c2-007",
            crashes=12,
            signatures=5,
            expected_signatures=1.2,
            p_value=1e-6,
            log10_p=-6.0,
            evidence="5 signatures where 1.2 are expected",
            detail={},
            computed_at=datetime(2026, 11, 1, tzinfo=UTC),
        )
    )


def _aware(value: datetime | str) -> datetime:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
