"""DPU agent reporter: report a host's panic from the DPU, before its crash kernel is up.

A DPU with access to the host's memory runs a drgn session against it and reads what the
crash kernel would take minutes to reach: the kernel log, the crashed thread's stack, the
panic CPU and taint, and the identity of the crashed boot (hostname, boot_id, release from
the host kernel's own structures). This reports that at once as `source: dpu`; the crash
kernel's report later carries the same hostname and boot_id and joins the same event.

drgn is optional: `read_host(prog)` needs it, and `--save-record` keeps what it read as
JSON; `report --record FILE` reports from such a recording (how the unit tests drive it;
tests/lab drives it on real vmcores). Sending, spooling and the capture decision are the
reporter's toolkit (agents/reporter), imported as a package: the agent is the reporter's
`dpu` command, run by a python3 that has drgn.

A DPU holds no debug info for its hosts' kernels, and drgn's default search paths are the
DPU's own. The kernel's debug info is found, in this order: `--debug-dir DIR` (or
CRASHREG_DPU_DEBUG_DIR) when it has `DIR/<release>/` for the core's release (read from its
VMCOREINFO), whose ELF files (the release's vmlinux, and any module .ko with debug info) are
loaded; else the vmlinux fetched by the core's kernel build-id (VMCOREINFO's BUILD-ID=) from
debuginfod (agents/reporter/debuginfod.py: the registry's /debuginfod/ by default, with a read
credential of the DPU's own); else drgn's defaults. Once a vmlinux is loaded, each loaded
module's build-id is read from its notes in host memory and its debug info fetched the same
way. The report's `dpu.debug_info` says what was used, so triage can fetch the same files.
Found nowhere, drgn can read nothing, not even the hostname and boot_id: the agent reports
nothing (such a report would open a second event for the crash the crash kernel reports) and
exits EXIT_NO_DEBUG_INFO after one line saying where it looked and what each place answered.
Written for drgn 0.0.22 (Debian 12) and later.

    crashreg-report.pyz dpu report --core /dev/host-memory [--debug-dir D] [--save-record F]
    crashreg-report.pyz dpu report --record F                                 report a recording
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.reporter import EXIT_DUMP, EXIT_NO_DEBUG_INFO, EXIT_SKIP, EXIT_UNREADABLE
from agents.reporter.config import Config
from agents.reporter.debuginfod import Debuginfod
from agents.reporter.decide import decide_or_fall_back
from agents.reporter.elf import build_id_of, iter_notes
from agents.reporter.log import log
from agents.reporter.report import console_report, tail_text, utc_now
from agents.reporter.vmcoreinfo import kernel_build_id, read_vmcoreinfo

MAX_FRAMES = 64
MAX_MODULES = 1024  # the modules list of a damaged core could loop
MAX_NOTES_BYTES = 1 << 16  # a module's note sections
NO_BOOT_ID = uuid.UUID(int=0)


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
        "boot_id": boot_id_text(prog.read(bootid.address_, 16)),
        "panic_cpu": prog["panic_cpu"].counter.value_(),
        "tainted_mask": prog["tainted_mask"].value_(),
        "dmesg": get_dmesg(prog).decode("utf-8", "replace"),
        "crashed_thread": _crashed_thread(prog),
    }


def boot_id_text(raw: bytes) -> str | None:
    """The boot_id as /proc/sys/kernel/random/boot_id prints it; None when the kernel never made
    one (it is generated on first read, so all zeros is no identity and must not be sent)."""
    value = uuid.UUID(bytes=raw)
    return None if value == NO_BOOT_ID else str(value)


def _cpu_curr(prog: Any, cpu: int) -> Any:
    """The task running on a CPU: runqueues' curr (drgn 0.0.22 has no sched.cpu_curr helper)."""
    from drgn.helpers.linux.percpu import per_cpu

    return per_cpu(prog["runqueues"], cpu).curr


