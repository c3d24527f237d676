"""A userspace crash as an engineer reads it: the stored report's `stack` (what a core reader
sent: frames, registers, mappings, evidence, process) turned into the signal and what it means,
each failure-mode label with its proof in words, every frame with what the engine made of it,
the fault address and the mapping it falls in, and the process.

Plain functions over plain data. The labels are decided by the engine's own proofs
(registry.fingerprint.userspace.PROOFS); this module only says in words what each proof saw.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict

from registry.core.wiring import FrameNames
from registry.dump_encodings import ENCODINGS, wrapping_of
from registry.fingerprint.frames import ExplainedFrame
from registry.fingerprint.patterns import IP_REGISTERS, SIGNAL_LABELS, STACK_ALIGNMENT
from registry.fingerprint.userspace import (
    PROOFS,
    SI_KERNEL,
    Evidence,
    UserCrash,
    as_int,
    explain_user_frames,
    faulted_on_its_ret,
    frame_name,
    frame_origin,
    parse_stack,
    read_evidence,
    returning_function,
)

# What each fatal signal means (signal(7)).
SIGNAL_MEANINGS: dict[str, str] = {
    "SIGSEGV": "invalid memory reference",
    "SIGBUS": "bus error: an access the memory cannot serve (misaligned, past a file's end, hardware)",
    "SIGABRT": "abort(): the program stopped itself (an assertion, std::terminate, a detected corruption)",
    "SIGFPE": "arithmetic exception (division by zero, overflow)",
    "SIGILL": "illegal instruction",
    "SIGTRAP": "trace or breakpoint trap",
    "SIGSYS": "bad system call (seccomp)",
}

# si_code: per signal, then the codes any signal may carry (siginfo.h).
SI_CODES: dict[str, dict[int, tuple[str, str]]] = {
    "SIGSEGV": {1: ("SEGV_MAPERR", "address not mapped"), 2: ("SEGV_ACCERR", "no permission for the access"),
                3: ("SEGV_BNDERR", "failed address bound checks"), 4: ("SEGV_PKUERR", "protection key")},
    "SIGBUS": {1: ("BUS_ADRALN", "invalid address alignment"),
               2: ("BUS_ADRERR", "nonexistent physical address"),
               3: ("BUS_OBJERR", "object-specific hardware error"),
               4: ("BUS_MCEERR_AR", "machine check: memory error consumed"),
               5: ("BUS_MCEERR_AO", "machine check: memory error detected")},
    "SIGILL": {1: ("ILL_ILLOPC", "illegal opcode"), 2: ("ILL_ILLOPN", "illegal operand"),
               3: ("ILL_ILLADR", "illegal addressing mode"), 4: ("ILL_ILLTRP", "illegal trap"),
               5: ("ILL_PRVOPC", "privileged opcode"), 6: ("ILL_PRVREG", "privileged register"),
               7: ("ILL_COPROC", "coprocessor error"), 8: ("ILL_BADSTK", "internal stack error")},
    "SIGFPE": {1: ("FPE_INTDIV", "integer divide by zero"), 2: ("FPE_INTOVF", "integer overflow"),
               3: ("FPE_FLTDIV", "floating-point divide by zero"),
               4: ("FPE_FLTOVF", "floating-point overflow"),
               5: ("FPE_FLTUND", "floating-point underflow"), 6: ("FPE_FLTRES", "inexact result"),
               7: ("FPE_FLTINV", "invalid floating-point operation"),
               8: ("FPE_FLTSUB", "subscript out of range")},
}
ANY_SI_CODE: dict[int, tuple[str, str]] = {
    0: ("SI_USER", "sent by kill()"),
    SI_KERNEL: ("SI_KERNEL", "sent by the kernel (a general protection fault, a non-canonical address)"),
    -1: ("SI_QUEUE", "sent by sigqueue()"),
    -6: ("SI_TKILL", "sent by tkill()/tgkill(): raise() or abort() in the process"),
}
# Registers an engineer reads first (pc, stack, frame), then the rest as the report sent them.
FIRST_REGISTERS = ("rip", "eip", "pc", "rsp", "esp", "sp", "rbp", "ebp", "fp")
NULL_PAGE = 4096  # an address in the first page: a NULL pointer, or a small offset from one
FRAME_KEYS = ("address", "module", "build_id", "offset", "function", "function_offset", "file", "line",
              "inlined", "signal_frame")


class LabelProof(TypedDict):
    label: str
    proof: str  # what the evidence showed, in words


class UserFrame(TypedDict):
    """One frame of the crashing thread as the report sent it, with the engine's decision."""

    index: int | None  # its position in the report's frames; None: read from the red zone
    address: str | None
    module: str | None
    build_id: str | None
    offset: str | None  # in the module (what addr2line and debuginfod take)
    function: str | None
    function_offset: str | None
    file: str | None  # once symbols exist (server-side symbolication)
    line: int | None
    inlined: list[Any] | None  # functions inlined at this address, innermost first
    signal_frame: bool
    decision: str | None  # guilty | used | skipped; None: the engine did not read it
    rule: str | None  # the skip class that skipped it
    note: str | None  # why a frame is there or was not read


