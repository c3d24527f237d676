"""Simulated fleets for the alert rules: a normal one, and one hit by a wave of everything.

Both are the demo simulator's fleet anchored so that its 60 days end now, loaded
through the HTTP API (inventory, reports, captures) as reporters would send them. The normal
fleet crashes with the spread populations only (bugs that strike everywhere alike), and its
kernel rollout brings no regression. The wave adds, within the last hour or so: the rollout
regression population (crashes on the new kernel), a new BIOS on a dozen hosts and a new SKU
of a dozen new hosts, all crashing with one never-seen bug; 40 crashes that each open a new
signature (more than the wave's other crashes); a resolved signature crashing again; failed
captures for all of these; a warning that live hosts printed for days (the kernel log
watcher) panicking a host; and 30 crashes whose consoles were cut short before the crash (no
crash the engine recognises).
"""

from __future__ import annotations

import copy
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from registry.db import Database
from registry.demo.simulator import DEFAULT_POPULATIONS, Bug, FleetConfig, console_log, inventory_json
from sync.grafana.rollups import refresh_rollups
from tests.support.fleet import LoadedFleet, cut_before_the_crash, iso, load_fleet, record_captures

DAYS = 60
SPREAD = tuple(p for p in DEFAULT_POPULATIONS if p.cause == "spread")
ROLLOUT = tuple(p for p in DEFAULT_POPULATIONS if p.cause == "rollout")
WAVE_BIOS = "9.9.9-wave"
WAVE_SKU = "wave-sku-x1"
WAVE_HOSTS = 12
# Crashes opening a signature each: more than half of the wave's crashes (dedup-collapse).
WAVE_NEW_SIGNATURES = 40
NOVEL_BUG = Bug(
    "null_deref", "wave_rx_refill", "wave_nic", ("wave_napi_poll", "__napi_poll", "net_rx_action")
)
WARNED_BUG = Bug(
    "warning", "wave_tx_timeout", "wave_nic", ("wave_watchdog", "call_timer_fn"), "drivers/net/wave.c:812"
)


def fleet_config(now: datetime, wave: bool) -> FleetConfig:
    return FleetConfig(
        start=now - timedelta(days=DAYS),
        days=DAYS,
        physical_per_cluster=8,
        scale=0.5,
        populations=SPREAD + (ROLLOUT if wave else ()),
    )


@dataclass
class Wave:
    loaded: LoadedFleet
    novel_signature: str
    regressed_signature: str
    rollout_kernel: str
    warned_signature: str


def load_normal(client: Any, token: str, database: Database, now: datetime) -> LoadedFleet:
    return load_fleet(client, token, database, fleet_config(now, wave=False), history=False)


def _report(
    host: dict[str, Any],
    bug: Bug,
    at: datetime,
    rng: random.Random,
    console: str | None = None,
    source: str = "crash_kernel",
) -> dict:
    return {
        "report_id": f"wave-{uuid.UUID(int=rng.getrandbits(128))}",
        "source": source,
        "crashed_at": iso(at),
        "host": host,
        "boot_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "uptime_s": 86400,
        "console_log": console or console_log(bug, host, 86400, rng),
    }


