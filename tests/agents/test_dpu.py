"""The DPU agent reports first (source dpu); the crash kernel's later report joins its event."""

from __future__ import annotations

import json

from tests.agents.conftest import DPU_AGENT, FIXTURES, Registry, Run, Site, closed_port_url, run_reporter

SESSION = FIXTURES / "dpu_session.json"


def run_dpu(site: Site, *args: str) -> Run:
    """The DPU agent as installed: dpu/crashreg_dpu.py beside crashreg-report.pyz."""
    return run_reporter(site, *args, script=site.install / "dpu" / DPU_AGENT.name)


def test_dpu_report_then_crash_kernel_report_is_one_event(registry: Registry, make_site, run_sh) -> None:
    session = json.loads(SESSION.read_text())
    site = make_site(hostname=session["hostname"], boot_id=session["boot_id"])

    dpu = run_dpu(site, "report", "--record", str(SESSION))
    assert dpu.returncode == 0, dpu.stderr
    dpu_answer = json.loads(dpu.stdout)
    assert (dpu_answer["action"], dpu_answer["decided_by"]) == ("full", "registry")
    event = registry.get(f"/api/v1/events/{dpu_answer['event_id']}")
    assert event["sources"] == ["dpu"]
    assert (event["hostname"], event["boot_id"]) == (session["hostname"], session["boot_id"])
    assert event["signature"] is not None  # fingerprinted from the host's log read over the DPU

    crash_kernel = run_sh(site)
    assert (crash_kernel.returncode, crash_kernel.args) == (0, "-c -d 0"), crash_kernel.stderr
    assert site.decision()["CRASHREG_EVENT_ID"] == dpu_answer["event_id"]

    joined = registry.get(f"/api/v1/events/{dpu_answer['event_id']}")
    assert joined["sources"] == ["dpu", "crash_kernel"]
    assert sorted(r["report_id"] for r in joined["reports"]) == [
        f"dpu-{session['boot_id']}",
        f"kdump-{session['boot_id']}",
    ]
    events = registry.get(f"/api/v1/signatures/{joined['signature']['id']}/events")
    assert len(events["events"]) == 1


def test_dpu_report_spools_when_the_registry_is_down_and_post_boot_delivers_it(
    registry: Registry, make_site
) -> None:
    session = json.loads(SESSION.read_text())
    site = make_site(url=closed_port_url(), hostname=session["hostname"], boot_id=session["boot_id"])
    offline = run_dpu(site, "report", "--record", str(SESSION))
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["decided_by"] in ("bundle", "fallback")
    [spooled] = site.spooled()
    body = json.loads(spooled.read_bytes())
    assert body["source"] == "dpu"
    assert body["dpu"]["crashed_thread"]["frames"][0]["function"] == "mlx5e_poll_rx_cq"

    site.url = registry.url
    site.write()
    assert run_reporter(site, "post-boot").returncode == 0
    assert site.spooled() == []
    [signature] = registry.get("/api/v1/signatures?limit=10")["signatures"]
    assert signature["event_count"] == 1
