"""Real kernels crash in QEMU and the unmodified crash-kernel reporter asks the registry first.

One lab host crashes the same bug (crashlab_null_deref) 1 + K_MORE + 1 times, each a new boot:
the registry (the default budget, 3 full captures per window) answers full, full, full, skip;
makedumpfile writes what it was told to the host's disk, and the capture records and savings
follow. A second host crashes with the registry unreachable: the offline bundle baked into its
crash kernel decides, the report waits in the spool on its disk, and the post-boot agent
delivers it with the same report_id. The DPU agent reads the first crash's vmcore with drgn
and its report joins the crash kernel's event; it reads the second crash's with no debug
directory, its kernel's and module's debug info fetched from the registry's /debuginfod/ by
build-id (the -dbg vmlinux and the module uploaded with `crashreg symbols upload`), and the
triage workspace fetches the same files. A third host crashes through sysrq, a stack all
vmlinux's: the DPU agent names each of its frames, inlined calls included, from the vmlinux
fetched by build-id; refused the vmlinux by the registry, it says where it looked and reports
nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.lab import lab
from tests.lab.conftest import Host, Lab, spooled_body
from tests.lab.packages import cache_dir, debug_vmlinux, drgn_python

K_MORE = 2  # full captures after the first: the registry's default budget is 3 per window
BUG = "null-deref"
FUNCTION = "crashlab_null_deref"
KDUMP_SIGNATURE = b"KDUMP   "


def boot_report_id(booted: lab.Boot) -> str:
    assert booted.boot_id, booted.console[-3000:]
    return f"kdump-{booted.boot_id}"


def decided_args(booted: lab.Boot) -> tuple[int, str]:
    """The reporter's exit status and the makedumpfile arguments it printed."""
    line = booted.marker_line("decided")
    rc = int(line.split("rc=")[1].split()[0])
    args = line.split("args=")[1].rsplit(" ", 1)[0].strip()
    return rc, args


def kdump_dump_level(header: bytes) -> int:
    """dump_level from a makedumpfile (kdump-compressed) file: its sub header, one block in.

    disk_dump_header: signature[8], header_version, new_utsname (6 x 65), timeval, status,
    block_size; kdump_sub_header (at block_size): phys_base, dump_level.
    """
    assert header[:8] == KDUMP_SIGNATURE, header[:16]
    block_size = struct.unpack_from("<i", header, 8 + 4 + 6 * 65 + 6 + 16 + 4)[0]
    return struct.unpack_from("<i", header, block_size + 8)[0]


def savings(capture_lab: Lab, signature_id: str) -> dict[str, Any]:
    return capture_lab.registry.get("/api/v1/captures/savings", signature=signature_id)["totals"]


@pytest.fixture(scope="module")
def capture_lab(make_lab, lab_out: Path) -> Lab:
    return make_lab("capture", CRASHREG_DUMP_STORE=str(lab_out / "capture" / "store"))


@pytest.fixture(scope="module")
def series(capture_lab: Lab) -> dict[str, Any]:
    """lab-host-1 crashes the same bug 1 + K_MORE + 1 times; savings read before the skip."""
    host = capture_lab.host("lab-host-1")
    for _ in range(1 + K_MORE):
        capture_lab.crash(host, BUG)
    signature_id = capture_lab.event_of(boot_report_id(host.boots[0]))["signature"]["id"]
    before = savings(capture_lab, signature_id)
    capture_lab.crash(host, BUG)
    return {
        "host": host,
        "signature_id": signature_id,
        "savings_before": before,
        "savings_after": savings(capture_lab, signature_id),
    }