class MappingView(TypedDict):
    start: str
    end: str
    perms: str | None
    path: str | None


class FaultView(TypedDict):
    pc: str | None
    pc_mapping: MappingView | None
    si_addr: str | None
    si_code: int | None
    si_code_name: str | None
    si_code_meaning: str | None
    address_mapping: MappingView | None
    address_reading: str | None  # what the fault address is, in words


class ProcessFacts(TypedDict):
    executable: str | None
    build_id: str | None  # of the executable
    version: str | None
    pid: int | None
    tid: int | None
    name: str | None
    args: str | None
    started_at: str | None
    uptime_s: float | None


class ThreadView(TypedDict):
    tid: int | None
    frames: list[UserFrame]


class UserspaceCrash(TypedDict):
    """GET /api/v1/events/{id} `userspace`: what the core reader saw, in an engineer's terms."""

    signal: str | None
    signal_meaning: str | None
    labels: list[LabelProof]
    frames: list[UserFrame]
    guilty: int | None  # position of the guilty frame in `frames`
    registers: dict[str, str]
    fault: FaultView
    process: ProcessFacts
    threads: list[ThreadView]  # the other threads, when the report carries them


def _register_order(name: str) -> int:
    return FIRST_REGISTERS.index(name) if name in FIRST_REGISTERS else len(FIRST_REGISTERS)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _hex(value: int | None) -> str:
    return "?" if value is None else f"{value:#x}"


def _named(function: str, module: str | None) -> str:
    return f"`{function}`" + (f" [{module}]" if module else "")


# --- the labels' proofs, in words ---------------------------------------------------------


def _returned_to_null(evidence: Evidence) -> str:
    returned = returning_function(evidence)
    who = (f"the function that returned: {_named(*returned)}, from the red zone (its calls' return "
           "addresses below the popped slot)" if returned else
           "no return address into code in the red zone names the function that returned")
    return (f"pc 0; the slot `ret` popped (%rsp-8) held 0, and the top of the stack is no return "
            f"address (a call through a NULL pointer would leave one); {who}")


def _bad_return(evidence: Evidence) -> str:
    if faulted_on_its_ret(evidence):
        top = evidence.slot(0)
        return (f"the `ret` at pc {_hex(evidence.pc)} faulted before it jumped (a general protection fault, "
                f"si_code SI_KERNEL): its target on top of the stack, {_hex(top.value if top else None)}, "
                "is not a canonical address (as a string copied over a return address leaves it); "
                "the function returning is frame 0")
    where = (f"a mapping without execute permission ({evidence.pc_perms})" if evidence.pc_perms
             else "no mapping")
    returned = returning_function(evidence)
    who = f"; the function that returned: {_named(*returned)}, from the red zone" if returned else ""
    return f"pc {_hex(evidence.pc)} is in {where}, and it is the value the slot `ret` popped held{who}"