def _send(client: Any, headers: dict[str, str], report: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/api/v1/reports", json=report, headers=headers)
    assert answer.status_code == 201, answer.get_json()
    return {**answer.get_json(), "host": report["host"]}


def load_new_crashes(
    client: Any, token: str, database: Database, now: datetime, signatures: int, crashes: int
) -> None:
    """On a fresh registry, `crashes` crashes within the last hour, one a host, shared out among
    `signatures` never-seen bugs (each opening one new signature); folded as the job does."""
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random(23)
    for index in range(crashes):
        bug = Bug("null_deref", f"new_bug_{index % signatures:02d}", "new_mod", ("new_caller",))
        host = {"hostname": f"new-{index:03d}", "region": "eu-1", "kernel_version": "6.8.0-52"}
        _send(client, headers, _report(host, bug, now - timedelta(minutes=60 - index), rng))
    refresh_rollups(database)


def load_wave(client: Any, token: str, triage_token: str, database: Database, now: datetime) -> Wave:
    loaded = load_fleet(client, token, database, fleet_config(now, wave=True), history=False)
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random(17)
    sim = loaded.simulation
    report_hosts = {report["host"]["hostname"]: report["host"] for report in sim.reports}
    names = sorted(report_hosts)
    changed = [{**copy.deepcopy(sim.hosts[name]), "bios_version": WAVE_BIOS} for name in names[:WAVE_HOSTS]]
    template = sim.hosts[names[0]]
    added = [
        {
            **copy.deepcopy(template),
            "hostname": f"wave-sku-{i:02d}",
            "physical_host": f"bm-wave-{i:02d}",
            "sku": WAVE_SKU,
        }
        for i in range(WAVE_HOSTS)
    ]
    answer = client.post(
        "/api/v1/hosts",
        json={"hosts": inventory_json(changed + added), "observed_at": iso(now - timedelta(hours=2))},
        headers=headers,
    )
    assert answer.status_code == 200, answer.get_json()
    wave_events = []
    for index, host in enumerate(changed + added):
        reported = {k: v for k, v in host.items() if k in report_hosts[names[0]]}
        at = now - timedelta(minutes=90 - index)
        wave_events.append(_send(client, headers, _report(reported, NOVEL_BUG, at, rng)))
    for index in range(WAVE_NEW_SIGNATURES):  # every crash a new signature: fingerprinting gone wrong
        bug = Bug("null_deref", f"wave_unique_{index:02d}", "wave_mod", ("wave_caller", "do_syscall_64"))
        host = report_hosts[names[WAVE_HOSTS + index]]
        wave_events.append(
            _send(client, headers, _report(host, bug, now - timedelta(minutes=60 - index), rng))
        )
    # A warning live hosts printed two and three days ago, panicking a host in the wave.
    for index, days in enumerate((3, 2)):
        host = report_hosts[names[-1 - index]]
        warned = _report(host, WARNED_BUG, now - timedelta(days=days), rng, source="live_kernel")
        _send(client, headers, warned)
    panic = _report(report_hosts[names[-3]], WARNED_BUG, now - timedelta(minutes=30), rng)
    panicked = _send(client, headers, panic)
    # A resolved signature crashing again, just after it was resolved.
    past, spread = next(
        (report, event)
        for report, event in zip(sim.reports, loaded.events, strict=True)
        if sim.truth[report["report_id"]] == "ext4-spread"
    )
    signature_id = spread["signature"]["id"]
    answer = client.patch(
        f"/api/v1/signatures/{signature_id}",
        json={"status": "resolved"},
        headers={"Authorization": f"Bearer {triage_token}"},
    )
    assert answer.status_code == 200, answer.get_json()
    just_after = datetime.now(UTC) + timedelta(seconds=2)  # reports carry whole seconds
    again = _report(past["host"], NOVEL_BUG, just_after, rng, past["console_log"])
    assert _send(client, headers, again)["signature"]["id"] == signature_id
    rollout_kernel = next(
        r["host"]["kernel_version"] for r in sim.reports if sim.truth[r["report_id"]] == "rollout-regression"
    )
    # Consoles cut short before the crash on 30 hosts: reports with no crash the engine knows
    # (on the rollout kernel, which crashes more than the rest anyway).
    for index, host in enumerate(changed + added + [report_hosts[name] for name in names[:6]]):
        reported = {k: v for k, v in host.items() if k in report_hosts[names[0]]}
        reported["kernel_version"] = rollout_kernel
        cut = _report(reported, NOVEL_BUG, now - timedelta(minutes=45 - index), rng)
        assert _send(client, headers, cut_before_the_crash(cut))["signature"] is None
    record_captures(client, headers, wave_events, rng, failed=lambda index: True)
    refresh_rollups(database)
    return Wave(
        loaded,
        str(wave_events[0]["signature"]["id"]),
        str(signature_id),
        rollout_kernel,
        str(panicked["signature"]["id"]),
    )
