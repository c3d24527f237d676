#!/usr/bin/env python3
"""crashreg reporter: one stdlib-only zipapp for crash kernels, post-boot agents and DPU agents.

The commands only: what each does is in the toolkit (agents/reporter), the kernel log watcher
and pstore reader (agents/kernellog), the core handler (agents/coredump) and the DPU agent
(agents/dpu), zipped with the registry's own fingerprint engine (registry.fingerprint) into
crashreg-report.pyz by `make reporter`, so an offline decision matches bundle entries exactly.

    crashreg-report.pyz report [--dmesg-file F]   crash kernel: decide, print makedumpfile args
    crashreg-report.pyz collect ARGS...           core collector: makedumpfile, capture recorded
    crashreg-report.pyz post-boot                 resend every spooled report and capture, pstore
    crashreg-report.pyz fetch-bundle              refresh the offline bundle (JSON and text)
    crashreg-report.pyz fingerprint FILE...       local fingerprint of console logs / reports
    crashreg-report.pyz watch [--once]            report a running kernel's oopses and warnings
    crashreg-report.pyz core --core FILE [--exe EXE] [--crashed-at T] [--started-at T]  a core on disk
    crashreg-report.pyz core --pipe %P %I %s ...      kernel.core_pattern handler (core on stdin)
    crashreg-report.pyz dpu report --core MEM | --record F   a host's panic read over the DPU (drgn)

Configuration: /etc/crashreg/reporter.conf (or $CRASHREG_CONF), KEY=VALUE lines shared with
the sh reporter; see agents/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from agents.reporter import EXIT_DUMP, EXIT_SKIP, EXIT_UNSENT
from agents.reporter.config import Config
from agents.reporter.log import log

# Each command imports what it uses: a core handler's time to its answer is mostly imports
# (bench/README.md, core handler), and it needs neither the spool's resend nor the watcher.


def command_report(config: Config, args: argparse.Namespace) -> int:
    """Never fails closed: whatever breaks, the kdump tooling still gets a dump decision."""
    from agents.reporter.decide import decide_or_fall_back, fall_back, write_decision
    from agents.reporter.kernel import crash_kernel_report, read_kernel_log

    if args.dmesg_file:
        config.dmesg_file = args.dmesg_file
    try:
        report = crash_kernel_report(config, read_kernel_log(config))
    except Exception as error:  # the crash kernel must dump rather than die here
        report, decision = {"report_id": ""}, fall_back(config, error)
    else:
        decision = decide_or_fall_back(config, report)
    print(write_decision(config, decision, report["report_id"]))
    return EXIT_SKIP if decision.action == "skip" else EXIT_DUMP


def command_collect(config: Config, args: argparse.Namespace) -> int:
    from agents.reporter.kernel import collect

    return collect(config, args.args)


def command_post_boot(config: Config, args: argparse.Namespace) -> int:
    from agents.kernellog import pstore
    from agents.reporter.postboot import resend_spooled

    summary = resend_spooled(config)
    log(f"resent {summary.sent}, kept {summary.kept} for later, rejected {summary.rejected}")
    # pstore's records wait (in pstore) while a crash report is still spooled: see PSTORE_REPORT_PREFIX.
    unsent = pstore.report_records(config, hold=summary.reports_kept > 0)
    return EXIT_UNSENT if summary.kept or unsent else 0


def command_watch(config: Config, args: argparse.Namespace) -> int:
    from agents.kernellog import watch

    if args.kmsg:
        config.kmsg = args.kmsg
    return watch.run(config, once=args.once)


def command_fetch_bundle(config: Config, args: argparse.Namespace) -> int:
    from agents.reporter.bundle import fetch_bundle
    from agents.reporter.client import Unsent

    try:
        changed = fetch_bundle(config)
    except (Unsent, OSError) as error:
        log(str(error))
        return EXIT_UNSENT
    log("policy bundle updated" if changed else "policy bundle unchanged")
    return 0


def command_fingerprint(config: Config, args: argparse.Namespace) -> int:
    from agents.reporter.report import fingerprint_input, local_fingerprint

    for name in args.files:
        print(local_fingerprint(*fingerprint_input(Path(name).read_bytes(), config.max_log_bytes)) or "")
    return 0


def command_core(config: Config, args: argparse.Namespace) -> int:
    return command_core_pipe(config, args) if args.pipe else command_core_file(config, args)


def command_core_pipe(config: Config, args: argparse.Namespace) -> int:
    """Pipe mode, the kernel's core_pattern handler: coredump/pipe.py (agents/README.md)."""
    from agents.coredump import pipe
    from agents.reporter.captures import record_capture, record_removed
    from agents.reporter.decide import decide_or_fall_back

    config.deadline = config.core_deadline  # the dying process is held until the answer
    return pipe.handle(
        args.pipe,
        config,
        lambda report: decide_or_fall_back(config, report),
        lambda report_id, event_id, capture: record_capture(config, report_id, event_id, capture),
        lambda capture_keys: record_removed(config, capture_keys),
    )


