"""The DPU agent reports first (source dpu); the crash kernel's later report joins its event."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from agents.dpu import report as dpu_agent
from agents.reporter import EXIT_NO_DEBUG_INFO, EXIT_UNREADABLE
from registry.core.events import Report
from registry.db import Database
from tests.support.agents import (
    FIXTURES,
    SYSTEM_PYTHON,
    Registry,
    Run,
    Site,
    closed_port_url,
    run_reporter,
)
from tests.support.cores import core_pattern_problem, crash
from tests.support.vmcores import BUILD_ID, elf_vmcore

SESSION = FIXTURES / "dpu_session.json"


def run_dpu(site: Site, *args: str) -> Run:
    """The DPU agent as installed: the pyz's `dpu` command."""
    return run_reporter(site, "dpu", *args)


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


def test_a_bundle_holding_null_still_gives_a_decision(make_site) -> None:
    """Offline with a bundle file that holds `null`: the agent printed a traceback and exited 1,
    no decision; now it decides as the crash kernel's reporter does (decide_or_fall_back)."""
    site = make_site(url=closed_port_url())
    site.bundle_json.write_text("null\n")
    offline = run_dpu(site, "report", "--record", str(SESSION))
    assert offline.returncode == 0 and "Traceback" not in offline.stderr, offline.stderr
    assert json.loads(offline.stdout)["decided_by"] in ("bundle", "fallback")
    assert len(site.spooled()) == 1


def test_an_all_zero_boot_id_is_no_identity_and_is_not_sent(registry: Registry, make_site) -> None:
    """The kernel makes its boot_id on first read: a host that never read it has all zeros."""
    assert dpu_agent.boot_id_text(bytes(16)) is None
    raw = uuid.UUID("0f6a1c5e-3b7d-4a2e-9c1f-2d4e6f8a0b1c").bytes
    assert dpu_agent.boot_id_text(raw) == "0f6a1c5e-3b7d-4a2e-9c1f-2d4e6f8a0b1c"

    session = json.loads(SESSION.read_text()) | {"boot_id": str(uuid.UUID(int=0))}
    site = make_site(hostname=session["hostname"], boot_id=session["boot_id"])
    recording = site.root / "zero-boot-id.json"
    recording.write_text(json.dumps(session))
    dpu = run_dpu(site, "report", "--record", str(recording))
    assert dpu.returncode == 0, dpu.stderr
    answer = json.loads(dpu.stdout)
    assert not answer["report_id"].startswith(f"dpu-{uuid.UUID(int=0)}"), answer
    event = registry.get(f"/api/v1/events/{answer['event_id']}")
    assert event["boot_id"] is None


def test_debug_info_is_found_per_kernel_release(tmp_path: Path) -> None:
    """DIR/<release>/ holds the release's ELF files (the release is the core's VMCOREINFO OSRELEASE=)."""
    release = tmp_path / "debug" / "6.1.0-57-cloud-amd64"
    (release / "modules").mkdir(parents=True)
    (release / "vmlinux").write_bytes(b"\x7fELF" + bytes(60))
    (release / "modules" / "mlx5_core.ko").write_bytes(b"\x7fELF" + bytes(60))
    (release / "README").write_text("not an ELF file\n")
    (tmp_path / "debug" / "6.1.0-13-amd64").mkdir()
    (tmp_path / "debug" / "6.1.0-13-amd64" / "vmlinux").write_bytes(b"\x7fELF" + bytes(60))
    assert dpu_agent.debug_files(str(tmp_path / "debug"), "6.1.0-57-cloud-amd64") == [
        str(release / "modules" / "mlx5_core.ko"),
        str(release / "vmlinux"),
    ]
    assert dpu_agent.debug_files(str(tmp_path / "debug"), "5.10.0-1-amd64") == []


