"""Read a userspace core's stack (frames, registers, evidence) into failure-mode labels and the
guilty frame.

Two populations with the same frames but different failure modes are different bugs: a
return to address 0 (a smashed return address), a return into memory that is not code, a
stack misaligned where the ABI fixes its alignment. A label is given only on proof, from the
`evidence` a core reader adds to the stack (docs/api.md): the slot `ret` popped, the fault
pc's mapping, the instruction at the pc, the CFA. Registers alone prove nothing (inside a
function body, and in every leaf without a frame, %rsp % 16 == 8 is normal), so a report
without evidence carries no corruption label.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .demangle import inlined_spelling, internal_linkage
from .frames import ExplainedFrame, canonical_function, frame_decisions, frame_label, skip_matcher
from .patterns import (
    FAULT_ABOVE_SP,
    FAULT_BELOW_SP,
    IP_REGISTERS,
    SIGNAL_LABELS,
    SP_REGISTERS,
    STACK_ALIGNMENT,
    STACK_GUARD_GAP,
    STACK_OVERFLOW_HANDLERS,
    USERSPACE_LABELS,
    USERSPACE_SKIP,
    USERSPACE_SKIP_FILES,
    USERSPACE_SKIP_MODULES,
)

MAX_FRAMES = 256  # frames examined; a runaway recursion is still one bug
MAX_SLOTS = 32
FRAMES_KEPT = 3
UNNAMED_KEY_FRAMES = 16  # key_frames: an unnamed guilty frame's fingerprint, at most
MAX_NAME = 200
MAX_SYMBOL = 4096  # what a name is read from (the demangler's bound)
MAX_PATH = 512
MAX_OFFSET = 32  # a module offset as sent: "0x" and 16 hex digits, with room
SI_KERNEL = 0x80  # si_code of a general protection fault: what a misaligned SSE access raises

_SKIP = skip_matcher(USERSPACE_SKIP)
_SKIP_MODULE = re.compile("|".join(f"(?:{entry})" for entry in USERSPACE_SKIP_MODULES))
_SKIP_FILE = re.compile("|".join(f"(?:{entry})" for entry in USERSPACE_SKIP_FILES))
_RULES = (("userspace-runtime", _SKIP),)  # signal delivery, abort, unwinding, thread start
_OVERFLOW_HANDLER = re.compile("|".join(f"(?:{entry})" for entry in STACK_OVERFLOW_HANDLERS))
MAX_MAPPINGS = 4096  # read for the fault address's neighbourhood (a core reader sends at most that)


@dataclass
class UserCrash:
    """What the stack tells: the ingredients of a userspace signature."""

    executable: str
    signal: str
    labels: list[str] = field(default_factory=list)
    function: str | None = None
    module: str | None = None
    frames: list[str] = field(default_factory=list)
    keyed: list[str] = field(default_factory=list)  # what the fingerprint keys on (key_frames)
    named: list[tuple[str, str | None]] = field(default_factory=list)  # every frame read
    guilty: int | None = None  # position of the guilty frame in `named`
    origins: list[FrameOrigin] = field(default_factory=list)  # of each frame in `named`
    passed: list[str | None] = field(default_factory=list)  # of each frame in `named`: passed_over's rule


SourceLine = tuple[str, int]  # file, line: where the debug info puts a frame


class FrameOrigin(NamedTuple):
    """Where a frame in `named` lies: the module offset of the stack frame it was read from,
    as sent (what ties a frame the registry named from debug info back to the frame the reporter
    sent), its source line, whether it is a call the debug info found inlined there
    (registry/symbolication puts those before their caller, at the caller's offset), and its
    symbol as sent (what says whether the function has internal linkage: key_frames)."""

    offset: str | None
    source: SourceLine | None = None
    inlined: bool = False
    symbol: str | None = None


NO_ORIGIN = FrameOrigin(None)  # a frame read from no stack frame (the red zone's)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip()[:40], 0)
        except ValueError:
            return None
    return None


def _text(value: Any) -> str:
    return value[:MAX_NAME] if isinstance(value, str) else ""


def _file_name(path: Any) -> str:
    """A module's or executable's file name (a path's last part, then bounded: a long path's
    cut would leave a directory's name)."""
    return _text(path.rsplit("/", 1)[-1]) if isinstance(path, str) else ""


def _bounded(name: str) -> str:
    """A name within MAX_NAME: a longer one (a class template's instance over the standard
    library's containers) keeps its head and its tail, which holds the function's own name
    (`...::count`), with an ellipsis between."""
    if len(name) <= MAX_NAME:
        return name
    head = MAX_NAME // 2
    return f"{name[:head]}…{name[head + 1 - MAX_NAME:]}"


def _function(value: Any) -> str:
    """A frame's function as the engine names it: named from the whole of what was sent (a
    demangled C++ name runs past MAX_NAME before its parameters), then bounded."""
    if not isinstance(value, str):
        return ""
    return _bounded(canonical_function(value[:MAX_SYMBOL].strip(), kernel=False))


def _register(registers: Any, names: tuple[str, ...]) -> tuple[str, int] | None:
    if not isinstance(registers, dict):
        return None
    for name in names:
        value = as_int(registers.get(name))
        if value is not None:
            return name, value
    return None


@dataclass(frozen=True)
class Slot:
    """A stack slot near %rsp at the fault, and what its value points at when it is code."""

    offset: int
    value: int
    function: str | None
    module: str | None
    call: bool  # the value is a return address: it follows a call instruction


class GuardFault(NamedTuple):
    address: int
    sp: int
    stack_bottom: int  # the start of the stack whose guard the address is in
    caught: bool  # a signal handler caught it; the crash is the handler's abort


@dataclass(frozen=True)
class Evidence:
    """The facts a label needs, read from the report's `stack` (absent ones are None)."""

    pc: int | None
    sp: int | None
    sp_register: str | None
    si_code: int | None
    pc_perms: str | None  # "" when the pc is in no mapping
    pc_bytes: bytes | None
    pc_entry: bool | None
    cfa: int | None
    slots: dict[int, Slot]
    frame_modules: tuple[str | None, str | None]  # of frame 0 and frame 1
    # A fault in a stack's guard (no mapping, or a no-access one, within STACK_GUARD_GAP below
    # a writable mapping without a file): the crash's own, else one a signal handler caught.
    guard_fault: GuardFault | None = None
    overflow_handler: str | None = None  # a runtime's guard-page handler among the frames

    def slot(self, offset: int) -> Slot | None:
        return self.slots.get(offset)


def _slots(raw: Any) -> dict[int, Slot]:
    slots = {}
    for item in raw[:MAX_SLOTS] if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        offset, value = as_int(item.get("offset")), as_int(item.get("value"))
        if offset is None or value is None:
            continue
        function = _function(item.get("function")) or None
        module = _file_name(item.get("module")) or None
        slots[offset] = Slot(offset, value, function, module, item.get("call") is True)
    return slots


def _bytes(value: Any) -> bytes | None:
    try:
        return bytes.fromhex(value[:64]) if isinstance(value, str) else None
    except ValueError:
        return None


def _guard_fault(mappings: Any, faults: list[tuple[int | None, int | None, bool]]) -> GuardFault | None:
    """The first of `faults` (address, stack pointer, caught) whose address is in a stack's guard."""
    for address, sp, caught in faults:
        bottom = _stack_bottom(mappings, address)
        if bottom is not None and address is not None and sp is not None:
            return GuardFault(address, sp, bottom, caught)
    return None


def _stack_bottom(mappings: Any, address: int | None) -> int | None:
    """The start of the stack whose guard `address` lies in (module docstring of patterns'
    STACK_GUARD_GAP), or None."""
    if address is None or not isinstance(mappings, list):
        return None
    above: tuple[int, str, str] | None = None
    for mapping in mappings[:MAX_MAPPINGS]:
        if not isinstance(mapping, dict):
            continue
        start, end = as_int(mapping.get("start")), as_int(mapping.get("end"))
        if start is None or end is None:
            continue
        perms, path = _text(mapping.get("perms")), _text(mapping.get("path"))
        if start <= address < end and perms[:3] != "---":
            return None  # an access the mapping refused is not a guard's
        if address < start and (above is None or start < above[0]):
            above = (start, perms, path)
    if above is None or above[0] - address > STACK_GUARD_GAP:
        return None
    start, perms, path = above
    return start if perms[:2] == "rw" and path in ("", "[stack]") else None


def read_evidence(stack: dict[str, Any]) -> Evidence | None:
    """The evidence of a stack, or None when it has none (a report from an older reader)."""
    raw = stack.get("evidence")
    if not isinstance(raw, dict):
        return None
    ip = _register(stack.get("registers"), IP_REGISTERS)
    sp = _register(stack.get("registers"), SP_REGISTERS)
    frames = stack.get("frames") if isinstance(stack.get("frames"), list) else []
    modules = [_file_name(f.get("module")) or None if isinstance(f, dict) else None
               for f in frames[:2]] + [None, None]
    perms = raw.get("pc_perms")
    handler = next((name[0] for frame in frames[:MAX_FRAMES] if (name := frame_name(frame))
                    and _OVERFLOW_HANDLER.search(name[0])), None)
    return Evidence(
        pc=ip[1] if ip else None, sp=sp[1] if sp else None, sp_register=sp[0] if sp else None,
        si_code=as_int(raw.get("si_code")),
        pc_perms=perms[:8] if isinstance(perms, str) else None,
        pc_bytes=_bytes(raw.get("pc_bytes")),
        pc_entry=raw.get("pc_entry") if isinstance(raw.get("pc_entry"), bool) else None,
        cfa=as_int(raw.get("cfa")), slots=_slots(raw.get("slots")),
        frame_modules=(modules[0], modules[1]),
        guard_fault=_guard_fault(stack.get("mappings"), [
            (as_int(raw.get("si_addr")), sp[1] if sp else None, False),
            (as_int(raw.get("caught_fault_address")), as_int(raw.get("caught_fault_sp")), True)]),
        overflow_handler=handler)


# --- the proofs, one per label ------------------------------------------------------------


def _popped(evidence: Evidence) -> int | None:
    """The value `ret` took: the slot just below %rsp after the return."""
    slot = evidence.slot(-8)
    return slot.value if slot else None


def returned_to_null(evidence: Evidence) -> bool:
    """pc 0, reached by a `ret` that popped 0. A call through a NULL pointer also lands on 0,
    but leaves its return address on top of the stack instead."""
    return evidence.pc == 0 and _popped(evidence) == 0 and not called_through_a_pointer(evidence)


def called_through_a_pointer(evidence: Evidence) -> bool:
    """The pc was reached by a `call` (through a garbage function pointer: the caller's bug),
    not by a `ret`: the top of the stack holds the return address the call pushed, into the
    caller, and nothing below it names another function. After a bad `ret`, the slots below
    name the function that returned (its own calls' return addresses), which is not the one
    the top slot returns into (its caller's, when the frame was unbalanced)."""
    top = evidence.slot(0)
    if not (top and top.call):
        return False
    returned = returning_function(evidence)
    return returned is None or returned == (top.function, top.module)


def returned_to_non_code(evidence: Evidence) -> bool:
    """pc in memory that is not executable (or not mapped), reached by a `ret` that popped it."""
    return (bool(evidence.pc) and evidence.pc_perms is not None and "x" not in evidence.pc_perms
            and _popped(evidence) == evidence.pc and not called_through_a_pointer(evidence))


# x86-64 return instructions: ret, ret imm16, and with a rep (AMD's branch hint) or bnd prefix.
RET_OPCODES = (b"\xc3", b"\xc2", b"\xf3\xc3", b"\xf2\xc3", b"\xf3\xc2", b"\xf2\xc2")


def canonical(address: int) -> bool:
    """An x86-64 address the CPU can hold in %rip: bits 63 to 47 all equal (48-bit virtual addresses)."""
    return (address >> 47) in (0, (1 << 17) - 1)


def faulted_on_its_ret(evidence: Evidence) -> bool:
    """A `ret` to an address that is not canonical faults before it jumps, as a general
    protection fault (SI_KERNEL) on the `ret` itself: the pc still in the function returning,
    the bad target still on top of the stack. What a string copied over a return address gives
    (ASCII makes no canonical address)."""
    top = evidence.slot(0)
    return (evidence.sp_register == "rsp" and evidence.si_code == SI_KERNEL and top is not None
            and not canonical(top.value) and evidence.pc_bytes is not None
            and evidence.pc_bytes.startswith(RET_OPCODES))


def returned_badly(evidence: Evidence) -> bool:
    """A `ret` to an address that is not code: taken, or faulting on the `ret`."""
    return returned_to_non_code(evidence) or faulted_on_its_ret(evidence)


def landed_after_a_bad_return(evidence: Evidence) -> bool:
    """The pc is where a bad `ret` went (0, or memory that is not code): frame 0 is no function."""
    return returned_to_null(evidence) or returned_to_non_code(evidence)


# SSE/AVX moves that fault on a misaligned memory operand (movaps/movapd, movdqa, movntdq,
# movntps/pd): (mandatory prefix, opcode after 0F).
ALIGNED_SSE = frozenset({(None, 0x28), (None, 0x29), (0x66, 0x28), (0x66, 0x29), (0x66, 0x6F),
                         (0x66, 0x7F), (0x66, 0xE7), (None, 0x2B), (0x66, 0x2B)})


def aligned_stack_access(code: bytes) -> bool:
    """The instruction is an aligned SSE move whose memory operand is based on %rsp or %rbp."""
    at, prefix = 0, None
    while at < len(code) and code[at] in (0x66, 0xF2, 0xF3):
        prefix = code[at]
        at += 1
    if at < len(code) and 0x40 <= code[at] <= 0x4F:  # REX
        rex = code[at]
        at += 1
    else:
        rex = 0
    if at + 2 >= len(code) or code[at] != 0x0F or (prefix, code[at + 1]) not in ALIGNED_SSE:
        return False
    modrm = code[at + 2]
    mod, rm = modrm >> 6, modrm & 7
    if mod == 3:
        return False
    base = rm
    if rm == 4 and at + 3 < len(code):  # SIB byte: its base
        base = code[at + 3] & 7
    return not rex & 1 and (base == 4 or (base == 5 and mod != 0))


def misaligned_stack(evidence: Evidence) -> bool:
    """Where the ABI fixes %rsp: an aligned SSE access to the stack faulting as a general
    protection fault (SI_KERNEL); or a CFA not 16-byte aligned (at a function's entry, %rsp
    + 8 is the CFA) in a function called from another module. Calls inside one module do not
    count: a compiler that sees every caller may drop the alignment (GCC does)."""
    alignment = dict(STACK_ALIGNMENT).get(evidence.sp_register or "")
    if not alignment:
        return False
    if evidence.si_code == SI_KERNEL and evidence.pc_bytes and aligned_stack_access(evidence.pc_bytes):
        return True
    cfa = evidence.cfa
    if cfa is None and evidence.pc_entry and evidence.sp is not None:
        cfa = evidence.sp + 8
    inner, outer = evidence.frame_modules
    return cfa is not None and bool(inner and outer) and inner != outer and cfa % alignment != 0


def overflowed_its_stack(evidence: Evidence) -> bool:
    """The fault hit a stack's guard at the stack pointer: the thread used up its stack (a
    runaway recursion, a frame too large); the crash's own fault, or one a signal handler
    caught before it aborted (a crash reporter's, Rust's std, which prints "has overflowed its
    stack": its handler also proves it by name)."""
    if evidence.overflow_handler is not None:
        return True
    fault = evidence.guard_fault
    return fault is not None and fault.sp - FAULT_BELOW_SP <= fault.address <= fault.sp + FAULT_ABOVE_SP


PROOFS: dict[str, Callable[[Evidence], bool]] = {
    "stack-overflow": overflowed_its_stack,
    "return-to-null": returned_to_null,
    "bad-return": returned_badly,
    "misaligned-stack": misaligned_stack,
}


def failure_labels(evidence: Evidence | None) -> list[str]:
    """The corruption labels the evidence proves, in USERSPACE_LABELS order."""
    if evidence is None:
        return []
    return [label for label in USERSPACE_LABELS if PROOFS[label](evidence)]


def returning_function(evidence: Evidence) -> tuple[str, str | None] | None:
    """The function whose `ret` went wrong: its calls left their return addresses (code
    pointers into it) in the red zone below the popped slot; the nearest one names it."""
    for offset in range(-16, -136, -8):
        slot = evidence.slot(offset)
        if slot and slot.call and slot.function:
            return slot.function, slot.module
    return None


# --- frames -------------------------------------------------------------------------------


def frame_name(frame: Any) -> tuple[str, str | None] | None:
    """(function, module) of a frame; module+offset when it has no symbol; None if unusable.
    The function is read from the frame's `symbol` (as the symbol table or debug info spells
    it) when it has one, else from `function` (its demangled spelling, which a reporter may
    have cut)."""
    if not isinstance(frame, dict):
        return None
    module = _file_name(frame.get("module")) or None
    for name in ("symbol", "function"):
        function = _function(frame.get(name))
        if function and function != "??":  # addr2line's and gdb's "no name"
            return function, module
    offset = _text(frame.get("offset"))
    if module and offset:
        return f"{module}+{offset.lower()}", module
    return None


def _source_line(frame: Any) -> SourceLine | None:
    """The file and line a symbolicated frame carries (registry/symbolication), if any."""
    if not isinstance(frame, dict) or not isinstance(frame.get("file"), str):
        return None
    line = as_int(frame.get("line"))
    return (frame["file"][:MAX_PATH], line) if line is not None and line > 0 else None


def frame_origin(frame: Any) -> FrameOrigin:
    """Where a stack frame is: its module offset as sent (the contract's hex string), its source
    line, and whether registry/symbolication made it as an inlined call (`inlined: true`; a
    reporter's `inlined` is a list of the calls, kept in the frame it sent)."""
    if not isinstance(frame, dict):
        return NO_ORIGIN
    offset = frame.get("offset")
    offset = offset.lower()[:MAX_OFFSET] if isinstance(offset, str) and offset else None
    symbol = frame.get("symbol")
    symbol = symbol[:MAX_SYMBOL] if isinstance(symbol, str) else None
    return FrameOrigin(offset, _source_line(frame), frame.get("inlined") is True, symbol)


def runtime_module(module: str | None) -> bool:
    """A module of the runtime (the C library, the C++ runtime, the loader), by file name."""
    return isinstance(module, str) and bool(_SKIP_MODULE.search(module.rsplit("/", 1)[-1]))


def runtime_frame(name: tuple[str, str | None], origin: FrameOrigin = NO_ORIGIN) -> bool:
    """A frame of the runtime, not of the program: by function (signal delivery, abort,
    unwinding, thread start), by module, or by the source file its debug info names (a
    system header's or a standard library's code in the program's module)."""
    function, module = name
    return (bool(_SKIP.match(function)) or runtime_module(module)
            or (origin.source is not None and bool(_SKIP_FILE.match(origin.source[0]))))


def inlined_lambda(name: tuple[str, str | None], origin: FrameOrigin) -> bool:
    """An inlined call of a lambda as the debug info names it: `operator()`, with no class or
    enclosing function (a lambda's call operator has no linkage name). Every lambda a program
    inlines has that name, so it names no bug: the function it was inlined into does, as the
    symbol table alone names the crash."""
    return origin.inlined and name[0] == "operator()"


def passed_over(name: tuple[str, str | None], origin: FrameOrigin) -> str | None:
    """Why a frame read is not the program's own code the guilty frame is searched for (the
    explanation's rule), or None: the runtime's, or a lambda's inlined call."""
    if runtime_frame(name, origin):
        return "userspace-runtime"
    return "inlined-lambda" if inlined_lambda(name, origin) else None


def explain_user_frames(crash: UserCrash) -> tuple[list[ExplainedFrame], int | None]:
    """The frames read, each guilty, used (real code) or skipped as runtime machinery."""
    decisions, guilty = frame_decisions(crash.named, crash.guilty, _RULES, None)
    first = crash.guilty - guilty if crash.guilty is not None and guilty is not None else 0
    for at, decision in enumerate(decisions, first):
        origin = crash.origins[at] if at < len(crash.origins) else NO_ORIGIN
        rule = crash.passed[at] if at < len(crash.passed) else None
        if decision["decision"] == "used" and rule is not None:
            decision["decision"], decision["rule"] = "skipped", rule
        if origin.source is not None:
            decision["file"], decision["line"] = origin.source
        if origin.offset is not None:
            decision["offset"] = origin.offset
        if origin.inlined:
            decision["inlined"] = True
    return decisions, guilty


def _after_signal_delivery(frames: list[Any]) -> int | None:
    """How many named frames follow the first signal trampoline, when the code the signal
    interrupted is guilty (None: it is not). A fault the program's own handler caught and then
    died of (abort, raise) is the interrupted code's bug: the handler is crash-reporting
    machinery, and the crash's innermost frame is the runtime's. A handler that faults in its
    own code is the handler's bug."""
    at = next((i for i, frame in enumerate(frames)
               if isinstance(frame, dict) and frame.get("signal_frame") is True), None)
    if at is None:
        return None
    handler, after = _read_frames(frames[:at]), _read_frames(frames[at + 1:])
    if handler and not runtime_frame(*handler[0]):
        return None
    return len(after) if any(not runtime_frame(*read) for read in after) else None


def _read_frames(frames: list[Any]) -> list[tuple[tuple[str, str | None], FrameOrigin]]:
    """The frames that name something, each with where it lies."""
    return [(name, frame_origin(frame)) for frame in frames if (name := frame_name(frame)) is not None]


def unnamed(name: str, module: str | None) -> bool:
    """A frame read as module+offset: no symbol named it, on the host nor in the registry."""
    return module is not None and name.startswith(f"{module}+")


def key_frames(kept: list[tuple[str, str | None]], symbol: str | None = None) -> list[str]:
    """What a userspace fingerprint keys on: the guilty frame, named. Unnamed, it may be code of
    a runtime the program carries in its own module (Rust's std, C++'s templates), the same for
    every panic or throw: then the unnamed frames of its module below it too, up to
    UNNAMED_KEY_FRAMES, so that crashes reached from different code stay apart (and their dumps
    taken) until symbols name them and the rebuild joins what is one bug. A named frame is keyed
    as debug info spells it inlined (demangle.inlined_spelling; `symbol`, the guilty frame's,
    says whether it has internal linkage): a release that stops inlining the guilty function
    does not rename the bug."""
    guilty, module = kept[0]
    if not unnamed(guilty, module):
        internal = symbol is not None and internal_linkage(symbol)
        return [frame_label(inlined_spelling(guilty, internal), module)]
    run = itertools.takewhile(lambda frame: frame[1] == module and unnamed(*frame), kept)
    return [name for name, _ in itertools.islice(run, UNNAMED_KEY_FRAMES)]


def parse_stack(stack: Any) -> UserCrash | None:
    """The userspace crash described by a contract `stack` object, or None if it holds none."""
    if not isinstance(stack, dict):
        return None
    frames = stack.get("frames")
    frames = frames[:MAX_FRAMES] if isinstance(frames, list) else []
    signal = _text(stack.get("signal")).upper()
    crash = UserCrash(executable=_file_name(stack.get("executable")), signal=signal)
    evidence = read_evidence(stack)
    crash.labels = failure_labels(evidence)
    if signal in SIGNAL_LABELS:
        crash.labels.append(SIGNAL_LABELS[signal])
    read = _read_frames(frames)
    interrupted = _after_signal_delivery(frames)
    if evidence is not None and landed_after_a_bad_return(evidence):
        # Frame 0 is the bad pc (0, or data): the guilty frame is the function that returned.
        if read and frames and isinstance(frames[0], dict) and frame_name(frames[0]) == read[0][0]:
            read = read[1:]
        returned = returning_function(evidence)
        if returned is not None:
            read = [(returned, NO_ORIGIN), *read]
    named = crash.named = [name for name, _ in read]
    crash.origins = [origin for _, origin in read]
    first = len(named) - interrupted if interrupted is not None and interrupted < len(named) else 0
    passed = crash.passed = [passed_over(*frame) for frame in read]
    crash.guilty = next((i for i in range(first, len(named)) if passed[i] is None), None)
    guilty = len(named) if crash.guilty is None else crash.guilty
    kept = [name for name, rule in zip(named[guilty:], passed[guilty:], strict=True) if rule is None]
    if kept:
        crash.function, crash.module = kept[0]
        crash.frames = [frame_label(name, None if unnamed(name, module) else module)
                        for name, module in kept[:FRAMES_KEPT]]
        crash.keyed = key_frames(kept, crash.origins[guilty].symbol)
    if not kept and not crash.labels:
        return None
    return crash