def command_core_file(config: Config, args: argparse.Namespace) -> int:
    """File mode: report a core on disk and print the decision (exit 10: skip, the core can
    go). A core that cannot be read is an error (exit 1): there is nothing to report."""
    from agents.coredump.filemode import BadTime, core_file_reading, files_not_here
    from agents.reporter.decide import decide_or_fall_back
    from agents.reporter.report import hostname_of

    try:
        report, analysis = core_file_reading(args.core, hostname_of(config.hostname), args.exe,
                                             args.crashed_at, args.started_at)
    except BadTime as error:
        log(f"core {args.core}: {error}")
        return 2
    except Exception as error:  # a broken or hostile core: say so, never a traceback
        log(f"cannot read the core {args.core}: {type(error).__name__}: {error}")
        return 1
    for problem in files_not_here(analysis, args.exe):
        log(f"core {args.core}: {problem}")
    if analysis.missing_bytes:
        log(f"the core {args.core} was cut short: {analysis.missing_bytes} of its {analysis.memory_bytes} "
            "bytes of memory are missing (a disk that filled up?); its stack is read from what is there, "
            "and it is recorded as a failed capture")
    decision = decide_or_fall_back(config, report)
    if decision.action != "skip":  # kept: the core on disk is this crash's capture
        record_kept_core(config, report["report_id"], decision.event_id, args.core,
                         complete=not analysis.missing_bytes)
    level = f" (dump level {decision.dump_level})" if decision.dump_level is not None else ""
    again = " (sent before: the registry's first answer)" if decision.duplicate else ""
    title = (decision.signature or {}).get("title")
    bug = f" ({title})" if title else ""
    log(f"{report['report_id']}: {decision.action}{level} by {decision.decided_by}: {decision.reason}"
        f"{again}{bug}")
    print(json.dumps({"report_id": report["report_id"], "fingerprint": report.get("fingerprint"),
                      "action": decision.action, "dump_level": decision.dump_level,
                      "decided_by": decision.decided_by, "event_id": decision.event_id,
                      "duplicate": decision.duplicate, "signature": decision.signature}))
    return EXIT_SKIP if decision.action == "skip" else EXIT_DUMP


def record_kept_core(config: Config, report_id: str, event_id: str | None, core: str, complete: bool) -> None:
    """File mode: a core the decision keeps is recorded as the event's capture where it lies
    (once per report: its capture_key), so the event's page says where it is and the capture
    budget counts it; with CRASHREG_UPLOAD_DUMPS it goes to the dump store, as a handler's. A
    core cut short (not `complete`) is a failed capture: the crash's next core is taken."""
    from agents.reporter.captures import record_capture

    path = Path(core).resolve()
    capture = {"method": "core", "status": "completed" if complete else "failed",
               "bytes": path.stat().st_size, "target": str(path), "capture_key": f"{report_id}-core"}
    try:
        record_capture(config, report_id, event_id, capture)
    except Exception as error:  # the decision stands: a record that could not be made is said
        log(f"capture of {path} not recorded: {type(error).__name__}: {error}")


def command_dpu(config: Config, args: argparse.Namespace) -> int:
    from agents.dpu.report import command_report as dpu_report

    return dpu_report(config, args)


