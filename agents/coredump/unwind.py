"""Walk a thread's stack: .eh_frame CFI first, then the %rbp chain, then "[rsp] holds a
return address" (a value just after a call instruction in an executable mapping), and for code
whose bytes are out of reach (a library of another machine, left out of the core) a scan up the
stack for the first such return address.

Bounded: at most MAX_FRAMES frames, and the memory reader's own byte budget.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from agents.reporter.elf import PF_R, PF_W, PF_X

from .cfi import DWARF_REGISTERS, RA, RBP, RSP, CfiError, caller_registers, rules_at
from .core import CoreHead, Memory
from .modules import Module, module_at

MAX_FRAMES = 128
MAX_FRAME_SIZE = 8 << 20  # a frame pointer further than this above the stack pointer is not one
SCAN_WORDS = 512  # how far above %rsp a scan looks for a return address: 4 KiB


@dataclass(frozen=True)
class Mapping:
    """A mapping of the process (a core PT_LOAD), with the permissions the kernel gave it."""

    start: int
    end: int
    perms: str  # "r-xp" as /proc/<pid>/maps writes it
    path: str = ""


class ProcessView:
    """The crashed process: its memory (code the core left out read from the module files),
    its mappings with permissions, its modules."""

    def __init__(self, head: CoreHead, memory: Memory, modules: list[Module]) -> None:
        self.memory, self.modules = memory, modules
        paths = {(f.start, f.end): f.path for f in head.files}
        self.mappings = [Mapping(s.vaddr, s.vaddr + s.memsz, _perms(s.flags),
                                 paths.get((s.vaddr, s.vaddr + s.memsz), ""))
                         for s in sorted(head.loads, key=lambda s: s.vaddr)]
        self.starts = [m.start for m in self.mappings]

    def mapping_at(self, address: int) -> Mapping | None:
        index = bisect.bisect_right(self.starts, address) - 1
        if index >= 0 and address < self.mappings[index].end:
            return self.mappings[index]
        return None

    def module_at(self, address: int) -> Module | None:
        return module_at(self.modules, address)

    def read(self, address: int, size: int) -> bytes | None:
        data = self.memory.read(address, size)
        if data is None:
            module = self.module_at(address)
            data = module.read_text(address, size) if module else None
        return data

    def word(self, address: int, size: int = 8) -> int | None:
        raw = self.read(address, size)
        return int.from_bytes(raw, "little") if raw else None

    def executable(self, address: int) -> bool:
        mapping = self.mapping_at(address)
        return mapping is not None and "x" in mapping.perms

    def is_return_address(self, value: int) -> bool:
        """`value` lies in executable memory just after a call instruction."""
        if value < 8 or not self.executable(value):
            return False
        before = self.read(value - 8, 8)
        return before is not None and follows_call(before)


def _perms(flags: int) -> str:
    """Program header flags as /proc/<pid>/maps writes them (a core's mappings are private)."""
    letters = ((PF_R, "r"), (PF_W, "w"), (PF_X, "x"))
    return "".join(letter if flags & bit else "-" for bit, letter in letters) + "p"


def _modrm_length(modrm: int, sib: int | None) -> int:
    """Bytes of a ModRM operand (ModRM, SIB, displacement) in 64-bit mode."""
    mod, rm = modrm >> 6, modrm & 7
    if mod == 3:
        return 1
    length = 1 + (rm == 4)
    if mod == 0:
        if rm == 5:
            return 5
        if rm == 4 and sib is not None and sib & 7 == 5:
            return length + 4
        return length
    return length + (1 if mod == 1 else 4)


def follows_call(before: bytes) -> bool:
    """The 8 bytes before an address end with a call: E8 rel32, or FF /2 (an indirect call,
    optionally with a REX prefix)."""
    if before[-5] == 0xE8:
        return True
    for length in range(2, 8):
        at = len(before) - length
        if before[at] != 0xFF or (before[at + 1] >> 3) & 7 != 2:
            continue
        sib = before[at + 2] if at + 2 < len(before) else None
        if 1 + _modrm_length(before[at + 1], sib) == length:
            return True
    return False


@dataclass
class Frame:
    pc: int
    sp: int
    how: str  # registers (frame 0) | cfi | frame-pointer | stack-top
    interrupted: bool  # the pc is the instruction itself (frame 0, a signal), not a return address
    cfa: int | None = None  # the canonical frame address CFI gave this frame
    signal_frame: bool = False  # a signal trampoline (its CIE has the "S" augmentation)

    @property
    def lookup_pc(self) -> int:
        """Where the frame is: a return address is just after the call, so look at pc - 1."""
        return self.pc if self.interrupted else self.pc - 1


Step = tuple[dict[int, int], Frame]  # the caller's registers and frame


def _dwarf(registers: dict[str, int]) -> dict[int, int]:
    return {number: registers[name] for number, name in enumerate(DWARF_REGISTERS) if name in registers}


def unwind(view: ProcessView, registers: dict[str, int], max_frames: int = MAX_FRAMES) -> list[Frame]:
    """The frames of one thread, innermost first."""
    regs = _dwarf(registers)
    frames = [Frame(registers.get("rip", 0), registers.get("rsp", 0), "registers", True)]
    while len(frames) < max_frames:
        frame = frames[-1]
        step = _cfi_step(view, frame, regs) or _fallback_step(view, frame, regs)
        if step is None:
            break
        regs, caller = step
        if caller.pc == 0 or (caller.sp <= frame.sp and not frame.signal_frame):
            break
        frames.append(caller)
    return frames


def _cfi_step(view: ProcessView, frame: Frame, regs: dict[int, int]) -> Step | None:
    module = view.module_at(frame.pc)
    if module is None or module.eh_frame is None:
        return None
    fde = module.eh_frame.find(frame.lookup_pc - module.bias)
    if fde is None:
        return None
    try:
        rules = rules_at(fde, frame.lookup_pc - module.bias)
        cfa, caller = caller_registers(rules, regs | {RA: frame.pc}, view.word)
    except CfiError:
        return None
    frame.cfa = cfa
    frame.signal_frame = fde.cie.signal_frame
    if fde.cie.return_register not in caller:  # the outermost frame: _start, a thread's clone
        return regs, Frame(0, 0, "cfi", False)
    pc = caller.pop(fde.cie.return_register)
    caller.pop(RA, None)
    return caller, Frame(pc, caller.get(RSP, cfa), "cfi", fde.cie.signal_frame)


def _fallback_step(view: ProcessView, frame: Frame, regs: dict[int, int]) -> Step | None:
    """No CFI for this pc: a bad pc (0, data) is best read from the top of the stack, which
    holds a return address when the pc came from a call; code is best read from %rbp; code
    that cannot be read at all (no CFI, no bytes) by a scan up the stack, since its %rbp may be
    anything (a library built without frame pointers) and its frame is often a leaf's."""
    if not view.executable(frame.pc):
        steps = (_stack_top_step, _frame_pointer_step)
    elif view.read(frame.lookup_pc, 1) is None:
        steps = (_scan_step, _frame_pointer_step)
    else:
        steps = (_frame_pointer_step, _stack_top_step)
    for step in steps:
        found = step(view, frame, regs)
        if found is not None:
            return found
    return None


def _frame_pointer_step(view: ProcessView, frame: Frame, regs: dict[int, int]) -> Step | None:
    rbp = regs.get(RBP)
    if rbp is None or rbp % 8 or not frame.sp <= rbp < frame.sp + MAX_FRAME_SIZE:
        return None
    saved, pc = view.word(rbp), view.word(rbp + 8)
    if saved is None or pc is None or not view.executable(pc):
        return None
    caller = dict(regs)
    caller[RBP], caller[RSP] = saved, rbp + 16
    return caller, Frame(pc, rbp + 16, "frame-pointer", False)


def _scan_step(view: ProcessView, frame: Frame, regs: dict[int, int]) -> Step | None:
    """Code that cannot be read (no CFI, no bytes: a library whose file is not the one that was
    mapped): the first word above %rsp that is a return address into code that can be read.
    Its caller's %rbp is the frame record above that (a saved %rbp pointing higher, then a
    return address), for callers that keep frame pointers; else it is unknown."""
    sp = regs.get(RSP, frame.sp)
    for slot in range(sp, sp + 8 * SCAN_WORDS, 8):
        value = view.word(slot)
        if value is not None and view.is_return_address(value):
            caller = {number: value for number, value in regs.items() if number != RBP}
            caller[RSP] = slot + 8
            record = _frame_record(view, slot + 8)
            if record is not None:
                caller[RBP] = record
            return caller, Frame(value, slot + 8, "stack-scan", False)
    return None


def _frame_record(view: ProcessView, low: int) -> int | None:
    """The first frame record at or above `low`: [at] a saved %rbp above it, [at + 8] a return
    address."""
    for at in range(low, low + 8 * SCAN_WORDS, 8):
        saved = view.word(at)
        if saved is not None and at < saved < at + MAX_FRAME_SIZE:
            returned = view.word(at + 8)
            if returned is not None and view.is_return_address(returned):
                return at
    return None


def _stack_top_step(view: ProcessView, frame: Frame, regs: dict[int, int]) -> Step | None:
    sp = regs.get(RSP, frame.sp)
    pc = view.word(sp)
    if pc is None or not view.is_return_address(pc):
        return None
    caller = dict(regs)
    caller[RSP] = sp + 8
    return caller, Frame(pc, sp + 8, "stack-top", False)
