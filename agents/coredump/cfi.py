""".eh_frame call frame information: find a pc's FDE, run its CIE's and its own DW_CFA program
up to the pc, and compute the caller's registers (System V x86-64 psABI, DWARF 4 section 6.4,
LSB "Exception Frames" for the .eh_frame encodings).

Addresses here are the module's link-time addresses; the unwinder adds the load bias.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

# DWARF register numbers of x86-64 (psABI figure 3.36); 16 is the return address column.
DWARF_REGISTERS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
                   "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip")
RSP, RBP, RA = 7, 6, 16

DW_EH_PE_omit = 0xFF
MAX_CFA_OPS = 10_000  # a program longer than this is not a compiler's
MAX_EXPRESSION_STEPS = 1_000
MAX_STACK = 64
MAX_LINEAR_FDES = 200_000


class CfiError(ValueError):
    """Call frame information that cannot be read or run."""


class Cursor:
    """Reads DWARF's variable-length numbers and the .eh_frame pointer encodings."""

    def __init__(self, data: bytes, at: int = 0, base: int = 0) -> None:
        self.data, self.at, self.base = data, at, base  # base: the address of data[0]

    def need(self, size: int) -> None:
        if self.at + size > len(self.data):
            raise CfiError("truncated call frame information")

    def u8(self) -> int:
        self.need(1)
        self.at += 1
        return self.data[self.at - 1]

    def fixed(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        self.need(size)
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += size
        return value

    def _leb128(self) -> tuple[int, int, int]:
        """(value bits, bit count, last byte) of a LEB128 number."""
        result = shift = 0
        while True:
            byte = self.u8()
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return result, shift, byte
            if shift > 70:
                raise CfiError("LEB128 too long")

    def uleb(self) -> int:
        return self._leb128()[0]

    def sleb(self) -> int:
        result, shift, last = self._leb128()
        return result - (1 << shift) if last & 0x40 else result

    def block(self, size: int) -> bytes:
        self.need(size)
        self.at += size
        return self.data[self.at - size:self.at]

    def pointer(self, encoding: int, datarel: int = 0) -> int:
        """A DW_EH_PE_* encoded pointer (never indirect: those only name personality routines)."""
        if encoding == DW_EH_PE_omit:
            return 0
        where = self.base + self.at
        value = POINTER_FORMATS.get(encoding & 0x0F, _bad_format)(self)
        relative = encoding & 0x70
        if relative == 0x10:
            value += where
        elif relative == 0x30:
            value += datarel
        elif relative not in (0, 0x50):
            raise CfiError(f"pointer encoding {encoding:#x}")
        return value & 0xFFFFFFFFFFFFFFFF


def _bad_format(cursor: Cursor) -> int:
    raise CfiError("unknown pointer format")


POINTER_FORMATS: dict[int, Callable[[Cursor], int]] = {
    0x0: lambda c: c.fixed("<Q"), 0x1: Cursor.uleb, 0x2: lambda c: c.fixed("<H"),
    0x3: lambda c: c.fixed("<I"), 0x4: lambda c: c.fixed("<Q"), 0x9: Cursor.sleb,
    0xA: lambda c: c.fixed("<h"), 0xB: lambda c: c.fixed("<i"), 0xC: lambda c: c.fixed("<q"),
}


@dataclass
class Cie:
    code_align: int
    data_align: int
    return_register: int
    fde_encoding: int
    signal_frame: bool
    has_augmentation_data: bool
    instructions: bytes


@dataclass
class Fde:
    cie: Cie
    start: int
    end: int
    instructions: bytes


@dataclass
class Rules:
    """The CFA rule and each register's rule at one pc."""

    cfa: tuple = (RSP, 8)  # (register, offset) or ("expression", bytes)
    registers: dict[int, tuple] = field(default_factory=dict)

    def copy(self) -> Rules:
        return Rules(self.cfa, dict(self.registers))


class EhFrame:
    """One module's .eh_frame (and .eh_frame_hdr search table when it has one)."""

    def __init__(self, data: bytes, address: int, hdr: bytes | None = None, hdr_address: int = 0) -> None:
        self.data, self.address = data, address
        self.cies: dict[int, Cie] = {}
        self.table: list[tuple[int, int]] | None = None
        if hdr:
            try:
                self.table = self._hdr_table(hdr, hdr_address)
            except CfiError:
                self.table = None
        self.linear: list[tuple[int, int]] | None = None

    def _hdr_table(self, hdr: bytes, hdr_address: int) -> list[tuple[int, int]]:
        cursor = Cursor(hdr, 0, hdr_address)
        version, frame_encoding, count_encoding, table_encoding = (cursor.u8() for _ in range(4))
        if version != 1:
            raise CfiError("eh_frame_hdr version")
        cursor.pointer(frame_encoding, hdr_address)
        count = cursor.pointer(count_encoding, hdr_address) if count_encoding != DW_EH_PE_omit else 0
        if table_encoding == 0x3B:  # datarel sdata4: what every linker writes; read it in one go
            cursor.need(8 * count)
            values = struct.unpack_from(f"<{2 * count}i", hdr, cursor.at)
            return [(hdr_address + values[i], hdr_address + values[i + 1]) for i in range(0, 2 * count, 2)]
        return [(cursor.pointer(table_encoding, hdr_address), cursor.pointer(table_encoding, hdr_address))
                for _ in range(count)]

    def _linear_table(self) -> list[tuple[int, int]]:
        """Every FDE's start, for an .eh_frame without a search table."""
        table = []
        at = 0
        while at + 4 <= len(self.data) and len(table) < MAX_LINEAR_FDES:
            length, body = self._entry_length(at)
            if length == 0:
                break
            cie_pointer = struct.unpack_from("<I", self.data, body)[0]
            if cie_pointer:
                try:
                    fde = self._fde(at)
                    table.append((fde.start, self.address + at))
                except CfiError:
                    pass
            at = body + length
        return sorted(table)

    def _entry_length(self, at: int) -> tuple[int, int]:
        length = struct.unpack_from("<I", self.data, at)[0]
        if length == 0xFFFFFFFF:
            if at + 12 > len(self.data):
                raise CfiError("truncated")
            return struct.unpack_from("<Q", self.data, at + 4)[0], at + 12
        return length, at + 4

    def _cie(self, at: int) -> Cie:
        if at in self.cies:
            return self.cies[at]
        length, body = self._entry_length(at)
        cursor = Cursor(self.data[:body + length], body, self.address)
        if cursor.fixed("<I") != 0:
            raise CfiError("not a CIE")
        version = cursor.u8()
        end = self.data.find(b"\0", cursor.at, body + length)
        if end < 0:
            raise CfiError("CIE augmentation")
        augmentation = self.data[cursor.at:end].decode("latin-1")
        cursor.at = end + 1
        if "eh" in augmentation:
            cursor.fixed("<Q")
        code_align, data_align = cursor.uleb(), cursor.sleb()
        return_register = cursor.u8() if version == 1 else cursor.uleb()
        encoding, signal = 0, False
        if augmentation.startswith("z"):
            size = cursor.uleb()
            data_end = cursor.at + size
            for letter in augmentation[1:]:
                if letter == "R":
                    encoding = cursor.u8()
                elif letter == "P":
                    cursor.pointer(cursor.u8() & 0x7F)
                elif letter == "L":
                    cursor.u8()
                elif letter == "S":
                    signal = True
            cursor.at = data_end
        cie = Cie(code_align, data_align, return_register, encoding, signal,
                  augmentation.startswith("z"), self.data[cursor.at:body + length])
        self.cies[at] = cie
        return cie

    def _fde(self, at: int) -> Fde:
        length, body = self._entry_length(at)
        cursor = Cursor(self.data[:body + length], body, self.address)
        cie_pointer = cursor.fixed("<I")
        cie = self._cie(body - cie_pointer)
        start = cursor.pointer(cie.fde_encoding)
        size = cursor.pointer(cie.fde_encoding & 0x0F)
        if cie.has_augmentation_data:
            cursor.at += cursor.uleb()
        return Fde(cie, start, start + size, self.data[cursor.at:body + length])

    def find(self, pc: int) -> Fde | None:
        """The FDE covering link-time address `pc`."""
        table = self.table
        if table is None:
            if self.linear is None:
                self.linear = self._linear_table()
            table = self.linear
        index = bisect.bisect_right(table, (pc, 1 << 64)) - 1
        if index < 0:
            return None
        offset = table[index][1] - self.address
        if not 0 <= offset < len(self.data):
            return None
        try:
            fde = self._fde(offset)
        except (CfiError, struct.error):
            return None
        return fde if fde.start <= pc < fde.end else None


def rules_at(fde: Fde, pc: int) -> Rules:
    """Run the CIE's initial program, then the FDE's up to `pc` (a link-time address)."""
    cie = fde.cie
    initial = Rules()
    _run(cie.instructions, cie, initial, None, fde.start, pc)
    rules = initial.copy()
    _run(fde.instructions, cie, rules, initial, fde.start, pc)
    return rules


def _run(program: bytes, cie: Cie, rules: Rules, initial: Rules | None, location: int, pc: int) -> None:
    cursor = Cursor(program)
    saved: list[Rules] = []
    steps = 0
    while cursor.at < len(program) and steps < MAX_CFA_OPS:
        steps += 1
        op = cursor.u8()
        high, low = op & 0xC0, op & 0x3F
        if high == 0x40:  # DW_CFA_advance_loc
            location += low * cie.code_align
        elif high == 0x80:  # DW_CFA_offset
            rules.registers[low] = ("offset", cursor.uleb() * cie.data_align)
        elif high == 0xC0:  # DW_CFA_restore
            _restore(rules, initial, low)
        elif op in ADVANCES:
            location += ADVANCES[op](cursor) * cie.code_align
        elif op == 0x01:  # DW_CFA_set_loc
            location = cursor.pointer(cie.fde_encoding)
        elif op == 0x0A:  # remember_state
            saved.append(rules.copy())
        elif op == 0x0B:  # restore_state
            if saved:
                state = saved.pop()
                rules.cfa, rules.registers = state.cfa, state.registers
        else:
            handler = CFA_OPS.get(op)
            if handler is None:
                raise CfiError(f"DW_CFA op {op:#x}")
            handler(cursor, cie, rules, initial)
        if location > pc:
            return


ADVANCES: dict[int, Callable[[Cursor], int]] = {
    0x02: Cursor.u8, 0x03: lambda c: c.fixed("<H"), 0x04: lambda c: c.fixed("<I")}


def _restore(rules: Rules, initial: Rules | None, register: int) -> None:
    rule = initial.registers.get(register) if initial else None
    if rule is None:
        rules.registers.pop(register, None)
    else:
        rules.registers[register] = rule


def _def_cfa_register(c: Cursor, cie: Cie, rules: Rules, initial: Rules | None) -> None:
    offset = rules.cfa[1] if isinstance(rules.cfa[0], int) else 0
    rules.cfa = (c.uleb(), offset)


def _def_cfa_offset(offset: int, rules: Rules) -> None:
    if isinstance(rules.cfa[0], int):
        rules.cfa = (rules.cfa[0], offset)


def _set(register: int, rule: tuple, rules: Rules) -> None:
    rules.registers[register] = rule


CFA_OPS: dict[int, Callable[[Cursor, Cie, Rules, Rules | None], None]] = {
    0x00: lambda c, cie, r, i: None,  # nop
    0x05: lambda c, cie, r, i: _set(c.uleb(), ("offset", c.uleb() * cie.data_align), r),
    0x06: lambda c, cie, r, i: _restore(r, i, c.uleb()),
    0x07: lambda c, cie, r, i: _set(c.uleb(), ("undefined", 0), r),
    0x08: lambda c, cie, r, i: _set(c.uleb(), ("same", 0), r),
    0x09: lambda c, cie, r, i: _set(c.uleb(), ("register", c.uleb()), r),
    0x0C: lambda c, cie, r, i: setattr(r, "cfa", (c.uleb(), c.uleb())),
    0x0D: _def_cfa_register,
    0x0E: lambda c, cie, r, i: _def_cfa_offset(c.uleb(), r),
    0x0F: lambda c, cie, r, i: setattr(r, "cfa", ("expression", c.block(c.uleb()))),
    0x10: lambda c, cie, r, i: _set(c.uleb(), ("expression", c.block(c.uleb())), r),
    0x11: lambda c, cie, r, i: _set(c.uleb(), ("offset", c.sleb() * cie.data_align), r),
    0x12: lambda c, cie, r, i: setattr(r, "cfa", (c.uleb(), c.sleb() * cie.data_align)),
    0x13: lambda c, cie, r, i: _def_cfa_offset(c.sleb() * cie.data_align, r),
    0x14: lambda c, cie, r, i: _set(c.uleb(), ("val_offset", c.uleb() * cie.data_align), r),
    0x15: lambda c, cie, r, i: _set(c.uleb(), ("val_offset", c.sleb() * cie.data_align), r),
    0x16: lambda c, cie, r, i: _set(c.uleb(), ("val_expression", c.block(c.uleb())), r),
    0x2E: lambda c, cie, r, i: c.uleb(),  # DW_CFA_GNU_args_size: for landing pads only
    0x2F: lambda c, cie, r, i: _set(c.uleb(), ("offset", -c.uleb() * cie.data_align), r),
}


# --- DWARF expressions (DW_OP_*) ----------------------------------------------------------

MASK = 0xFFFFFFFFFFFFFFFF
ReadWord = Callable[[int, int], "int | None"]  # (address, size) -> value


def _signed(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


BINARY_OPS: dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,  # and
    0x1B: lambda a, b: _signed(a) // _signed(b) if b else 0,  # div
    0x1C: lambda a, b: a - b,  # minus
    0x1D: lambda a, b: a % b if b else 0,  # mod
    0x1E: lambda a, b: a * b,  # mul
    0x21: lambda a, b: a | b,  # or
    0x22: lambda a, b: a + b,  # plus
    0x24: lambda a, b: a << b if b < 64 else 0,  # shl
    0x25: lambda a, b: a >> b if b < 64 else 0,  # shr
    0x26: lambda a, b: _signed(a) >> min(b, 63),  # shra
    0x27: lambda a, b: a ^ b,  # xor
    0x29: lambda a, b: int(a == b), 0x2A: lambda a, b: int(_signed(a) >= _signed(b)),
    0x2B: lambda a, b: int(_signed(a) > _signed(b)), 0x2C: lambda a, b: int(_signed(a) <= _signed(b)),
    0x2D: lambda a, b: int(_signed(a) < _signed(b)), 0x2E: lambda a, b: int(a != b),
}
UNARY_OPS: dict[int, Callable[[int], int]] = {
    0x19: lambda a: abs(_signed(a)), 0x1F: lambda a: -a, 0x20: lambda a: ~a,
}
CONSTANTS: dict[int, Callable[[Cursor], int]] = {
    0x03: lambda c: c.fixed("<Q"), 0x08: Cursor.u8, 0x09: lambda c: c.fixed("<b"),
    0x0A: lambda c: c.fixed("<H"), 0x0B: lambda c: c.fixed("<h"), 0x0C: lambda c: c.fixed("<I"),
    0x0D: lambda c: c.fixed("<i"), 0x0E: lambda c: c.fixed("<Q"), 0x0F: lambda c: c.fixed("<q"),
    0x10: Cursor.uleb, 0x11: Cursor.sleb,
}


def evaluate(expression: bytes, registers: dict[int, int], read_word: ReadWord,
             push: int | None = None) -> int:
    """Run a DWARF expression (the subset CFI uses: constants, registers, arithmetic,
    comparisons, branches, dereferences) and return the top of its stack."""
    stack: list[int] = [] if push is None else [push]
    cursor = Cursor(expression)
    steps = 0
    while cursor.at < len(expression):
        steps += 1
        if steps > MAX_EXPRESSION_STEPS or len(stack) > MAX_STACK:
            raise CfiError("expression too long")
        op = cursor.u8()
        if 0x30 <= op <= 0x4F:  # lit0..lit31
            stack.append(op - 0x30)
        elif 0x50 <= op <= 0x6F:  # reg0..reg31
            stack.append(_register(registers, op - 0x50))
        elif 0x70 <= op <= 0x8F:  # breg0..breg31
            stack.append(_register(registers, op - 0x70) + cursor.sleb())
        elif op in CONSTANTS:
            stack.append(CONSTANTS[op](cursor))
        elif op in BINARY_OPS:
            b, a = _pop(stack), _pop(stack)
            stack.append(BINARY_OPS[op](a, b))
        elif op in UNARY_OPS:
            stack.append(UNARY_OPS[op](_pop(stack)))
        else:
            _stack_op(op, cursor, stack, registers, read_word)
        if stack:
            stack[-1] &= MASK
    return _pop(stack)


def _stack_op(op: int, cursor: Cursor, stack: list[int], registers: dict[int, int],
              read_word: ReadWord) -> None:
    if op == 0x12:  # dup
        stack.append(_peek(stack, 0))
    elif op == 0x13:  # drop
        _pop(stack)
    elif op == 0x14:  # over
        stack.append(_peek(stack, 1))
    elif op == 0x15:  # pick
        stack.append(_peek(stack, cursor.u8()))
    elif op == 0x16:  # swap
        stack[-2:] = stack[-2:][::-1]
    elif op == 0x17:  # rot
        stack[-3:] = [stack[-1], stack[-3], stack[-2]]
    elif op in (0x06, 0x94):  # deref, deref_size
        size = 8 if op == 0x06 else cursor.u8()
        value = read_word(_pop(stack), size)
        if value is None:
            raise CfiError("expression reads unreadable memory")
        stack.append(value)
    elif op == 0x23:  # plus_uconst
        stack.append(_pop(stack) + cursor.uleb())
    elif op == 0x2F:  # skip
        cursor.at += cursor.fixed("<h")
    elif op == 0x28:  # bra
        offset = cursor.fixed("<h")
        if _pop(stack):
            cursor.at += offset
    elif op == 0x90:  # regx
        stack.append(_register(registers, cursor.uleb()))
    elif op == 0x92:  # bregx
        register = cursor.uleb()
        stack.append(_register(registers, register) + cursor.sleb())
    elif op != 0x96:  # nop
        raise CfiError(f"DW_OP {op:#x}")
    if cursor.at < 0:
        raise CfiError("branch out of the expression")


def _register(registers: dict[int, int], number: int) -> int:
    if number not in registers:
        raise CfiError(f"register {number} unknown")
    return registers[number]


def _pop(stack: list[int]) -> int:
    if not stack:
        raise CfiError("expression stack empty")
    return stack.pop()


def _peek(stack: list[int], depth: int) -> int:
    if depth >= len(stack):
        raise CfiError("expression stack too short")
    return stack[-1 - depth]


def caller_registers(rules: Rules, registers: dict[int, int],
                     read_word: ReadWord) -> tuple[int, dict[int, int]]:
    """The CFA and the caller's registers (RA = its pc), from this frame's rules and registers."""
    if rules.cfa[0] == "expression":
        cfa = evaluate(rules.cfa[1], registers, read_word)
    else:
        cfa = (_register(registers, rules.cfa[0]) + rules.cfa[1]) & MASK
    caller = {number: value for number, value in registers.items()
              if number not in rules.registers and number != RA}
    for number, (kind, value) in rules.registers.items():
        if kind == "offset":
            loaded = read_word(cfa + value, 8)
            if loaded is None:
                raise CfiError(f"register {number} saved in unreadable memory")
            caller[number] = loaded
        elif kind == "val_offset":
            caller[number] = (cfa + value) & MASK
        elif kind == "register" and value in registers:
            caller[number] = registers[value]
        elif kind == "same" and number in registers:
            caller[number] = registers[number]
        elif kind in ("expression", "val_expression"):
            address = evaluate(value, registers, read_word, push=cfa)
            loaded = address if kind == "val_expression" else read_word(address, 8)
            if loaded is None:
                raise CfiError(f"register {number} saved in unreadable memory")
            caller[number] = loaded
        else:  # undefined
            caller.pop(number, None)
    if RSP not in rules.registers:
        caller[RSP] = cfa
    return cfa, caller
