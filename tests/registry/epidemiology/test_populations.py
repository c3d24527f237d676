"""Crash populations of known cause get the right verdict and top finding (pure path)."""

from __future__ import annotations

from datetime import datetime

import pytest

from registry.demo.simulator import FleetConfig, simulate
from tests.support.simulated import SimulatedRegistry

SEEDS = (7, 11)


@pytest.fixture(scope="module", params=SEEDS)
def registry(request: pytest.FixtureRequest) -> SimulatedRegistry:
    return SimulatedRegistry(simulate(FleetConfig(seed=request.param)))


def _result(registry: SimulatedRegistry, name: str) -> dict:
    return registry.analyse(registry.sim.population(name).bug)


def test_simulation_is_deterministic_from_its_seed() -> None:
    first, second = simulate(FleetConfig(seed=3)), simulate(FleetConfig(seed=3))
    assert first.reports == second.reports and first.inventory == second.inventory
    assert simulate(FleetConfig(seed=4)).reports != first.reports


def test_fleet_is_a_few_thousand_hosts_with_vms_on_physical_hosts(
    registry: SimulatedRegistry,
) -> None:
    hosts = registry.sim.hosts
    assert 2000 <= len(hosts) <= 4000
    vms = [h for h in hosts.values() if h.get("hypervisor")]
    assert len({h["physical_host"] for h in vms}) * 4 <= len(vms)
    assert {h["bios_version"] for h in hosts.values() if h["sku"] == "gpu-h100-sxm"} >= {"2.1.4"}
    assert all(h["sku"] == "gpu-h100-sxm" for h in hosts.values() if h["bios_version"] == "2.1.4")


def test_bad_physical_host_among_vms_is_single_host(registry: SimulatedRegistry) -> None:
    result = _result(registry, "bad-cpu-host")
    assert result["verdict"] == "single-host"
    top = result["findings"][0]
    assert (top["attribute"], top["value"]) == ("physical_host", registry.sim.bad_physical_host)
    assert top["in_signature"] >= 0.9 and top["overall"] < 0.01 and top["p_value"] < 1e-30
    # its region, cluster and VMs are explained by it, not findings of their own
    attributes = {f["attribute"] for f in result["findings"]}
    assert not attributes & {"region", "cluster", "hostname"}
    assert result["onset"]["change_point"] is not None
    assert result["views"]["crashes"]["verdict"] == "single-host"


def test_bios_linked_machine_checks_are_hardware_config(registry: SimulatedRegistry) -> None:
    result = _result(registry, "bios-machine-check")
    assert result["verdict"] == "hardware-config"
    top = result["findings"][0]
    assert (top["attribute"], top["value"]) == ("bios_version", "2.1.4")
    explained = {(f["attribute"], f["explained_by"]) for f in result["explained"]}
    assert ("sku", "bios_version=2.1.4") in explained
    assert result["uptime"]["statement"].startswith("never on nodes up more than 3 days")


def test_rollout_regression_is_software_on_the_new_kernel(registry: SimulatedRegistry) -> None:
    result = _result(registry, "rollout-regression")
    assert result["verdict"] == "software"
    top = result["findings"][0]
    assert (top["attribute"], top["value"]) == ("kernel_version", "6.1.90-fleet.1")
    assert top["in_signature"] == 1.0 and 0.2 < top["overall"] < 0.5  # fleet as it was
    onset = result["onset"]
    rollout_day = registry.sim.config.start.date().toordinal() + registry.sim.config.rollout_day
    assert 0 <= datetime.fromisoformat(onset["change_point"]).toordinal() - rollout_day <= 2
    assert onset["shape"] == "clear start"
    assert ("kernel_version", "6.1.90-fleet.1") in {(c["attribute"], c["value"]) for c in onset["lined_up"]}


@pytest.mark.parametrize(
    "name", ["ext4-spread", "nvme-timeout-spread", "tcp-warning-spread", "xfs-lockup-rising"]
)
def test_spread_bugs_are_software_never_single_host(registry: SimulatedRegistry, name: str) -> None:
    result = _result(registry, name)
    assert result["verdict"] == "software"
    for view in (result, result["views"]["crashes"]):
        assert view["verdict"] != "single-host"
        assert all(f["attribute"] not in {"physical_host", "hostname"} for f in view["findings"])
    assert result["hosts"] >= 50


def test_slowly_rising_bug_is_a_slow_rise(registry: SimulatedRegistry) -> None:
    assert _result(registry, "xfs-lockup-rising")["onset"]["shape"] == "slow rise"


@pytest.mark.parametrize("name", ["small-hung-task", "small-bpf-paging"])
def test_small_signatures_are_inconclusive_with_events_needed(registry: SimulatedRegistry, name: str) -> None:
    result = _result(registry, name)
    assert result["verdict"] == "inconclusive"
    needed = result["verdict_detail"]["more_events_needed"]
    assert isinstance(needed, int) and 1 <= needed <= 20
    assert f"{needed} more events would decide" in result["verdict_detail"]["reason"]


def test_bad_cpu_spray_is_inconclusive_per_signature_but_one_more_event_decides(
    registry: SimulatedRegistry,
) -> None:
    spray_bug = registry.sim.population("bad-cpu-host").spray[0]
    result = registry.analyse(spray_bug)
    assert result["verdict"] == "inconclusive"
    assert result["verdict_detail"]["more_events_needed"] == 1


def test_fleet_wide_suspects_rank_the_bad_cpu_first(registry: SimulatedRegistry) -> None:
    suspects = registry.suspects()
    assert suspects[0]["physical_host"] == registry.sim.bad_physical_host
    top = suspects[0]
    assert top["signatures"] >= 10 > top["expected_signatures"]
    assert top["signatures_only_here"] >= 10 and top["signatures_p_value"] < 1e-4
    # the rest are hosts that really crash far more than the fleet: the BIOS-linked ones
    firmware = {h["physical_host"] for h in registry.sim.hosts.values() if h["bios_version"] == "2.1.4"}
    assert {s["physical_host"] for s in suspects[1:]} <= firmware
