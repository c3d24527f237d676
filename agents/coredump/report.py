"""A core's `source: userspace` report: the crashing thread's frames, registers, mappings,
and the evidence the registry's engine labels the failure mode from.

Shared by file mode (a core on disk) and pipe mode (a core on stdin, memory from /proc):
both call `analyse` with the core's head, a memory reader and an opener, then `build_report`
with what they know of the host and the process.
"""

from __future__ import annotations

import signal as signals
from dataclasses import dataclass, field
from typing import Any

from agents.reporter.report import report_skeleton, within
from registry.fingerprint.demangle import MAX_NAME, demangle

from .core import CoreHead, Memory, Thread
from .modules import Module, Opener, load_modules
from .unwind import Frame, Mapping, ProcessView, unwind

AT_ENTRY = 9
FAULT_SIGNALS = frozenset({signals.SIGSEGV, signals.SIGBUS, signals.SIGILL, signals.SIGFPE, signals.SIGTRAP})
RED_ZONE = 128  # System V x86-64: the bytes below %rsp a leaf may use, and what calls leave there
PC_BYTES = 16  # the longest x86 instruction is 15 bytes
MAX_REPORTED_MAPPINGS = 4096
# x86-64's rt_sigframe: a signal trampoline's frame starts at the kernel's ucontext, whose
# uc_mcontext (struct sigcontext) holds the interrupted context; a page fault's (trapno 14)
# address is its cr2 (arch/x86/include/uapi/asm/sigcontext.h, ucontext.h).
UC_MCONTEXT = 40  # uc_flags, uc_link, uc_stack
SC_RSP, SC_TRAPNO, SC_CR2 = 120, 160, 176
X86_TRAP_PF = 14
# The other threads reported (NT_PRSTATUS order after the crashing one), each this deep: what
# they were doing (a lock held, a peer in the same function) at a bounded cost.
MAX_OTHER_THREADS = 32
MAX_THREAD_FRAMES = 32
# The contract's bounds (registry/ingest/schemas.py), in characters and in UTF-8 bytes: a text
# past one is a 400, the whole report refused.
MAX_PATH = 1024


def hexa(value: int) -> str:
    return f"{value:#x}"


def path_text(path: str) -> str:
    """A path within the contract's bound: its tail, which keeps the file name the registry reads."""
    return within(path, MAX_PATH, tail=True)


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"SIG{number}"


@dataclass
class Analysis:
    """What the core says about the crash, before any host facts."""

    head: CoreHead
    thread: Thread
    view: ProcessView
    frames: list[Frame]
    program: Module | None
    stack: dict[str, Any] = field(default_factory=dict)
    missing_bytes: int = 0  # of its memory, past the end of a core file cut short
    memory_bytes: int = 0  # of memory the core file should hold


def analyse(head: CoreHead, memory: Memory, opener: Opener) -> Analysis:
    """Unwind and symbolize the crashing thread (NT_PRSTATUS written first), read the evidence."""
    thread = head.crashing
    if thread is None:
        raise ValueError("the core holds no NT_PRSTATUS: no thread to read")
    modules = load_modules(head, memory, opener)
    view = ProcessView(head, memory, modules)
    frames = unwind(view, thread.registers)
    entry = head.auxv.get(AT_ENTRY)
    program = view.module_at(entry) if entry else None
    analysis = Analysis(head, thread, view, frames, program)
    analysis.stack = stack_object(analysis)
    return analysis


def close(analysis: Analysis) -> None:
    for module in analysis.view.modules:
        module.close()


def frame_object(view: ProcessView, frame: Frame) -> dict[str, Any]:
    """module + build-id + offset (the module's link-time address: what addr2line takes),
    and the function there, looked up at the call (pc - 1) for a return address; a signal
    trampoline (its CFI says so) is marked `signal_frame`."""
    out: dict[str, Any] = {"address": hexa(frame.pc)}
    if frame.signal_frame:
        out["signal_frame"] = True
    module = view.module_at(frame.pc)
    if module is None:
        return out
    out |= {"module": path_text(module.path), "offset": hexa(frame.pc - module.bias)}
    if module.build_id:
        out["build_id"] = module.build_id
    found = module.symbolize(frame.lookup_pc)
    if found:
        out |= named(found[0])
        out["function_offset"] = hexa(frame.pc - (frame.lookup_pc - found[1]))
    return out


def named(symbol: str) -> dict[str, str]:
    """A frame's `function` (demangled) and, when that is not the symbol itself, its `symbol`:
    the registry keys on the symbol, which tells what the demangled spelling does not (a
    `static` function). Each within the contract's bound (the demangler writes no longer name;
    a longer symbol is hostile, and cut)."""
    function = within(demangle(symbol), MAX_NAME)
    if function == symbol:
        return {"function": function}
    return {"function": function, "symbol": within(symbol, MAX_NAME)}


def code_pointer(view: ProcessView, value: int) -> dict[str, Any]:
    """What a stack slot's value points at when it points into code."""
    module = view.module_at(value)
    if module is None or not view.executable(value):
        return {}
    out: dict[str, Any] = {"module": path_text(module.path), "call": view.is_return_address(value)}
    found = module.symbolize(value - 1 if out["call"] else value)
    if found:
        out["function"] = within(demangle(found[0]), MAX_NAME)
    return out