def test_the_report_carries_the_kernels_build_id_and_the_debug_info_used(
    registry: Registry, make_site, database: Database
) -> None:
    """What the agent read from VMCOREINFO and which debug files it used travel with the report
    (the triage bundle reads them back); a recording from before them reports as before."""
    build_id = "01d2640d3a13145ee314eb05b155f141b7b7058b"
    debug_info = {"kernel": {"build_id": build_id, "from": "debuginfod"},
                  "modules": [{"name": "mlx5_core", "build_id": "ab" * 20, "from": None}]}
    session = json.loads(SESSION.read_text()) | {"kernel_build_id": build_id, "debug_info": debug_info}
    site = make_site(hostname=session["hostname"], boot_id=session["boot_id"])
    recording = site.root / "with-build-id.json"
    recording.write_text(json.dumps(session))
    dpu = run_dpu(site, "report", "--record", str(recording))
    assert dpu.returncode == 0, dpu.stderr
    with database.session() as session_:
        payload = session_.scalars(select(Report.payload).where(
            Report.report_id == json.loads(dpu.stdout)["report_id"])).one()
    assert (payload["kernel_build_id"], payload["dpu"]["debug_info"]) == (build_id, debug_info)

    earlier = json.loads(SESSION.read_text()) | {"boot_id": str(uuid.uuid4())}
    old = make_site(hostname=earlier["hostname"], boot_id=earlier["boot_id"])
    (old.root / "earlier.json").write_text(json.dumps(earlier))
    older = run_dpu(old, "report", "--record", str(old.root / "earlier.json"))
    assert older.returncode == 0, older.stderr
    with database.session() as session_:
        payload = session_.scalars(select(Report.payload).where(
            Report.report_id == json.loads(older.stdout)["report_id"])).one()
    assert "kernel_build_id" not in payload and payload["dpu"]["debug_info"] is None


# A release nowhere on this machine, so drgn's default paths find no vmlinux for it either.
UNKNOWN_RELEASE = "6.1.0-99-crashreg-test"
# What drgn needs to open a kernel core, besides the release and the build-id.
KERNEL_CORE_INFO = "PAGESIZE=4096\nKERNELOFFSET=35000000\nSYMBOL(swapper_pg_dir)=ffffffff82a0a000\n"


def test_without_the_kernels_debug_info_the_agent_says_where_it_looked_and_reports_nothing(
    registry: Registry, make_site, database: Database, tmp_path: Path
) -> None:
    """drgn (Debian's, as on the DPU) opens the core but finds no vmlinux: the hostname and boot_id
    cannot be read, and a report without them would open a second event for the crash the crash
    kernel reports. One line names the kernel and where the agent looked; exit 4; nothing sent."""
    vmcore = elf_vmcore(tmp_path / "vmcore", f"OSRELEASE={UNKNOWN_RELEASE}\nBUILD-ID={BUILD_ID}\n"
                        f"{KERNEL_CORE_INFO}".encode())
    (tmp_path / "debug" / "6.1.0-57-cloud-amd64").mkdir(parents=True)  # another release's
    site = make_site(extra={"CRASHREG_DPU_DEBUG_DIR": str(tmp_path / "debug"),
                            "CRASHREG_DEBUGINFOD_CACHE": str(tmp_path / "cache")})
    record = site.root / "record.json"
    dpu = run_dpu(site, "report", "--core", str(vmcore), "--save-record", str(record))
    assert (dpu.returncode, dpu.stdout) == (EXIT_NO_DEBUG_INFO, ""), dpu.stderr
    assert "Traceback" not in dpu.stderr and not record.exists()
    # The registry's /debuginfod/ is asked by the core's build-id, and refuses the report token.
    assert dpu.stderr.splitlines()[-1] == (
        f"crashreg-report: no debug info for the host's kernel {UNKNOWN_RELEASE} (build-id {BUILD_ID}): "
        f"debug dir {tmp_path / 'debug' / UNKNOWN_RELEASE}: no ELF file; "
        f"debuginfod {registry.url}/debuginfod/buildid/{BUILD_ID}/debuginfo: HTTP 401 "
        "(no credential: CRASHREG_DEBUGINFOD_TOKEN_FILE names a read token); "
        f"drgn: could not find vmlinux for {UNKNOWN_RELEASE}; "
        "nothing reported (the crash kernel reports this crash)"
    )

    # A kernel older than 5.9 writes no BUILD-ID=: no debuginfod server to ask by it.
    old = elf_vmcore(tmp_path / "old-vmcore", f"OSRELEASE={UNKNOWN_RELEASE}\n{KERNEL_CORE_INFO}".encode())
    dpu = run_dpu(make_site(), "report", "--core", str(old))
    assert (dpu.returncode, dpu.stdout) == (EXIT_NO_DEBUG_INFO, ""), dpu.stderr
    assert dpu.stderr.splitlines()[-1] == (
        f"crashreg-report: no debug info for the host's kernel {UNKNOWN_RELEASE} (build-id ?): "
        "no debug dir (--debug-dir, CRASHREG_DPU_DEBUG_DIR); debuginfod not asked (no BUILD-ID= in "
        f"VMCOREINFO); drgn: could not find vmlinux for {UNKNOWN_RELEASE}; "
        "nothing reported (the crash kernel reports this crash)"
    )
    assert site.spooled() == []
    with database.session() as session:
        assert session.scalars(select(Report.report_id)).all() == []