def _misaligned(evidence: Evidence) -> str:
    if evidence.si_code == SI_KERNEL and evidence.pc_bytes:
        return (f"a general protection fault (si_code SI_KERNEL) on an aligned SSE move to the stack "
                f"(bytes at pc: {evidence.pc_bytes[:8].hex(' ')})")
    alignment = dict(STACK_ALIGNMENT).get(evidence.sp_register or "", 16)
    cfa = evidence.cfa if evidence.cfa is not None else (evidence.sp or 0) + 8
    inner, outer = evidence.frame_modules
    return (f"the CFA {_hex(cfa)} is not {alignment}-byte aligned in a function of {inner} called from "
            f"{outer} (the ABI fixes the alignment across modules)")


def _overflowed(evidence: Evidence) -> str:
    if evidence.overflow_handler is not None:
        return (f"the runtime's guard-page handler `{evidence.overflow_handler}` is on the stack: it "
                "aborts only after the thread ran into its stack's guard")
    fault = evidence.guard_fault
    assert fault is not None  # proved
    delta = fault.address - fault.sp
    caught = "; a signal handler caught that fault, then the process died" if fault.caught else ""
    return (f"the fault address {_hex(fault.address)} is in the guard below the stack that starts at "
            f"{_hex(fault.stack_bottom)} (no access there), {abs(delta):#x} bytes "
            f"{'above' if delta >= 0 else 'below'} the stack pointer {_hex(fault.sp)}: the thread used up "
            f"its stack{caught}")


PROOF_WORDS: dict[str, Callable[[Evidence], str]] = {
    "stack-overflow": _overflowed,
    "return-to-null": _returned_to_null,
    "bad-return": _bad_return,
    "misaligned-stack": _misaligned,
}


def label_proofs(stack: dict[str, Any], labels: Sequence[str]) -> list[LabelProof]:
    """Each label with what proved it: the corruption labels from the evidence, the signal's."""
    evidence = read_evidence(stack)
    signal = (_text(stack.get("signal")) or "").upper()
    proofs: list[LabelProof] = []
    for label in labels:
        if label in PROOF_WORDS and evidence is not None and PROOFS[label](evidence):
            proofs.append({"label": label, "proof": PROOF_WORDS[label](evidence)})
        elif SIGNAL_LABELS.get(signal) == label:
            meaning = SIGNAL_MEANINGS.get(signal, "")
            code = si_code_reading(signal, as_int((stack.get("evidence") or {}).get("si_code")))
            proofs.append({"label": label, "proof": f"the process died of {signal} ({meaning})"
                           + (f"; si_code {code[0]}: {code[1]}" if code else "")})
        else:
            proofs.append({"label": label,
                           "proof": "given by the engine; the stored evidence no longer proves it"})
    return proofs


def si_code_reading(signal: str, code: int | None) -> tuple[str, str] | None:
    if code is None:
        return None
    return SI_CODES.get(signal, {}).get(code) or ANY_SI_CODE.get(code) or (str(code), "unknown code")


# --- frames --------------------------------------------------------------------------------


def _frame(raw: dict[str, Any], index: int | None) -> UserFrame:
    line = as_int(raw.get("line"))
    inlined = raw.get("inlined")
    return {
        "index": index, "address": _text(raw.get("address")), "module": _text(raw.get("module")),
        "build_id": _text(raw.get("build_id")), "offset": _text(raw.get("offset")),
        "function": _text(raw.get("function")), "function_offset": _text(raw.get("function_offset")),
        "file": _text(raw.get("file")), "line": line if line else None,
        "inlined": inlined if isinstance(inlined, list) and inlined else None,
        "signal_frame": raw.get("signal_frame") is True,
        "decision": None, "rule": None, "note": None,
    }