def _crashed_thread(prog: Any) -> dict[str, Any] | None:
    """The panicking task and its stack: from the core's crash notes, else the panic CPU's task."""
    try:
        thread = prog.crashed_thread()
        task, trace = thread.object, thread.stack_trace()
    except (LookupError, ValueError):
        panic_cpu = prog["panic_cpu"].counter.value_()
        if panic_cpu < 0:
            return None
        task = _cpu_curr(prog, panic_cpu)
        try:
            trace = prog.stack_trace(task)
        except (LookupError, ValueError):
            trace = []
    modules = loaded_modules(prog)
    frames = [_frame(prog, frame, modules) for frame in list(trace)[:MAX_FRAMES]]
    return {"pid": task.pid.value_(), "comm": _text(task.comm), "frames": frames}


def _frame(prog: Any, frame: Any, modules: list[LoadedModule]) -> dict[str, Any]:
    """One frame in the contract's shape (function, module, offset, address) and `inline`. An
    inlined call shares its caller's pc, and so its ELF symbol: it is named by drgn from the debug
    info (`frame.name`) and has no offset of its own; the caller's real frame follows it with the
    same address, named by its symbol and offset, as the console's Call Trace names it."""
    pc = frame.pc
    function, offset = (frame.name, None) if frame.is_inline else _symbol_offset(frame)
    module = _module_at(prog, pc, modules)
    return {
        "function": function,
        "module": None if module in (None, "kernel", "vmlinux") else module,
        "offset": offset,
        "address": hex(pc),
        "inline": frame.is_inline,
    }


def _module_at(prog: Any, pc: int, modules: list[LoadedModule]) -> str | None:
    """The module whose memory holds `pc`: drgn's own answer where it has one (Program.module),
    else the host's loaded modules' memory (drgn 0.0.22, Debian 12's, has no Program.module)."""
    try:
        return prog.module(pc).name
    except LookupError:
        return None
    except AttributeError:
        return next((m.name for m in modules if any(start <= pc < end for start, end in m.spans)), None)


def _symbol_offset(frame: Any) -> tuple[str | None, str | None]:
    try:
        symbol = frame.symbol()
    except LookupError:
        return None, None
    return symbol.name, hex(frame.pc - symbol.address)


def dpu_report(record: dict[str, Any], config: Config) -> dict[str, Any]:
    """The contract's report for what the DPU read; keyed by the crashed boot like kdump's."""
    console_log = tail_text(record.get("dmesg", "").encode(), config.max_log_bytes)
    boot_id = record.get("boot_id")
    if boot_id == str(NO_BOOT_ID):  # a recording from before the check in boot_id_text
        boot_id = None
    suffix = boot_id or f"{record['hostname']}-{uuid.uuid4()}"
    # Kernel frames stay out of `stack` (the contract's userspace stack) but are kept with the
    # stored report for triage.
    dpu = {"agent": socket.gethostname(), "panic_cpu": record.get("panic_cpu"),
           "tainted_mask": record.get("tainted_mask"), "crashed_thread": record.get("crashed_thread"),
           "debug_info": record.get("debug_info")}
    build_id = record.get("kernel_build_id")
    return console_report(f"dpu-{suffix}", "dpu", record.get("read_at") or utc_now(), record["hostname"],
                          record.get("kernel_release"), boot_id, console_log, dpu=dpu,
                          **({"kernel_build_id": build_id} if build_id else {}))


def debug_files(debug_dir: str, release: str) -> list[str]:
    """Every ELF file under DIR/<release>/ (the vmlinux and module .ko files), symlinks followed."""
    root = Path(debug_dir) / release
    found = []
    for path in sorted(root.rglob("*")):
        try:
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(str(path))
        except OSError:
            continue
    return found


@dataclass(frozen=True)
class LoadedModule:
    """A module the host had loaded: its build-id from its note sections in host memory
    (`mod->notes_attrs`, what /sys/module/<name>/notes/ shows) and where its memory is."""

    name: str
    build_id: str | None
    spans: tuple[tuple[int, int], ...]  # [start, end) of each part of its memory


