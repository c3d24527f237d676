#!/usr/bin/env python3
"""DPU agent reporter: report a host's panic from the DPU, before its crash kernel is up.

A DPU with access to the host's memory runs a drgn session against it and reads what the
crash kernel would take minutes to reach: the kernel log, the crashed thread's stack, the
panic CPU and taint, and the identity of the crashed boot (hostname, boot_id, release from
the host kernel's own structures). This reports that at once as `source: dpu`; the crash
kernel's report later carries the same hostname and boot_id and joins the same event.

drgn is optional: `read_host(prog)` needs it, and `--save-record` keeps what it read as
JSON; `report --record FILE` reports from such a recording (how the tests drive it).
Sending, spooling and the capture decision are the reporter's (crashreg-report.pyz), imported.

    crashreg_dpu.py report --core /dev/host-memory [--save-record F]   read with drgn, report
    crashreg_dpu.py report --record F                                 report a recording
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

# Installed, the reporter is crashreg-report.pyz beside this directory; in a checkout, agents/.
_HOME = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_HOME / "crashreg-report.pyz"), str(_HOME)]
import crashreg_report as reporter  # noqa: E402

MAX_FRAMES = 64


def _text(value: Any) -> str:
    return value.string_().decode("utf-8", "replace")


def read_host(prog: Any) -> dict[str, Any]:
    """What the drgn session reads from the host kernel, as plain JSON-able data."""
    from drgn.helpers.linux.printk import get_dmesg

    uts = prog["init_uts_ns"].name
    bootid = prog["sysctl_bootid"]
    return {
        "hostname": _text(uts.nodename),
        "kernel_release": _text(uts.release),
        "boot_id": str(uuid.UUID(bytes=prog.read(bootid.address_, 16))),
        "panic_cpu": prog["panic_cpu"].counter.value_(),
        "tainted_mask": prog["tainted_mask"].value_(),
        "dmesg": get_dmesg(prog).decode("utf-8", "replace"),
        "crashed_thread": _crashed_thread(prog),
    }


def _crashed_thread(prog: Any) -> dict[str, Any] | None:
    """The panicking task and its stack: from the core's crash notes, else the panic CPU's task."""
    from drgn.helpers.linux.sched import cpu_curr

    try:
        thread = prog.crashed_thread()
        task, trace = thread.object, thread.stack_trace()
    except (LookupError, ValueError):
        panic_cpu = prog["panic_cpu"].counter.value_()
        if panic_cpu < 0:
            return None
        task = cpu_curr(prog, panic_cpu)
        try:
            trace = prog.stack_trace(task)
        except (LookupError, ValueError):
            trace = []
    frames = [_frame(prog, frame) for frame in list(trace)[:MAX_FRAMES]]
    return {"pid": task.pid.value_(), "comm": _text(task.comm), "frames": frames}


def _frame(prog: Any, frame: Any) -> dict[str, Any]:
    """One frame in the contract's shape: function, module, offset, address."""
    pc = frame.pc
    try:
        symbol = frame.symbol()
        function, offset = symbol.name, hex(pc - symbol.address)
    except LookupError:
        function, offset = None, None
    try:
        module = prog.module(pc).name
    except (LookupError, AttributeError):
        module = None
    return {
        "function": function,
        "module": None if module in (None, "kernel", "vmlinux") else module,
        "offset": offset,
        "address": hex(pc),
    }


def dpu_report(record: dict[str, Any], config: reporter.Config) -> dict[str, Any]:
    """The contract's report for what the DPU read; keyed by the crashed boot like kdump's."""
    console_log = reporter.tail_text(record.get("dmesg", "").encode(), config.max_log_bytes)
    boot_id = record.get("boot_id")
    suffix = boot_id or f"{record['hostname']}-{uuid.uuid4()}"
    return {
        "report_id": reporter.safe_report_id(f"dpu-{suffix}"),
        "source": "dpu",
        "crashed_at": record.get("read_at") or reporter.utc_now(),
        "host": {"hostname": record["hostname"], "kernel_version": record.get("kernel_release")},
        "boot_id": boot_id,
        "uptime_s": reporter.log_uptime(console_log),
        "fingerprint": reporter.local_fingerprint(console_log),
        "console_log": console_log,
        # Kernel frames stay out of `stack` (the contract's userspace stack) but are kept
        # with the stored report for triage.
        "dpu": {
            "agent": socket.gethostname(),
            "panic_cpu": record.get("panic_cpu"),
            "tainted_mask": record.get("tainted_mask"),
            "crashed_thread": record.get("crashed_thread"),
        },
    }


def command_report(config: reporter.Config, args: argparse.Namespace) -> int:
    if args.record:
        record = json.loads(Path(args.record).read_text())
    else:
        import drgn

        record = read_host(drgn.program_from_core_dump(args.core))
        record["read_at"] = reporter.utc_now()
    if args.save_record:
        Path(args.save_record).write_text(json.dumps(record, indent=1))
    report = dpu_report(record, config)
    decision = reporter.decide(config, report)
    print(json.dumps({"report_id": report["report_id"], "event_id": decision.event_id,
                      "action": decision.action, "dump_level": decision.dump_level,
                      "reason": decision.reason, "decided_by": decision.decided_by}))
    return reporter.EXIT_SKIP if decision.action == "skip" else reporter.EXIT_DUMP


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="default: $CRASHREG_CONF, else /etc/crashreg/reporter.conf")
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="report the host's crash as source dpu")
    source = report.add_mutually_exclusive_group(required=True)
    source.add_argument("--core", help="host memory as drgn opens it (core dump or memory device)")
    source.add_argument("--record", help="a recorded drgn session (JSON from --save-record)")
    report.add_argument("--save-record", help="write what was read to this JSON file")
    args = parser.parse_args(argv)
    return command_report(reporter.Config.load(args.config), args)


if __name__ == "__main__":
    sys.exit(main())