def _key(explained: ExplainedFrame) -> tuple[str, str | None]:
    return explained.get("function") or "", explained.get("module")


def _read_from(explained: ExplainedFrame, raw: Any, name: tuple[str, str | None] | None) -> bool:
    """Whether the engine read this explained frame from the frame the report sent: by the
    module offset the explanation records (a frame the registry named from debug info is called
    otherwise than the frame sent), else, for an explanation without one, by name."""
    if name is None:
        return False
    offset = explained.get("offset")
    if offset is None:
        return _key(explained) == name
    return frame_origin(raw).offset == offset and explained.get("module") == name[1]


def _decided(frame: UserFrame, explained: ExplainedFrame, read_as: str | None = None) -> UserFrame:
    """The frame with the engine's decision and, where the registry named it from debug info
    (the engine read another name than `read_as`, the one the frame sent reads as), that name
    and its source line."""
    decided = frame | {"decision": explained.get("decision"), "rule": explained.get("rule")}
    function = explained.get("function")
    if function and function != read_as:
        decided["function"] = function
    if explained.get("file") and explained.get("line"):
        decided["file"], decided["line"] = explained["file"], explained["line"]
    return decided


def _inlined_call(raw: UserFrame, explained: ExplainedFrame) -> UserFrame:
    """A call the debug info found inlined at a frame's offset: a frame of its own to the engine
    (it may be the guilty one), shown before the frame it was inlined into."""
    place = {key: raw[key] for key in ("address", "module", "build_id", "offset")}  # type: ignore[literal-required]
    return _decided(_frame(place, None), explained) | {"note": f"inlined into frame {raw['index']}"}


def _from_red_zone(explained: ExplainedFrame) -> UserFrame:
    return _decided(_frame({"function": explained.get("function"), "module": explained.get("module")}, None),
                    explained) | {"note": "from the red zone: the function that returned (its frame is gone)"}


# The notes of frames the engine's record does not hold (registry.fingerprint.frames keeps a
# window of them around the guilty one): the innermost ones it passed over to reach a deep
# guilty frame (the runtime's machinery: a Rust panic's, an abort's), and the callers past it.
BEFORE_WINDOW = "passed over to reach the guilty frame (before the engine's window of frames)"
OUTSIDE_WINDOW = "outside the engine's window of frames"


def _named_now(row: UserFrame, names_now: list[list[dict[str, Any]]] | None, index: int) -> list[UserFrame]:
    """A frame the engine did not read as the registry's symbols name it now (FrameNames):
    the calls inlined there, then itself; as sent where they know nothing."""
    named = names_now[index] if names_now and index < len(names_now) else []  # inlined calls, itself
    return [*(_inlined_call(row, call) for call in named[:-1]), _decided(row, named[-1]) if named else row]


def aligned_frames(raw_frames: list[Any], explained: list[ExplainedFrame],
                   names_now: list[list[dict[str, Any]]] | None = None) -> list[UserFrame]:
    """Every frame the report sent, in order, each with the engine's decision on it and, where
    the registry named it from debug info, that name, source line and inlined calls. The engine
    reads frames by (function, module), an unnamed one as module+offset, and records where each
    came from (`_read_from`); a frame it could not name (a pc in no module: 0 after a return to
    null) keeps no decision, and a frame it took from the red zone (the function that returned
    to a bad address) is put after frame 0. A frame outside the engine's window is named by
    `names_now` (FrameNames: what the registry's symbols say there now), with no decision and
    a note saying on which side of the window it lies."""
    names = [frame_name(f) for f in raw_frames]
    rows: list[UserFrame] = []
    at = 0

    def next_read_from(index: int, inlined: bool) -> bool:
        """Whether the next explained frame is (an inlined call in) the report's frame `index`."""
        return (at < len(explained) and bool(explained[at].get("inlined")) == inlined
                and _read_from(explained[at], raw_frames[index], names[index]))

    def read_later(index: int) -> bool:
        """Whether the next explained frame was read from a frame after `index`."""
        frame = explained[at]
        return any(_read_from(frame, raw_frames[i], names[i]) for i in range(index + 1, len(raw_frames)))

    for index, raw in enumerate(raw_frames):
        row = _frame(raw if isinstance(raw, dict) else {}, index)
        while next_read_from(index, inlined=True):
            rows.append(_inlined_call(row, explained[at]))
            at += 1
        if next_read_from(index, inlined=False):
            row = _decided(row, explained[at], names[index][0] if names[index] else None)
            at += 1
        elif names[index] is None:
            row["note"] = "in no module: a bad pc, not read"
        else:
            *rows_inlined, row = _named_now(row, names_now, index)
            rows += rows_inlined
            row["note"] = BEFORE_WINDOW if explained and at == 0 else OUTSIDE_WINDOW
        rows.append(row)
        while at < len(explained) and not read_later(index):
            rows.append(_from_red_zone(explained[at]))
            at += 1
    return rows


