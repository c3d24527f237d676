"""Epidemiology through the real HTTP API on both databases: a simulated fleet is fed with
POST /api/v1/hosts and /api/v1/reports, then read back."""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests
from sqlalchemy import select

from registry.demo.feed import feed
from registry.demo.simulator import FleetConfig, simulate
from registry.epidemiology.analysis import fleet_baseline, states_from_history
from registry.epidemiology.fleet_sql import read_inventory
from registry.epidemiology.models import (
    EpidemiologyFinding,
    EpidemiologySuspectHost,
    EpidemiologyVerdict,
)
from registry.epidemiology.service import refresh
from sync.scheduler import JobContext, load_jobs
from tests.support.http import auth
from tests.support.simulated import signature_of

CONTRACT_KEYS = {"signature", "events", "hosts", "verdict", "findings", "onset"}
FINDING_KEYS = {"attribute", "value", "in_signature", "overall", "lift", "p_value"}


def test_known_populations_get_their_verdicts_through_the_api(live_server, make_token, database) -> None:  # type: ignore[no-untyped-def]
    sim = simulate(FleetConfig(seed=5, physical_per_cluster=20))
    answers = feed(sim, live_server, make_token("admin", kind="agent"))
    reader = requests.Session()
    reader.headers.update(auth(make_token("read")))

    def epidemiology(population: str) -> dict:
        sid = signature_of(sim, answers, population)
        response = reader.get(f"{live_server}/api/v1/signatures/{sid}/epidemiology")
        assert response.status_code == 200
        body = response.json()
        assert set(body) >= CONTRACT_KEYS and body["signature"]["id"] == sid
        assert set(body["onset"]) >= {"first_seen", "change_point"}
        for finding in body["findings"]:
            assert set(finding) >= FINDING_KEYS
        strengths = [f["log10_p"] for f in body["findings"]]
        assert strengths == sorted(strengths)  # strongest first
        return body

    bad_host = epidemiology("bad-cpu-host")
    assert bad_host["verdict"] == "single-host" and bad_host["baseline"] == "fleet"
    assert (bad_host["findings"][0]["attribute"], bad_host["findings"][0]["value"]) == (
        "physical_host",
        sim.bad_physical_host,
    )
    bios = epidemiology("bios-machine-check")
    assert bios["verdict"] == "hardware-config"
    assert (bios["findings"][0]["attribute"], bios["findings"][0]["value"]) == (
        "bios_version",
        "2.1.4",
    )
    assert bios["uptime"]["statement"].startswith("never on nodes up more than 3 days")
    rollout = epidemiology("rollout-regression")
    assert rollout["verdict"] == "software"
    assert rollout["findings"][0]["value"] == "6.1.90-fleet.1"
    assert "kernel_version" in {c["attribute"] for c in rollout["onset"]["lined_up"]}
    spread = epidemiology("tcp-warning-spread")
    assert spread["verdict"] == "software"
    small = epidemiology("small-hung-task")
    assert small["verdict"] == "inconclusive"
    assert small["verdict_detail"]["more_events_needed"] >= 1

    # the fleet as it was
    states = states_from_history((at, host) for at, hosts in sim.inventory for host in hosts)
    rollout = sim.config.start + timedelta(days=sim.config.rollout_day)
    new_kernel = ("kernel_version", "6.1.90-fleet.1")
    pair = (("bios_version", "2.1.4"), ("kernel_version", "6.1.90-fleet.1"))
    # the database's inventory as loaded (hosts and their attribute history) against the
    # plain-data computation over the simulator's inventory snapshots
    with database.session() as session:
        inventory = read_inventory(session)
    for start, end in ((sim.config.start, rollout), (rollout, sim.end)):
        loaded = inventory.baseline(start, end)
        plain = fleet_baseline(states, start, end)
        assert loaded.total == pytest.approx(plain.total)
        for key in (new_kernel, ("sku", "gpu-h100-sxm"), ("physical_host", sim.bad_physical_host)):
            assert loaded.counts.get(key, 0.0) == pytest.approx(plain.counts.get(key, 0.0), abs=1e-6)
        keys = list(pair)
        assert loaded.joint(keys).get(pair, 0.0) == pytest.approx(plain.joint(keys).get(pair, 0.0))
        # as a request asks (only the signature's hostnames, hosts and labels): the same
        # host-time (hosts without history counted by profile, the others by interval)
        only = {
            name: sorted({v for (a, v) in plain.counts if a == name})[:: 7 if name == "hostname" else 2]
            for name in ("hostname", "physical_host", "labels")
        }
        asked = inventory.baseline(start, end, only)
        assert asked.total == pytest.approx(plain.total)
        wanted = [key for key in plain.counts if key[0] not in only or key[1] in only[key[0]]]
        assert len(wanted) > len(only["hostname"]) > 10
        for key in wanted:
            assert asked.counts.get(key, 0.0) == pytest.approx(plain.counts[key], abs=1e-6), key
        assert (
            "hostname",
            sorted({v for (a, v) in plain.counts if a == "hostname"})[1],
        ) not in asked.counts
        # joint host-time of values of several attributes (steady hosts by profile)
        several = [
            *pair,
            ("hostname", only["hostname"][3]),
            ("labels", only["labels"][0]),
            ("sku", "gpu-h100-sxm"),
        ]
        joint_loaded, joint_plain = asked.joint(several), plain.joint(several)
        assert any(joint_plain.values())
        for both in joint_plain.keys() | joint_loaded.keys():
            assert joint_loaded.get(both, 0.0) == pytest.approx(joint_plain.get(both, 0.0), abs=1e-6), both
    assert new_kernel not in fleet_baseline(states, sim.config.start, rollout).counts

    suspects = reader.get(f"{live_server}/api/v1/epidemiology/hosts").json()["hosts"]
    assert suspects[0]["physical_host"] == sim.bad_physical_host
    assert suspects[0]["signatures"] > suspects[0]["expected_signatures"]

    with database.session() as session:
        outcome = refresh(session)
    assert outcome.signatures >= 8 and outcome.verdicts["single-host"] >= 1
    with database.session() as session:
        stored = session.get(EpidemiologyVerdict, int(signature_of(sim, answers, "bios-machine-check")))
        assert stored.verdict == "hardware-config" and stored.top_value == "2.1.4"
        findings = session.scalars(
            select(EpidemiologyFinding)
            .where(
                EpidemiologyFinding.signature_id == stored.signature_id,
                EpidemiologyFinding.baseline == "fleet",
            )
            .order_by(EpidemiologyFinding.rank)
        ).all()
        assert findings[0].attribute == "bios_version"
        top_suspect = session.get(EpidemiologySuspectHost, 1)
        assert top_suspect.physical_host == sim.bad_physical_host
    # after the refresh the all-crashes view is served from the stored analysis
    sid = signature_of(sim, answers, "bios-machine-check")
    stored_view = reader.get(f"{live_server}/api/v1/signatures/{sid}/epidemiology").json()["views"]["crashes"]
    assert stored_view["stored_at"] and stored_view["verdict"] == "hardware-config"
    live_view = reader.get(f"{live_server}/api/v1/signatures/{sid}/epidemiology?crash_view=live").json()
    assert "stored_at" not in live_view["views"]["crashes"]
    assert live_view["views"]["crashes"]["findings"] == stored_view["findings"]