COMMANDS = {
    "report": command_report,
    "collect": command_collect,
    "post-boot": command_post_boot,
    "fetch-bundle": command_fetch_bundle,
    "fingerprint": command_fingerprint,
    "watch": command_watch,
    "core": command_core,
    "dpu": command_dpu,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    top.add_argument("--config", help="default: $CRASHREG_CONF, else /etc/crashreg/reporter.conf")
    sub = top.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="crash kernel: report, decide, print makedumpfile args")
    report.add_argument("--dmesg-file", help="read the kernel log from this file, not the vmcore")
    sub.add_parser("collect", help="core collector: makedumpfile with the decided arguments, then ARGS",
                   usage="%(prog)s [makedumpfile's arguments, options included]",
                   description="kdump's core collector: runs makedumpfile (CRASHREG_MAKEDUMPFILE) with the "
                   "decision's arguments (the dump level; no dump for a skip) before the arguments given, "
                   "e.g. `collect -l --message-level 7 /proc/vmcore /var/crash/vmcore`, then records the "
                   "capture and uploads the dump per CRASHREG_KDUMP_UPLOAD.")
    sub.add_parser("post-boot", help="resend spooled reports and captures, report pstore's records")
    sub.add_parser("fetch-bundle", help="refresh the offline policy bundle")
    fingerprint = sub.add_parser("fingerprint", help="print the local fingerprint of console logs "
                                 "or JSON report files, one line each (empty: no crash)")
    fingerprint.add_argument("files", nargs="+")
    watch = sub.add_parser("watch", help="report the running kernel's oopses and warnings (kmsg)")
    watch.add_argument("--kmsg", help="kmsg records to follow (default: CRASHREG_KMSG, /dev/kmsg)")
    watch.add_argument("--once", action="store_true", help="stop at the end of a file of records")
    core = sub.add_parser("core", help="report a userspace core: a file (file mode, prints the decision) "
                          "or stdin as kernel.core_pattern pipes it (pipe mode)")
    source = core.add_mutually_exclusive_group(required=True)
    source.add_argument("--core", help="an ELF core file")
    source.add_argument("--pipe", nargs="+", metavar="VALUE",
                        help="the core on stdin, and the values of %%P %%I %%s %%t %%c %%u %%g %%d %%h %%E")
    core.add_argument("--exe", help="the program's file, when not at the path the core names")
    core.add_argument("--crashed-at", metavar="WHEN", help="file mode: when it crashed (ISO 8601 or @EPOCH; "
                      "default: systemd-coredump's user.coredump.timestamp, else the core's mtime)")
    core.add_argument("--started-at", metavar="WHEN", help="file mode: when the process started (ISO 8601 "
                      "or @EPOCH): the report then carries its start and its uptime at the crash")
    dpu = sub.add_parser("dpu", help="DPU agent: report a host's panic read with drgn (run by a python3 "
                         "that has drgn)")
    dpu_report = dpu.add_subparsers(dest="dpu_command", required=True).add_parser(
        "report", help="report the host's crash as source dpu")
    memory = dpu_report.add_mutually_exclusive_group(required=True)
    memory.add_argument("--core", help="host memory as drgn opens it (core dump or memory device)")
    memory.add_argument("--record", help="a recorded drgn session (JSON from --save-record)")
    dpu_report.add_argument("--debug-dir", help="DIR/<release>/ holds each kernel release's vmlinux "
                            "(default: CRASHREG_DPU_DEBUG_DIR, else drgn's own search paths)")
    dpu_report.add_argument("--save-record", help="write what was read to this JSON file")
    return top


# What the reporter writes (reports, cores and their copies, upload states) holds a kernel log
# or a process's memory: readable by root alone, whatever umask it was started with (the
# kernel starts a core_pattern helper with 0022).
PRIVATE_UMASK = 0o077


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.umask(PRIVATE_UMASK)
    # Everything after `collect` is makedumpfile's, options included (but `collect --help`).
    collect = argv.index("collect") + 1 if "collect" in argv else None
    split = len(argv) if collect is None or argv[collect:] in (["--help"], ["-h"]) else collect
    args = parser().parse_args(argv[:split])
    args.args = argv[split:]
    return COMMANDS[args.command](Config.load(args.config), args)


if __name__ == "__main__":
    sys.exit(main())