# --- the fault and the process ---------------------------------------------------------


def _mapping_at(mappings: Any, address: int | None) -> MappingView | None:
    if address is None or not isinstance(mappings, list):
        return None
    for mapping in mappings:
        if not isinstance(mapping, dict):
            continue
        start, end = as_int(mapping.get("start")), as_int(mapping.get("end"))
        if start is not None and end is not None and start <= address < end:
            return {"start": str(mapping.get("start")), "end": str(mapping.get("end")),
                    "perms": _text(mapping.get("perms")), "path": _text(mapping.get("path"))}
    return None


def _address_reading(address: int | None, mapping: MappingView | None) -> str | None:
    if address is None:
        return None
    if mapping is not None:
        where = mapping["path"] or "an anonymous mapping (heap, a thread's stack)"
        offset = address - (as_int(mapping["start"]) or 0)
        return f"{where} +{offset:#x} ({mapping['perms'] or 'no permissions recorded'})"
    if address < NULL_PAGE:
        return f"in no mapping: the first page, a NULL pointer{'' if address == 0 else ' plus an offset'}"
    return "in no mapping the process had"


def fault_view(stack: dict[str, Any], signal: str) -> FaultView:
    evidence = stack.get("evidence") if isinstance(stack.get("evidence"), dict) else {}
    registers = stack.get("registers") if isinstance(stack.get("registers"), dict) else {}
    pc = next((as_int(registers[name]) for name in IP_REGISTERS if name in registers), None)
    si_addr = as_int(evidence.get("si_addr"))
    si_code = as_int(evidence.get("si_code"))
    reading = si_code_reading(signal, si_code)
    mappings = stack.get("mappings")
    address_mapping = _mapping_at(mappings, si_addr)
    return {
        "pc": _hex(pc) if pc is not None else None, "pc_mapping": _mapping_at(mappings, pc),
        "si_addr": _text(evidence.get("si_addr")), "si_code": si_code,
        "si_code_name": reading[0] if reading else None, "si_code_meaning": reading[1] if reading else None,
        "address_mapping": address_mapping, "address_reading": _address_reading(si_addr, address_mapping),
    }


def process_facts(stack: dict[str, Any], crashed_at: datetime, version: str | None) -> ProcessFacts:
    """The process as reported; its uptime from its start when only the start was sent."""
    process = stack.get("process") if isinstance(stack.get("process"), dict) else {}
    started = _text(process.get("started_at"))
    uptime = process.get("uptime_s")
    uptime = float(uptime) if isinstance(uptime, int | float) and not isinstance(uptime, bool) else None
    if uptime is None and started:
        try:
            start = datetime.fromisoformat(started.replace("Z", "+00:00"))
            uptime = max((crashed_at - start) / timedelta(seconds=1), 0.0)
        except (ValueError, TypeError):
            uptime = None
    return {
        "executable": _text(stack.get("executable")), "build_id": _text(stack.get("build_id")),
        "version": _text(process.get("version")) or version, "pid": as_int(process.get("pid")),
        "tid": as_int(process.get("tid")), "name": _text(process.get("name")),
        "args": _text(process.get("args")),
        "started_at": started, "uptime_s": uptime,
    }