def test_unknown_signature_is_404_and_scope_read_is_required(client, make_token) -> None:  # type: ignore[no-untyped-def]
    reader = auth(make_token("read"))
    missing = client.get("/api/v1/signatures/999999/epidemiology", headers=reader)
    assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found"
    assert client.get("/api/v1/epidemiology/hosts").status_code == 401
    reporter = auth(make_token("report", kind="agent"))
    assert client.get("/api/v1/epidemiology/hosts", headers=reporter).status_code == 403
    bad = client.get("/api/v1/epidemiology/hosts?limit=0", headers=reader)
    assert bad.status_code == 400 and "limit" in bad.json["error"]["fields"]
    empty = client.get("/api/v1/epidemiology/hosts", headers=reader)
    assert empty.status_code == 200 and empty.json["hosts"] == []


@pytest.mark.parametrize("kernel", ["6.1.90-fleet.1"])
def test_signature_without_inventory_falls_back_to_the_crash_baseline(
    client, make_token, kernel, settings, database
) -> None:  # type: ignore[no-untyped-def]
    token = auth(make_token("report", kind="agent"))
    log = "[ 1.0] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
    for i in range(12):
        body = {
            "report_id": f"r{i}",
            "source": "crash_kernel",
            "crashed_at": f"2026-10-{i + 1:02d}T10:00:00Z",
            "host": {"hostname": f"h{i}", "kernel_version": kernel},
            "console_log": log,
        }
        assert client.post("/api/v1/reports", json=body, headers=token).status_code == 201
    sid = client.post(
        "/api/v1/reports",
        json={
            "report_id": "x",
            "source": "crash_kernel",
            "crashed_at": "2026-10-20T10:00:00Z",
            "host": {"hostname": "h0", "kernel_version": kernel},
            "console_log": log,
        },
        headers=token,
    ).json["signature"]["id"]
    body = client.get(f"/api/v1/signatures/{sid}/epidemiology", headers=auth(make_token("read"))).json
    assert body["baseline"] == "crashes" and body["events"] == 13
    assert body["verdict"] == "software"  # spread over 12 hosts, nothing to single out

    # the scheduler's job stores it for Grafana
    job = load_jobs()["epidemiology-refresh"]
    assert job.run(JobContext(settings, database)) == {
        "signatures": 1,
        "suspects": 0,
        "verdicts": {"software": 1},
    }
    with database.session() as session:
        stored = session.get(EpidemiologyVerdict, int(sid))
        assert (stored.verdict, stored.baseline, stored.events) == ("software", "crashes", 13)