def loaded_modules(prog: Any) -> list[LoadedModule]:
    """Each module on the host's `modules` list (none without the kernel's types)."""
    from drgn import FaultError
    from drgn.helpers.linux.list import list_for_each_entry

    modules: list[LoadedModule] = []
    try:
        for module in list_for_each_entry("struct module", prog["modules"].address_of_(), "list"):
            if len(modules) == MAX_MODULES:
                break
            modules.append(LoadedModule(_text(module.name), _module_build_id(prog, module), _spans(module)))
    except (LookupError, FaultError) as error:  # no kernel types loaded, or a damaged list
        log(f"loaded modules: {type(error).__name__}: {error}")
    return modules


def _spans(module: Any) -> tuple[tuple[int, int], ...]:
    """The module's memory: one part a memory type (`mod->mem[]`, kernels 6.4 on), else its core
    and init layouts."""
    try:
        parts = [module.mem[index] for index in range(len(module.mem))]
    except AttributeError:
        parts = [module.core_layout, module.init_layout]
    spans = ((part.base.value_(), part.size.value_()) for part in parts)
    return tuple((base, base + size) for base, size in spans if base and size)


def _module_build_id(prog: Any, module: Any) -> str | None:
    from drgn import FaultError

    try:
        attrs = module.notes_attrs
        for index in range(attrs.notes.value_() if attrs.value_() else 0):
            note = attrs.attrs[index]
            raw = prog.read(note.private.value_(), min(note.size.value_(), MAX_NOTES_BYTES))
            found = build_id_of(iter_notes(raw))
            if found:
                return found
    except (AttributeError, LookupError, FaultError):  # a kernel without module notes in sysfs
        pass
    return None


def _load(prog: Any, files: list[str] | None) -> str | None:
    """Load these ELF files' debug info (None: drgn's default paths); drgn's complaint, if any."""
    import drgn

    try:
        if files is None:
            prog.load_default_debug_info()
        else:
            prog.load_debug_info(files, default=False)
    except drgn.MissingDebugInfoError as error:
        log(f"drgn: {error}")  # vmlinux found, some modules not: go on with what there is
        return str(error)
    return None


class HostUnreadable(Exception):
    """The host's memory (--core) is not there, or not a core drgn can open."""


class NoKernelDebugInfo(Exception):
    """No debug info for the host's kernel anywhere: drgn can read neither its hostname nor its
    boot_id (the message says where the agent looked and what each place answered)."""


def _has_kernel_types(prog: Any) -> bool:
    try:
        prog.variable("init_uts_ns")
    except LookupError:
        return False
    return True


def _where_looked(debug_dir: str, release: str | None, files: list[str], build_id: str | None,
                  debuginfod: Debuginfod, complaint: str | None) -> str:
    """Where the kernel's debug info was looked for and what each place answered, on one line."""
    if not debug_dir:
        places = ["no debug dir (--debug-dir, CRASHREG_DPU_DEBUG_DIR)"]
    else:
        found = f"{len(files)} ELF files, none the kernel's" if files else "no ELF file"
        places = [f"debug dir {Path(debug_dir) / (release or '?')}: {found}"]
    if files:  # what the debug dir held was all that was loaded
        return "; ".join(places)
    if not build_id:
        places.append("debuginfod not asked (no BUILD-ID= in VMCOREINFO)")
    elif not debuginfod.servers:
        places.append("no debuginfod server (CRASHREG_DEBUGINFOD_URLS, CRASHREG_URL)")
    else:
        places += [f"debuginfod {asked}" for asked in debuginfod.asked(build_id)]
    # drgn's complaint has a line per part: "kernel (could not find vmlinux for <release>)".
    kernel = [line[len("kernel ("):].removesuffix(")") for line in (complaint or "").splitlines()
              if line.startswith("kernel (")]
    places.append(f"drgn: {(kernel or [complaint or 'no kernel types in what it loaded'])[0]}")
    return "; ".join(places)