def _threads(stack: dict[str, Any], names_now: FrameNames | None = None) -> list[ThreadView]:
    """The other threads, each frame named by the registry's symbols (`names_now`) as the
    crashing thread's frames outside the engine's window are."""
    threads = stack.get("threads")
    views: list[ThreadView] = []
    for thread in threads if isinstance(threads, list) else []:
        if not isinstance(thread, dict):
            continue
        sent = [frame for frame in thread.get("frames") or [] if isinstance(frame, dict)]
        names = names_now({**stack, "frames": sent}) if names_now and sent else None
        rows = [row for index, frame in enumerate(sent)
                for row in _named_now(_frame(frame, index), names, index)]
        views.append({"tid": as_int(thread.get("tid")), "frames": rows})
    return views


def read_frames(stack: dict[str, Any], explanation: dict[str, Any] | None = None,
                crash: UserCrash | None = None, names_now: FrameNames | None = None) -> list[UserFrame]:
    """Every frame of the stack with the engine's decision: the stored explanation's when it is
    a userspace one, else the engine's now; the frames outside its window named by `names_now`."""
    if explanation and explanation.get("kind") == "userspace":
        explained = list(explanation.get("frames") or [])
    else:
        crash = crash or parse_stack(stack)
        explained = explain_user_frames(crash)[0] if crash else []
    raw_frames = stack.get("frames") if isinstance(stack.get("frames"), list) else []
    return aligned_frames(raw_frames, explained, names_now(stack) if names_now else None)


def frame_place(frame: UserFrame) -> str:
    """What a frame is called where no function names it: module+offset (the module alone for
    one read from the red zone), else its address."""
    if frame["module"]:
        module = frame["module"].rsplit("/", 1)[-1]
        return f"{module}+{frame['offset']}" if frame["offset"] else module
    return frame["address"] or "?"


def frame_called(frame: UserFrame) -> str:
    """A frame's name in a list of names: its function, else its place."""
    return frame["function"] or frame_place(frame)


def userspace_crash(stack: dict[str, Any], crashed_at: datetime, version: str | None = None,
                    explanation: dict[str, Any] | None = None,
                    names_now: FrameNames | None = None) -> UserspaceCrash:
    """The whole reading of one report's stack. `explanation` is the event's stored record (how
    its fingerprint was made); without one (or a kernel one) the engine explains the stack now.
    `names_now`: the app's FrameNames (app_frame_names()), for the frames outside the window."""
    signal = (_text(stack.get("signal")) or "").upper()
    crash = parse_stack(stack)
    frames = read_frames(stack, explanation, crash, names_now)
    registers = stack.get("registers") if isinstance(stack.get("registers"), dict) else {}
    return {
        "signal": signal or None,
        "signal_meaning": SIGNAL_MEANINGS.get(signal),
        "labels": label_proofs(stack, crash.labels if crash else []),
        "frames": frames,
        "guilty": next((i for i, f in enumerate(frames) if f["decision"] == "guilty"), None),
        "registers": {str(k): str(registers[k]) for k in sorted(registers, key=_register_order)},
        "fault": fault_view(stack, signal),
        "process": process_facts(stack, crashed_at, version),
        "threads": _threads(stack, names_now),
    }


def frame_text(frame: UserFrame) -> str:
    """One frame on one line, as a bundle lists it: the function with its place, else the place;
    its source line once symbols exist."""
    source = f" at {frame['file']}:{frame['line']}" if frame["file"] and frame["line"] else ""
    place = f" [{frame_place(frame)}]" if frame["function"] and frame["module"] else ""
    return f"{frame_called(frame)}{place}{source}"


# --- opening the capture --------------------------------------------------------------------

