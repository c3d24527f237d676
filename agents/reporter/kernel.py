"""What a crash kernel reads and does: the crashed kernel's log and command line, its report,
and the core collector (makedumpfile with the decided arguments, then the capture)."""

from __future__ import annotations

import os
import shlex
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.reporter.captures import record_capture
from agents.reporter.config import Config, parse_conf
from agents.reporter.log import log
from agents.reporter.report import (
    TIME_FORMAT,
    cmdline_values,
    console_report,
    hostname_of,
    log_kernel_version,
    tail_text,
    utc_now,
)
from agents.reporter.vmcoreinfo import crash_time, kernel_build_id, read_vmcoreinfo


def read_kernel_log(config: Config) -> str:
    """The crashed kernel's log (dmesg file, makedumpfile --dump-dmesg, vmcore-dmesg), tail-capped."""
    if config.dmesg_file:
        try:
            return tail_text(Path(config.dmesg_file).read_bytes(), config.max_log_bytes)
        except OSError as error:
            log(f"could not read the kernel log: {error}")
            return ""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="crashreg.") as work:
        out = Path(work) / "dmesg"
        extractors = (
            ([config.makedumpfile, "--dump-dmesg", config.vmcore, str(out)], out),
            ([config.vmcore_dmesg, config.vmcore], None),
        )
        for command, target in extractors:
            try:
                done = subprocess.run(command, capture_output=True, timeout=300, check=False)
            except (OSError, subprocess.TimeoutExpired):
                continue
            raw = target.read_bytes() if target and target.exists() else done.stdout
            if done.returncode == 0 and raw:
                return tail_text(raw, config.max_log_bytes)
    log(f"could not read the kernel log from {config.vmcore}")
    return ""


def crash_kernel_report(config: Config, console_log: str) -> dict[str, Any]:
    """The contract's report from a crash kernel, keyed by the crashed boot."""
    import uuid

    params = cmdline_values(config.cmdline)
    hostname = hostname_of(config.hostname, params.get("hostname"))
    boot_id = params.get("boot_id")
    kernel_version = params.get("kernel") or log_kernel_version(console_log) or os.uname().release
    report_id = f"kdump-{boot_id or f'{hostname}-{uuid.uuid4()}'}"
    info = read_vmcoreinfo(config.vmcore)
    build_id = kernel_build_id(info)
    crashed = crash_time(info, datetime.now(UTC))
    crashed_at = crashed.strftime(TIME_FORMAT) if crashed else utc_now()
    return console_report(report_id, "crash_kernel", crashed_at, hostname, kernel_version, boot_id,
                          console_log, **({"kernel_build_id": build_id} if build_id else {}))


def crash_kernel_uptime() -> float | None:
    """Seconds the host has spent in the crash kernel: the downtime so far."""
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


COMMAND_NOT_FOUND = 127  # the exit status a shell gives a command it cannot run


def collect(config: Config, arguments: list[str]) -> int:
    """Core collector: makedumpfile with the decided arguments (then `arguments`), then record
    the capture; makedumpfile's exit status."""
    try:
        decided = parse_conf(Path(config.decision_file).read_text())
    except OSError:
        decided = {}
    if decided.get("CRASHREG_ACTION") == "skip":
        log("registry decision is skip: no dump")
        return 0
    fallback = [*shlex.split(config.compression), "-d", str(config.filtered_level)]
    decided_args = shlex.split(decided.get("CRASHREG_MAKEDUMPFILE_ARGS", "")) or fallback
    started = time.monotonic()
    import subprocess

    try:
        returncode = subprocess.run([config.makedumpfile, *decided_args, *arguments], check=False).returncode
    except OSError as error:  # not installed, not executable: a failed capture, as a shell would say
        log(f"could not run {config.makedumpfile}: {error}")
        returncode = COMMAND_NOT_FOUND
    report_id = decided.get("CRASHREG_REPORT_ID")
    if not report_id:
        return returncode
    target = arguments[-1] if arguments and arguments[-1] not in (config.vmcore, "/proc/vmcore") else None
    level = decided_args[decided_args.index("-d") + 1] if "-d" in decided_args else None
    capture = {
        "method": "makedumpfile",
        "status": "completed" if returncode == 0 else "failed",
        "dump_level": int(level) if level else None,
        "bytes": Path(target).stat().st_size if target and Path(target).exists() else None,
        "duration_s": round(time.monotonic() - started, 3),
        "downtime_s": crash_kernel_uptime(),
        "target": target,
        "capture_key": f"{report_id}-makedumpfile",
    }
    record_capture(config, report_id, decided.get("CRASHREG_EVENT_ID") or None, capture,
                   upload_now=config.kdump_upload == "now")
    return returncode