def test_first_crash_is_a_full_dump_at_level_0_with_its_capture_recorded(capture_lab: Lab, series) -> None:
    host: Host = series["host"]
    first = host.boots[0]
    assert decided_args(first) == (0, "-l -d 0")
    report_id = boot_report_id(first)
    event = capture_lab.event_of(report_id)
    assert event["capture"]["action"] == "full", event["capture"]
    assert event["capture"]["reason"].startswith("new signature"), event["capture"]
    assert (event["hostname"], event["boot_id"], event["sources"]) == (
        host.name,
        first.boot_id,
        ["crash_kernel"],
    )
    assert event["host"]["kernel_version"] == capture_lab.kit.release
    assert FUNCTION in event["title"], event["title"]

    # The event's console log is the real panic log, as makedumpfile read it from /proc/vmcore.
    stored = capture_lab.stored_report(report_id)
    assert "BUG: kernel NULL pointer dereference" in stored["console_log"]
    assert f"RIP: 0010:{FUNCTION}+" in stored["console_log"]
    assert f"Linux version {capture_lab.kit.release}" in stored["console_log"]
    assert stored["console_log"] == spooled_body(host, report_id)["console_log"]

    # The dump on the guest's disk is what the registry asked for: every page (dump level 0).
    vmcore = f"/crash/{first.boot_id}/vmcore"
    size = host.disk.listing(f"/crash/{first.boot_id}")["vmcore"]
    assert kdump_dump_level(host.disk.read_head(vmcore, 1 << 16)) == 0
    [capture] = event["captures"]
    assert (capture["method"], capture["status"], capture["dump_level"]) == ("makedumpfile", "completed", 0)
    assert capture["bytes"] == size > 50 << 20
    assert capture["duration_s"] is not None and capture["downtime_s"] > 0
    assert capture["target"] == f"/var{vmcore}"


def test_k_more_crashes_are_full_then_skip_with_no_dump_and_the_savings_move(
    capture_lab: Lab, series
) -> None:
    host: Host = series["host"]
    events = [capture_lab.event_of(boot_report_id(b)) for b in host.boots]
    assert len({b.boot_id for b in host.boots}) == len(host.boots) == K_MORE + 2
    assert {e["signature"]["id"] for e in events} == {series["signature_id"]}
    assert [e["capture"]["action"] for e in events] == ["full"] * (K_MORE + 1) + ["skip"]
    assert [decided_args(b) for b in host.boots] == [(0, "-l -d 0")] * (K_MORE + 1) + [(10, "")]
    dumped = host.disk.listing("/crash")
    for booted, event in zip(host.boots[:-1], events[:-1], strict=True):
        assert host.disk.listing(f"/crash/{booted.boot_id}")["vmcore"] == event["captures"][0]["bytes"]
    skipped = host.boots[-1]
    assert skipped.boot_id not in dumped and "LAB: collected" not in skipped.console
    assert events[-1]["captures"] == []
    assert "registry decision is skip" not in skipped.console  # the collector never ran

    before, after = series["savings_before"], series["savings_after"]
    assert (before["dumps_skipped"], before["full_captures"]) == (0, K_MORE + 1)
    assert (after["dumps_skipped"], after["full_captures"]) == (1, K_MORE + 1)
    assert after["bytes_avoided"] > before["bytes_avoided"] == 0
    assert after["downtime_hours_avoided"] > 0
    signature = capture_lab.registry.get(f"/api/v1/signatures/{series['signature_id']}/events")
    assert len(signature["events"]) == K_MORE + 2


@pytest.fixture(scope="module")
def offline(capture_lab: Lab, series) -> dict[str, Any]:
    """lab-host-2's crash kernel cannot reach the registry; it has the bundle fetched before."""
    bundle = capture_lab.bundle_text()
    capture_lab.image("offline", url=f"http://{lab.GUEST_HOST_ALIAS}:{lab.free_port()}", bundle=bundle)
    host = capture_lab.host("lab-host-2")
    booted = capture_lab.crash(host, BUG, image="offline")
    return {"host": host, "boot": booted, "bundle": bundle}


def post_boot_conf(capture_lab: Lab, spool: Path) -> Path:
    token = spool.parent / "token"
    token.write_text(capture_lab.registry.tokens["report"] + "\n")
    conf = spool.parent / "post-boot.conf"
    conf.write_text(
        f'CRASHREG_URL="{capture_lab.registry.url}"\nCRASHREG_TOKEN_FILE="{token}"\n'
        f'CRASHREG_SPOOL_DIR="{spool}"\nCRASHREG_RETRIES="0"\n'
    )
    return conf