def evidence_object(analysis: Analysis) -> dict[str, Any]:
    """The facts the failure-mode labels are decided from (docs/api.md, `stack.evidence`)."""
    view, registers = analysis.view, analysis.thread.registers
    pc, sp = registers.get("rip", 0), registers.get("rsp", 0)
    evidence: dict[str, Any] = {}
    siginfo = analysis.head.siginfo
    if siginfo is not None:
        evidence["si_code"] = siginfo.code
        if siginfo.signo in FAULT_SIGNALS:
            evidence["si_addr"] = hexa(siginfo.addr)
    mapping = view.mapping_at(pc)
    evidence["pc_perms"] = mapping.perms if mapping else ""
    # As many of the pc's bytes as its module's segment holds: a `ret` may be its last byte.
    readable = (view.read(pc, size) for size in range(PC_BYTES, 0, -1)) if mapping else ()
    code = next(filter(None, readable), None)
    if code:
        evidence["pc_bytes"] = code.hex()
    module = view.module_at(pc)
    if module is not None and module.symbols.starts:
        evidence["pc_entry"] = module.symbols.starts_at(pc - module.bias)
    frame0 = analysis.frames[0]
    if frame0.cfa is not None:
        evidence["cfa"] = hexa(frame0.cfa)
    slots = []
    for offset in range(-RED_ZONE, 16, 8):
        value = view.word(sp + offset)
        if value is not None:
            slots.append({"offset": offset, "value": hexa(value)} | code_pointer(view, value))
    evidence["slots"] = slots
    return evidence | caught_fault(analysis)


def caught_fault(analysis: Analysis) -> dict[str, Any]:
    """The page fault a signal handler on the stack caught (the innermost signal frame's saved
    context): its address and the stack pointer it interrupted. A handler that logs and aborts
    (Rust's guard-page handler, a crash reporter's) leaves a SIGABRT core whose own signal says
    nothing of the fault."""
    frame = next((frame for frame in analysis.frames if frame.signal_frame), None)
    if frame is None:
        return {}
    context = frame.sp + UC_MCONTEXT
    words = [analysis.view.word(context + at) for at in (SC_RSP, SC_TRAPNO, SC_CR2)]
    if None in words or words[1] != X86_TRAP_PF:
        return {}
    sp, _, address = words
    return {"caught_fault_address": hexa(address), "caught_fault_sp": hexa(sp)}


def mapping_object(mapping: Mapping, build_ids: dict[int, str]) -> dict[str, Any]:
    """A mapping as /proc/<pid>/maps shows it; the one an object is loaded from (`build_ids`
    by load address) with the object's build-id: a debugger reading the core needs the symbols
    of every object mapped, and the registry keeps those of each build-id a report names. One
    per object, from what loading the modules read already."""
    out = {"start": hexa(mapping.start), "end": hexa(mapping.end), "perms": mapping.perms,
           "path": path_text(mapping.path)}
    build_id = build_ids.get(mapping.start)
    if build_id:
        out["build_id"] = build_id
    return out


def stack_object(analysis: Analysis) -> dict[str, Any]:
    view, thread, process = analysis.view, analysis.thread, analysis.head.process
    program = analysis.program
    build_ids = {module.start: module.build_id for module in view.modules if module.build_id}
    stack: dict[str, Any] = {
        "executable": path_text(program.path) if program else process.name if process else "",
        "signal": signal_name(thread.signal),
        "frames": [frame_object(view, frame) for frame in analysis.frames],
        "registers": {name: hexa(value) for name, value in thread.registers.items()},
        "mappings": [mapping_object(m, build_ids) for m in view.mappings[:MAX_REPORTED_MAPPINGS]],
        "evidence": evidence_object(analysis),
        "threads": [{"tid": thread.tid, "frames": [frame_object(view, frame) for frame in
                                                   unwind(view, thread.registers, MAX_THREAD_FRAMES)]}
                    for thread in analysis.head.threads[1:MAX_OTHER_THREADS + 1]],
    }
    if program is not None and program.build_id:
        stack["build_id"] = program.build_id
    return stack


@dataclass(frozen=True)
class CrashFacts:
    """What the caller knows beyond the core: the host, and when the process started (pipe
    mode reads /proc; file mode knows less, and what it does not know is left out)."""

    hostname: str
    crashed_at: str  # ISO 8601 UTC
    kernel_version: str | None = None
    boot_id: str | None = None
    host_uptime_s: int | None = None
    process_started_at: str | None = None
    process_uptime_s: float | None = None


def process_object(analysis: Analysis, facts: CrashFacts) -> dict[str, Any]:
    process = analysis.head.process
    out: dict[str, Any] = {"pid": process.pid if process else analysis.thread.tid, "tid": analysis.thread.tid}
    if process is not None:
        out |= {"name": process.name, "args": process.args}
    if facts.process_started_at:
        out["started_at"] = facts.process_started_at
    if facts.process_uptime_s is not None:
        out["uptime_s"] = round(facts.process_uptime_s, 3)
    return out


def userspace_report(analysis: Analysis, facts: CrashFacts, fingerprint: bool = True) -> dict[str, Any]:
    """The contract's `source: userspace` report. report_id comes from the core's notes (the
    crashing thread's registers, pids, signal): a rerun over the same core is a replay.
    `fingerprint=False` leaves the fingerprint to the registry (and to an offline decision):
    the engine's import is a third of a core handler's time to its answer."""
    stack = dict(analysis.stack) | {"process": process_object(analysis, facts)}
    signature = None
    if fingerprint:
        from registry.fingerprint import analyse_report

        signature = analyse_report(None, stack)
    report_id = f"core-{analysis.head.identity[:48]}"
    return report_skeleton(report_id, "userspace", facts.crashed_at, facts.hostname, facts.kernel_version,
                           facts.boot_id, uptime_s=facts.host_uptime_s, stack=stack,
                           fingerprint=signature.fingerprint if signature else None)