# The file elfutils' clients (gdb here) read the registry's Authorization header from
# (DEBUGINFOD_HEADERS_FILE): its debuginfod refuses a request without a token (docs/symbols.md).
DEBUGINFOD_HEADERS = '"$HOME/.crashreg-debuginfod"'
WRITE_DEBUGINFOD_HEADERS = (f"(umask 077 && printf 'Authorization: Bearer %s\\n' \"$TOKEN\" "
                            f"> {DEBUGINFOD_HEADERS})")
CORE_METHODS = ("core", "core_filtered")  # a core handler's whole and bounded cores (docs/capture.md)


class CoreCommands(TypedDict):
    """How to open one captured core: fetch it, then gdb with the registry's debuginfod."""

    capture_id: str
    method: str
    download: str | None  # GET it with a read token: a short-lived link to the stored core
    file: str  # what the commands call the core
    fetch: str | None  # the shell lines that download it (None: not in the dump store)
    open: str  # gdb on the core, symbols from the registry's debuginfod ($TOKEN in the header file)
    on_host: str | None  # where the core is on its host, and systemd-coredump's command


def _open_on_host(executable: str, target: str) -> str:
    """gdb on the core where its host keeps it, unwrapped first when it is compressed (gdb reads
    no compressed core)."""
    wrapped = wrapping_of(target)
    if wrapped is None or wrapped.unpack is None:
        return f"gdb {executable} {shlex.quote(target)}"
    unwrapped = shlex.quote(os.path.basename(target)[: -len(wrapped.suffix)])
    return f"{wrapped.unpack} {shlex.quote(target)} > {unwrapped} && gdb {executable} {unwrapped}"


def core_commands(public_url: str, event_id: int, process: ProcessFacts, hostname: str,
                  captures: Sequence[dict[str, Any]], stored: dict[int, str]) -> list[CoreCommands]:
    """The commands for each core captured (`stored`: capture id -> the stored dump's encoding).
    gdb reads the executable's and libraries' symbols by build-id from DEBUGINFOD_URLS."""
    base = public_url.rstrip("/")
    # Paths and names come from the crashed host (a program may be named `$(...)`): every one is
    # quoted for the shell the commands are pasted into.
    executable = shlex.quote(process["executable"]) if process["executable"] else "<the executable>"
    found: list[CoreCommands] = []
    for capture in captures:
        if capture.get("method") not in CORE_METHODS:
            continue
        capture_id = int(capture["id"])
        encoding = stored.get(capture_id)
        file = f"core.{event_id}-{capture_id}"
        download = f"{base}/api/v1/captures/{capture_id}/download" if encoding is not None else None
        fetch = None
        if download:
            wrapped = ENCODINGS[encoding or "identity"]
            fetch = (f"curl -fsSL -o {file}{wrapped.suffix} \"$(curl -fsS -H "
                     f"\"Authorization: Bearer $TOKEN\" {download} | python3 -c 'import json, sys; "
                     f"print(json.load(sys.stdin)[\"url\"])')\""
                     + (f" && {wrapped.unpack} {file}{wrapped.suffix} > {file} && rm {file}{wrapped.suffix}"
                        if wrapped.unpack else ""))
        target = capture.get("target")
        pid = process["pid"]
        on_host = None
        if target or pid:
            on_host = (f"on {hostname}: " + (_open_on_host(executable, target) if target else "")
                       + (" or " if target and pid else "")
                       + (f"coredumpctl debug {pid} (when systemd-coredump kept it)" if pid else ""))
        found.append({
            "capture_id": str(capture_id), "method": str(capture.get("method")), "download": download,
            "file": file, "fetch": fetch,
            "open": f"{WRITE_DEBUGINFOD_HEADERS} && DEBUGINFOD_URLS={shlex.quote(base + '/debuginfod/')} "
                    f"DEBUGINFOD_HEADERS_FILE={DEBUGINFOD_HEADERS} gdb -iex 'set debuginfod enabled on' "
                    f"{executable} {file}",
            "on_host": on_host,
        })
    return found