def test_unreachable_registry_bundle_decides_spool_on_disk_post_boot_delivers_once(
    capture_lab: Lab, series, offline, installed: Path
) -> None:
    host: Host = offline["host"]
    booted: lab.Boot = offline["boot"]
    report_id = boot_report_id(booted)
    rows = [line.split("\t") for line in offline["bundle"].splitlines() if not line.startswith("#")]
    assert [(r[1], r[3]) for r in rows] == [("skip", FUNCTION)]

    # The bundle decided (the budget is spent: skip), on the crash kernel, with no network.
    assert "curl exit 7" in booted.console
    assert (
        f"decision: skip by bundle: offline: policy bundle entries for function {FUNCTION}" in booted.console
    )
    assert decided_args(booted) == (10, "")
    assert host.disk.listing("/crash") == {}
    spooled = host.disk.listing("/spool/crashreg")
    assert f"{report_id}.json" in spooled and "sent" not in spooled
    body = host.disk.read(f"/spool/crashreg/{report_id}.json")
    assert json.loads(body)["report_id"] == report_id

    # After the reboot the post-boot agent (the host's view of its /var) delivers it.
    spool = host.disk.copy_tree("/spool/crashreg", capture_lab.out / "lab-host-2-var")
    conf = post_boot_conf(capture_lab, spool)
    resend = subprocess.run(
        [sys.executable, str(installed / "crashreg-report.pyz"), "--config", str(conf), "post-boot"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resend.returncode == 0, resend.stderr
    assert not (spool / f"{report_id}.json").exists()
    assert (spool / "sent" / f"{report_id}.json").read_bytes() == body
    event = capture_lab.event_of(report_id)
    assert (event["hostname"], event["boot_id"]) == (host.name, booted.boot_id)
    assert event["signature"]["id"] == series["signature_id"]
    assert [r["report_id"] for r in event["reports"]] == [report_id]
    assert capture_lab.stored_report(report_id)["console_log"] == json.loads(body)["console_log"]

    # Sent again (an answer lost on the way), the same bytes join the same event.
    again = requests.post(
        capture_lab.registry.url + "/api/v1/reports",
        data=body,
        timeout=30,
        headers={
            "Authorization": f"Bearer {capture_lab.registry.tokens['report']}",
            "Content-Type": "application/json",
        },
    )
    assert again.status_code == 200 and again.json()["duplicate"] is True, again.text
    assert again.json()["event_id"] == event["id"]
    events = capture_lab.registry.get(f"/api/v1/signatures/{series['signature_id']}/events")
    assert len(events["events"]) == K_MORE + 3


def debug_dir(capture_lab: Lab) -> Path:
    """What a DPU is told: DIR/<release>/ with the release's vmlinux and the module's debug info."""
    root = capture_lab.out / "debug"
    release = root / capture_lab.kit.release
    release.mkdir(parents=True, exist_ok=True)
    for name, target in (
        ("vmlinux", debug_vmlinux(capture_lab.kit.release)),
        ("crashlab.ko", capture_lab.module),
    ):
        if not (release / name).exists():
            (release / name).symlink_to(target)
    return root


def run_dpu(capture_lab: Lab, installed: Path, vmcore: Path, out: Path, **settings: str) -> dict[str, Any]:
    """The DPU agent (`crashreg-report.pyz dpu report`, under drgn's python) on a vmcore: a report
    token of its own, its spool under OUT, these reporter.conf settings besides. Its exit status,
    answer, stderr and what it read (saved as OUT/record.json; None when it read nothing). No
    DEBUGINFOD_URLS reaches drgn: it gets debug info only from what the agent loads."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report-token").write_text(capture_lab.registry.tokens["report"])
    settings = {"CRASHREG_URL": capture_lab.registry.url, "CRASHREG_TOKEN_FILE": str(out / "report-token"),
                "CRASHREG_SPOOL_DIR": str(out / "spool")} | settings
    conf = out / "dpu.conf"
    conf.write_text("".join(f'{name}="{value}"\n' for name, value in settings.items()))
    record = out / "record.json"
    env = {name: value for name, value in os.environ.items() if name != "DEBUGINFOD_URLS"}
    dpu = subprocess.run(
        [drgn_python(), str(installed / "crashreg-report.pyz"), "--config", str(conf), "dpu", "report",
         "--core", str(vmcore), "--save-record", str(record)],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    return {"returncode": dpu.returncode, "stderr": dpu.stderr,
            "answer": json.loads(dpu.stdout) if dpu.returncode in (0, 10) else None,
            "record": json.loads(record.read_text()) if record.exists() else None}


def test_dpu_reads_the_vmcore_with_drgn_and_joins_the_crash_kernels_event(
    capture_lab: Lab, series, installed: Path
) -> None:
    host: Host = series["host"]
    first = host.boots[0]
    vmcore = host.disk.extract(f"/crash/{first.boot_id}/vmcore", capture_lab.out / "lab-host-1.vmcore")
    dpu = run_dpu(capture_lab, installed, vmcore, capture_lab.out / "dpu-debug-dir",
                  CRASHREG_DPU_DEBUG_DIR=str(debug_dir(capture_lab)))
    assert dpu["returncode"] in (0, 10), dpu["stderr"]
    answer, read = dpu["answer"], dpu["record"]
    assert (read["hostname"], read["boot_id"], read["kernel_release"]) == (
        host.name,
        first.boot_id,
        capture_lab.kit.release,
    )
    thread = read["crashed_thread"]
    assert thread["comm"] == "insmod"
    functions = [frame["function"] for frame in thread["frames"]]
    assert FUNCTION in functions, functions
    assert "BUG: kernel NULL pointer dereference" in read["dmesg"]
    assert read["debug_info"]["kernel"]["from"] == "debug_dir"
    assert [(m["name"], m["from"]) for m in read["debug_info"]["modules"]] == [("crashlab", "debug_dir")]

    crash_kernel_event = capture_lab.event_of(boot_report_id(first))
    assert (answer["report_id"], answer["event_id"]) == (f"dpu-{first.boot_id}", crash_kernel_event["id"])
    stored = capture_lab.stored_report(answer["report_id"])
    assert stored["source"] == "dpu"
    joined = capture_lab.registry.get(f"/api/v1/events/{crash_kernel_event['id']}")
    assert joined["sources"] == ["crash_kernel", "dpu"]
    assert sorted(r["report_id"] for r in joined["reports"]) == sorted(
        [f"dpu-{first.boot_id}", boot_report_id(first)]
    )


def build_id_of(path: Path) -> str:
    notes = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)


@pytest.fixture(scope="module")
def kernel_symbols(capture_lab: Lab) -> dict[str, str]:
    """The -dbg package's vmlinux and the module (with its debug info) uploaded as a build
    pipeline does, `crashreg symbols upload` with a symbols token; their build-ids."""
    vmlinux, module = debug_vmlinux(capture_lab.kit.release), capture_lab.module
    token = capture_lab.out / "symbols-token"
    token.write_text(capture_lab.registry.tokens["symbols"])
    upload = subprocess.run(
        [str(Path(sys.executable).with_name("crashreg")), "symbols", "upload", "--registry",
         capture_lab.registry.url, "--token-file", str(token), str(vmlinux), str(module)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert upload.returncode == 0, upload.stdout + upload.stderr
    ids = {"vmlinux": build_id_of(vmlinux), "module": build_id_of(module)}
    for build_id, path in ((ids["vmlinux"], vmlinux), (ids["module"], module)):
        assert f"{build_id} {path}: stored as debuginfo, executable" in upload.stdout, upload.stdout
    return ids


def dpu_by_debuginfod(
    capture_lab: Lab, installed: Path, vmcore: Path, out: Path, cache: Path, read_token: bool = True
) -> dict[str, Any]:
    """The DPU agent on a vmcore with no debug directory: its debug info from the registry's
    /debuginfod/ into CACHE, with a read token of its own (its report token is never sent there),
    or with none (the registry refuses it)."""
    settings = {"CRASHREG_DEBUGINFOD_CACHE": str(cache)}
    if read_token:
        out.mkdir(parents=True, exist_ok=True)
        (out / "read-token").write_text(capture_lab.registry.tokens["read"])
        settings["CRASHREG_DEBUGINFOD_TOKEN_FILE"] = str(out / "read-token")
    return run_dpu(capture_lab, installed, vmcore, out, **settings)


@pytest.fixture(scope="module")
def dpu_by_build_id(
    capture_lab: Lab, series, installed: Path, kernel_symbols: dict[str, str]
) -> dict[str, Any]:
    """The DPU agent on the second crash's vmcore, its debug info fetched by build-id."""
    second = series["host"].boots[1]
    vmcore = series["host"].disk.extract(f"/crash/{second.boot_id}/vmcore", capture_lab.out / "second.vmcore")
    out = capture_lab.out / "dpu-debuginfod"
    dpu = dpu_by_debuginfod(capture_lab, installed, vmcore, out, out / "cache")
    assert dpu["returncode"] in (0, 10), dpu["stderr"]
    return dpu | {"boot": second, "cache": out / "cache"}


def test_dpu_without_debug_files_fetches_the_kernels_and_modules_debug_info_by_build_id(
    capture_lab: Lab, series, kernel_symbols: dict[str, str], dpu_by_build_id: dict[str, Any]
) -> None:
    read, second = dpu_by_build_id["record"], dpu_by_build_id["boot"]
    vmlinux_id, module_id = kernel_symbols["vmlinux"], kernel_symbols["module"]
    # The kernel's build-id from the vmcore's VMCOREINFO is the -dbg vmlinux's, and what drgn
    # read needed it: the host's identity and log from the kernel's symbols and types.
    assert read["kernel_build_id"] == vmlinux_id
    assert read["debug_info"] == {
        "kernel": {"build_id": vmlinux_id, "from": "debuginfod"},
        "modules": [{"name": "crashlab", "build_id": module_id, "from": "debuginfod"}],
    }
    assert (read["hostname"], read["boot_id"], read["kernel_release"]) == (
        series["host"].name, second.boot_id, capture_lab.kit.release)
    assert "BUG: kernel NULL pointer dereference" in read["dmesg"]
    # The module's frame is named from its debug info, fetched by the build-id read from the
    # module's notes in host memory (without it drgn shows a bare address).
    frames = read["crashed_thread"]["frames"]
    assert frames[0]["function"] == FUNCTION, frames
    # named the way the console's Call Trace names it, `[crashlab]`: by the module's memory
    assert frames[0]["module"] == "crashlab", frames
    vmlinux = debug_vmlinux(capture_lab.kit.release)
    for build_id, uploaded in ((vmlinux_id, vmlinux), (module_id, capture_lab.module)):
        cached = dpu_by_build_id["cache"] / build_id / "debuginfo"
        assert cached.stat().st_size == uploaded.stat().st_size
    assert "HTTP 40" not in dpu_by_build_id["stderr"]

    # The report carries the build-id and what was used; so does the crash kernel's (the sh
    # reporter read it from the head of the crash kernel's /proc/vmcore), and they join.
    dpu_report = capture_lab.stored_report(dpu_by_build_id["answer"]["report_id"])
    assert dpu_report["payload"]["kernel_build_id"] == vmlinux_id
    assert dpu_report["payload"]["dpu"]["debug_info"] == read["debug_info"]
    crash_kernel = capture_lab.stored_report(boot_report_id(second))
    assert crash_kernel["payload"]["kernel_build_id"] == vmlinux_id
    assert dpu_report["event_id"] == crash_kernel["event_id"]


def agents_md_commands(agents_md: str) -> list[str]:
    """The shell commands AGENTS.md gives for the dumps (its ```sh block)."""
    section = agents_md.split("## The dumps: debug info and drgn", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_triage_workspace_fetches_the_kernels_debug_info_from_the_registry_and_opens_the_labs_dump(
    capture_lab: Lab, series, kernel_symbols: dict[str, str], dpu_by_build_id: dict[str, Any], tmp_path: Path
) -> None:
    host: Host = series["host"]
    release = capture_lab.kit.release
    out = tmp_path / "bundle"
    env = dict(os.environ, CRASHREG_DATABASE_URL=capture_lab.registry.database_url,
               CRASHREG_PUBLIC_URL=capture_lab.registry.url)
    made = subprocess.run(
        [
            str(Path(sys.executable).with_name("crashreg")),
            "triage-bundle",
            series["signature_id"],
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    bundle = json.loads((out / "bundle.json").read_text())
    [debuginfo] = bundle["debuginfo"]
    assert debuginfo["debug_packages"] == [f"linux-image-{release}-dbg"]
    assert len(bundle["dumps"]) == K_MORE + 1  # the completed full captures
    assert {(out / name).exists() for name in ("setup.sh", "inspect-dump.py", "Containerfile")} == {True}

    # The crashed host's filesystem as the workspace sees it: its /var is the lab disk.
    root = tmp_path / "host-root"
    for booted in host.boots[: K_MORE + 1]:
        target = root / "var" / "crash" / booted.boot_id / "vmcore"
        target.parent.mkdir(parents=True)
        host.disk.extract(f"/crash/{booted.boot_id}/vmcore", target)
    # Every crash kernel's report carried the kernel's build-id; the DPU's reports, the module's.
    assert {dump["kernel_build_id"] for dump in bundle["dumps"]} == {kernel_symbols["vmlinux"]}
    module = {"name": "crashlab", "build_id": kernel_symbols["module"],
              "debug": f"debug/{release}/modules/crashlab.ko"}
    dpu_event = str(capture_lab.stored_report(dpu_by_build_id["answer"]["report_id"])["event_id"])
    assert [d["modules"] for d in bundle["dumps"] if d["event_id"] == dpu_event] == [[module]]
    assert all(d["modules"] in ([], [module]) for d in bundle["dumps"])

    commands = agents_md_commands((out / "AGENTS.md").read_text())
    assert commands[0] == "sh setup.sh"
    assert commands[1:] == [dump["drgn"] for dump in bundle["dumps"]]
    env = dict(
        os.environ,
        CRASHREG_DUMP_ROOT=str(root),
        CRASHREG_WORKSPACE_DEBS=str(cache_dir() / "debs"),  # the kernel's source package
        CRASHREG_TOKEN=capture_lab.registry.tokens["read"],
        PATH=f"/usr/bin:/bin:{os.environ['PATH']}",
    )
    # setup.sh, then the first dump's drgn command (each drgn run loads the 590 MB vmlinux:
    # one shows the workspace works; the others differ only in the dump file setup.sh linked).
    runs = []
    for command in commands[:2]:
        done = subprocess.run(
            command, shell=True, cwd=out, capture_output=True, text=True, env=env, timeout=900
        )
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
        runs.append(done)
    setup_done = runs[0]
    assert all((out / dump["dump"]).resolve().is_file() for dump in bundle["dumps"])
    # The vmlinux and the module's debug info came from the registry's /debuginfod/, not the
    # -dbg package, and are the files uploaded.
    setup = setup_done.stderr
    fetched = f"debug/{release}/vmlinux from the registry's debuginfod (build-id {kernel_symbols['vmlinux']})"
    assert fetched in setup, setup
    assert f"debug/{release}/modules/crashlab.ko from the registry's debuginfod" in setup
    assert (out / "debug" / release / "vmlinux").stat().st_size == debug_vmlinux(release).stat().st_size
    assert (out / module["debug"]).read_bytes() == capture_lab.module.read_bytes()
    # The exact source: the tree of the very build that crashed (its oops names the build,
    # `#1 SMP ... Debian 6.1.192-3`; gcc's `Debian 12.2.0-14+deb12u1` is not it), with the
    # files a frame's file:line would name.
    logs = [(out / e["console_log_file"]).read_text() for e in bundle["events"] if e["console_log_file"]]
    build = next(m for log in logs for m in [re.search(r"Debian (\d+)\.(\d+)\.(\d+)-\d+(?![+\w])", log)] if m)
    makefile = (out / "src" / release / "Makefile").read_text()
    assert [re.search(rf"^{name} = (\d+)$", makefile, re.M).group(1)
            for name in ("VERSION", "PATCHLEVEL", "SUBLEVEL")] == list(build.groups())
    assert (out / "src" / release / "kernel" / "panic.c").is_file()
    assert f"kernel release: {release}" in done.stdout
    assert "panicking task: pid" in done.stdout and "(insmod)" in done.stdout
    stack, tail = done.stdout.split("kernel log, last", 1)
    # The faulting frame, named from the module's debug info setup.sh fetched (its init frames
    # stay bare addresses: drgn 0.0.22 maps no .init.text of a module still in its init function).
    assert f"#0  {FUNCTION} (" in stack, stack
    assert "BUG: kernel NULL pointer dereference" in tail and f"RIP: 0010:{FUNCTION}+" in tail, tail


# The stack of `echo c > /proc/sysrq-trigger` as the crash notes saved it (in __crash_kexec),
# innermost first, all vmlinux's, each frame (function, inline): a real frame by its symbol, as
# the console's Call Trace names it (`__handle_sysrq.cold`); an inlined call by its own name,
# before its caller's frame; last the shell's user-space pc the syscall came from (no name).
SYSRQ_STACK = [("crash_setup_regs", True), ("__crash_kexec", False), ("panic", False),
               ("sysrq_handle_crash", False), ("__handle_sysrq.cold", False), ("write_sysrq_trigger", False),
               ("pde_write", True), ("proc_reg_write", False), ("vfs_write", False), ("ksys_write", False),
               ("do_syscall_x64", True), ("do_syscall_64", False), ("entry_SYSCALL_64", False), (None, False)]


@pytest.fixture(scope="module")
def sysrq_crash(capture_lab: Lab) -> dict[str, Any]:
    """lab-host-3 (a host of its own: the series' counts stay) crashes through sysrq; a new
    signature, so its crash kernel dumps it whole."""
    host = capture_lab.host("lab-host-3")
    booted = capture_lab.crash(host, "sysrq")
    vmcore = host.disk.extract(f"/crash/{booted.boot_id}/vmcore", capture_lab.out / "sysrq.vmcore")
    return {"host": host, "boot": booted, "vmcore": vmcore}


def test_dpu_names_the_vmlinux_frames_of_a_sysrq_crash_from_the_fetched_vmlinux(
    capture_lab: Lab, installed: Path, kernel_symbols: dict[str, str], dpu_by_build_id: dict[str, Any],
    sysrq_crash: dict[str, Any],
) -> None:
    booted = sysrq_crash["boot"]
    assert decided_args(booted) == (0, "-l -d 0")
    event = capture_lab.event_of(boot_report_id(booted))
    assert event["capture"]["action"] == "full" and event["capture"]["reason"].startswith("new signature")
    assert "sysrq_handle_crash" in capture_lab.stored_report(boot_report_id(booted))["console_log"]

    # The vmlinux uploaded for the first series, fetched by the second crash's DPU run: its cache.
    out = capture_lab.out / "dpu-sysrq"
    named = dpu_by_debuginfod(capture_lab, installed, sysrq_crash["vmcore"], out, dpu_by_build_id["cache"])
    assert named["returncode"] in (0, 10), named["stderr"]
    read = named["record"]
    assert read["debug_info"]["kernel"] == {"build_id": kernel_symbols["vmlinux"], "from": "debuginfod"}
    assert (read["hostname"], read["boot_id"]) == (sysrq_crash["host"].name, booted.boot_id)
    thread = read["crashed_thread"]
    assert thread["comm"] == "init", thread  # first-init.sh's shell wrote to /proc/sysrq-trigger
    frames = thread["frames"]
    assert [(frame["function"], frame["inline"]) for frame in frames] == SYSRQ_STACK, frames
    # An inlined call shares its caller's address and has no offset of its own; the real frames
    # below panic have the offsets the kernel's own Call Trace printed (`proc_reg_write+0x56/`).
    for inlined, caller in itertools.pairwise(frames):
        if inlined["inline"]:
            assert (inlined["offset"], inlined["address"]) == (None, caller["address"]), frames
    trace = capture_lab.stored_report(boot_report_id(booted))["console_log"].split("Call Trace:", 1)[1]
    called = [frame for frame in frames if not frame["inline"]]
    names = [frame["function"] for frame in called]
    for frame in called[names.index("sysrq_handle_crash") : names.index("entry_SYSCALL_64")]:
        assert f" {frame['function']}+{frame['offset']}/" in trace, (frame, trace)
    assert int(frames[-1]["address"], 16) < 1 << 47, frames  # the user-space pc
    assert named["answer"]["event_id"] == event["id"]

    # The same vmcore, the registry refusing the DPU (no read token), an empty cache: drgn finds
    # no vmlinux anywhere else, and without it the agent can read nothing, not even the host's
    # name: one line says where it looked, exit 4, no report (the crash kernel's is the one).
    refused = dpu_by_debuginfod(capture_lab, installed, sysrq_crash["vmcore"], out / "refused",
                                out / "refused" / "cache", read_token=False)
    build_id, release = kernel_symbols["vmlinux"], capture_lab.kit.release
    assert (refused["returncode"], refused["record"]) == (4, None), refused["stderr"]
    assert "Traceback" not in refused["stderr"], refused["stderr"]
    assert refused["stderr"].splitlines()[-1] == (
        f"crashreg-report: no debug info for the host's kernel {release} (build-id {build_id}): "
        "no debug dir (--debug-dir, CRASHREG_DPU_DEBUG_DIR); "
        f"debuginfod {capture_lab.registry.url}/debuginfod/buildid/{build_id}/debuginfo: HTTP 401 "
        "(no credential: CRASHREG_DEBUGINFOD_TOKEN_FILE names a read token); "
        f"drgn: could not find vmlinux for {release}; nothing reported (the crash kernel reports this crash)"
    ), refused["stderr"]