def test_memory_that_is_not_a_core_is_one_line_and_no_report(make_site, tmp_path: Path) -> None:
    """A wrong --core (a path that is not there, a file that is no ELF core) is said in one line,
    with exit 5 and nothing sent; never a traceback."""
    not_a_core = tmp_path / "mem"
    not_a_core.write_bytes(b"not memory\n")
    cases = ((tmp_path / "gone", "[Errno 2] No such file or directory"), (not_a_core, "not an ELF core file"))
    for core, why in cases:
        dpu = run_dpu(make_site(), "report", "--core", str(core))
        assert (dpu.returncode, dpu.stdout) == (EXIT_UNREADABLE, ""), dpu.stderr
        assert "Traceback" not in dpu.stderr
        said = dpu.stderr.splitlines()[-1]
        assert said.startswith(f"crashreg-report: cannot read the host's memory at {core}: ")
        assert why in dpu.stderr and dpu.stderr.rstrip().endswith("; nothing reported")


def test_a_process_core_is_one_line_and_no_report(make_site, tmp_path: Path) -> None:
    """A process's core (no VMCOREINFO: drgn reads it as a program's) given for the host's
    memory is said in one line naming what it is, exit 5, nothing sent; before, drgn's list of
    the program's files without debug info, twice, as a kernel without debug info (exit 4)."""
    problem = core_pattern_problem()
    if problem:
        pytest.skip(problem)
    program = tmp_path / "crash"
    subprocess.run(["gcc", "-x", "c", "-o", str(program), "-"], text=True, check=True,
                   input="int main(void) { return *(volatile int *)0; }")
    core = crash(program, None, tmp_path / "run")
    site = make_site()
    dpu = run_dpu(site, "report", "--core", str(core))
    assert (dpu.returncode, dpu.stdout) == (EXIT_UNREADABLE, ""), dpu.stderr
    assert dpu.stderr.splitlines() == [
        f"crashreg-report: cannot read the host's memory at {core}: a process's core, not a kernel's memory "
        "(no VMCOREINFO note); a process's core is reported with `core`; nothing reported"]
    assert site.spooled() == []


def test_a_python3_without_drgn_is_said_in_one_line(make_site, tmp_path: Path) -> None:
    """The DPU agent run by a python3 that cannot import drgn (here: without site-packages):
    one line naming the interpreter and what to install, exit 5, nothing sent; a traceback before."""
    site = make_site()
    memory = tmp_path / "mem"
    memory.write_bytes(b"\x7fELF")
    command = [SYSTEM_PYTHON, "-I", "-S", str(site.reporter), "dpu", "report", "--core", str(memory)]
    done = subprocess.run(command, capture_output=True, text=True, env={"CRASHREG_CONF": str(site.conf)},
                          timeout=120, check=False)
    assert (done.returncode, done.stdout) == (EXIT_UNREADABLE, ""), done.stderr
    assert "Traceback" not in done.stderr and "cannot import drgn" in done.stderr
    assert site.spooled() == []