def open_host(core: str, config: Config, debug_dir: str) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """A drgn program over the host's memory with its kernel's debug info; what debug info was
    used (`dpu.debug_info`); the core's VMCOREINFO. Raises NoKernelDebugInfo when the kernel's
    debug info is nowhere to be found, HostUnreadable when `core` is not a core drgn opens (or
    this python3 has no drgn)."""
    try:
        import drgn
    except ImportError as error:
        raise HostUnreadable(f"{sys.executable} cannot import drgn ({error}): run the DPU agent with a "
                             "python3 that has drgn (Debian's python3-drgn, or pip install drgn)") from None

    try:
        prog = drgn.program_from_core_dump(core)
    except (OSError, ValueError) as error:  # drgn: FileNotFoundError, "not an ELF core file"
        raise HostUnreadable(f"cannot read the host's memory at {core}: {error}") from error
    if not prog.flags & drgn.ProgramFlags.IS_LINUX_KERNEL:  # drgn's test: a VMCOREINFO note
        raise HostUnreadable(f"cannot read the host's memory at {core}: a process's core, not a kernel's "
                             "memory (no VMCOREINFO note); a process's core is reported with `core`")
    vmcoreinfo = read_vmcoreinfo(core)
    release, build_id = vmcoreinfo.get("OSRELEASE"), kernel_build_id(vmcoreinfo)
    files = debug_files(debug_dir, release) if debug_dir and release else []
    if debug_dir and not files:
        log(f"no debug info for release {release or '?'} under {debug_dir}")
    debuginfod = Debuginfod.from_config(config)
    vmlinux = None if files or not build_id else debuginfod.find(build_id)
    if not files and not vmlinux:
        log(f"no debug info for kernel build-id {build_id or '?'}: drgn's default paths")
    complaint = _load(prog, files or ([str(vmlinux)] if vmlinux else None))
    if not _has_kernel_types(prog):
        raise NoKernelDebugInfo(
            f"no debug info for the host's kernel {release or '?'} (build-id {build_id or '?'}): "
            + _where_looked(debug_dir, release, files, build_id, debuginfod, complaint))
    kernel_from = "debug_dir" if files else "debuginfod" if vmlinux else "default"
    used: dict[str, Any] = {"kernel": {"build_id": build_id, "from": kernel_from}, "modules": []}
    named = {Path(path).stem.replace("-", "_") for path in files}
    fetched = []
    for module in loaded_modules(prog):
        name, module_build_id = module.name, module.build_id
        found = None if name in named or not module_build_id else debuginfod.find(module_build_id)
        fetched += [str(found)] if found else []
        used["modules"].append({"name": name, "build_id": module_build_id,
                                "from": "debug_dir" if name in named else "debuginfod" if found else None})
    if fetched:
        _load(prog, fetched)
    return prog, used, vmcoreinfo


def command_report(config: Config, args: argparse.Namespace) -> int:
    """Read the host (or a recording), report it, print the decision as JSON. Without the host
    kernel's debug info nothing can be read, not even its hostname and boot_id, and a report
    without them would open a second event for the crash the crash kernel reports later: then
    one line says where the agent looked, and it exits EXIT_NO_DEBUG_INFO, reporting nothing."""
    debug_dir = args.debug_dir or config.dpu_debug_dir
    if args.record:
        record = json.loads(Path(args.record).read_text())
    else:
        try:
            prog, debug_info, vmcoreinfo = open_host(args.core, config, debug_dir)
        except NoKernelDebugInfo as error:
            log(f"{error}; nothing reported (the crash kernel reports this crash)")
            return EXIT_NO_DEBUG_INFO
        except HostUnreadable as error:
            log(f"{error}; nothing reported")
            return EXIT_UNREADABLE
        record = read_host(prog) | {"read_at": utc_now(), "kernel_build_id": kernel_build_id(vmcoreinfo),
                                    "debug_info": debug_info}
    if args.save_record:
        Path(args.save_record).write_text(json.dumps(record, indent=1))
    report = dpu_report(record, config)
    decision = decide_or_fall_back(config, report)  # a decision whatever breaks, as `report`'s
    print(json.dumps({"report_id": report["report_id"], "event_id": decision.event_id,
                      "action": decision.action, "dump_level": decision.dump_level,
                      "reason": decision.reason, "decided_by": decision.decided_by}))
    return EXIT_SKIP if decision.action == "skip" else EXIT_DUMP
