"""A Linux ELF core's head (header, program headers, notes) and its memory.

The kernel writes a core as: ELF header, program headers (one PT_NOTE, then one PT_LOAD per
mapping), the notes, then the mappings' bytes page-aligned (fs/binfmt_elf.c, elf_core_dump).
The notes start with the dumping thread's NT_PRSTATUS (fill_note_info puts the task that
took the signal at the head of its thread list; write_note_info writes the process-wide
NT_PRPSINFO, NT_SIGINFO, NT_AUXV and NT_FILE right after that first thread's NT_PRSTATUS,
then every other thread). So everything a report needs sits in the first few KiB, and a
pipe handler can decide before reading the rest: `read_core_head` reads only that much.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from agents.reporter.elf import (
    EHDR,
    ET_CORE,
    PN_XNUM,
    PT_LOAD,
    PT_NOTE,
    NotElf,
    Segment,
    c_string,
    iter_notes,
    parse_header,
    parse_segments,
)

NT_PRSTATUS, NT_PRPSINFO, NT_AUXV = 1, 3, 6
NT_SIGINFO, NT_FILE = 0x53494749, 0x46494C45
MAX_NOTES_BYTES = 64 << 20  # 16k threads of notes; a larger PT_NOTE is not a real core's
# Where a real core's head ends at the latest: the kernel writes the program headers (56 bytes
# each, at most PN_XNUM of them) right after the ELF header, and the notes right after those.
# A header or note offset past this is a corrupt core's, and never read up to through a pipe.
MAX_HEAD_BYTES = EHDR.size + PN_XNUM * 56 + MAX_NOTES_BYTES
READ_PIECE = 1 << 20  # a pipe is read (or skipped) this much at a time
MAX_FILE_ENTRIES = 1 << 16

# struct user_regs_struct (arch/x86/include/asm/user_64.h), the pr_reg of NT_PRSTATUS.
REGISTER_NAMES = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx",
                  "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base",
                  "gs_base", "ds", "es", "fs", "gs")
PRSTATUS_REGS_AT = 112  # after pr_info, pr_cursig, sigpend/hold, pids and four timevals
PRSTATUS = struct.Struct("<iii h 2x QQ iiii")
PRPSINFO = struct.Struct("<cccc 4x Q II iiii 16s 80s")
SIGINFO = struct.Struct("<iii 4x Q")
SI_KERNEL = 0x80


@dataclass(frozen=True)
class Thread:
    """One thread's NT_PRSTATUS: its id, the signal it took, its registers."""

    tid: int
    signal: int
    registers: dict[str, int]


@dataclass(frozen=True)
class SigInfo:
    signo: int
    errno: int
    code: int  # si_code: SEGV_MAPERR 1, SEGV_ACCERR 2, SI_KERNEL 0x80 (a general protection fault)...
    addr: int  # si_addr for SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGTRAP; the sender's pid/uid otherwise


@dataclass(frozen=True)
class FileMapping:
    """One NT_FILE entry: a file-backed mapping and where in the file it starts."""

    start: int
    end: int
    offset: int  # bytes
    path: str


@dataclass(frozen=True)
class ProcessInfo:
    """NT_PRPSINFO: what `ps` would have shown."""

    pid: int
    ppid: int
    uid: int
    gid: int
    name: str  # comm, 15 characters at most
    args: str  # the first 80 bytes of the command line


@dataclass
class CoreHead:
    """Everything of a core before its memory: enough to report and decide."""

    segments: list[Segment]
    threads: list[Thread] = field(default_factory=list)  # the crashing thread first
    process: ProcessInfo | None = None
    siginfo: SigInfo | None = None
    files: list[FileMapping] = field(default_factory=list)
    auxv: dict[int, int] = field(default_factory=dict)
    identity: str = ""  # sha256 of the notes: one crash, one identity, however often it is read

    @property
    def crashing(self) -> Thread | None:
        return self.threads[0] if self.threads else None

    @property
    def loads(self) -> list[Segment]:
        return [segment for segment in self.segments if segment.kind == PT_LOAD]

    def memory_missing(self, file_size: int) -> tuple[int, int]:
        """(bytes of memory past the end of a core file of `file_size` bytes, bytes of memory
        it should hold): a core cut short (a disk that filled up, a copy interrupted) lacks
        the mappings written last."""
        loads = [segment for segment in self.loads if segment.filesz]
        missing = sum(max(0, s.offset + s.filesz - max(s.offset, file_size)) for s in loads)
        return missing, sum(segment.filesz for segment in loads)


def parse_notes(raw: bytes, head: CoreHead) -> None:
    """Fill `head` from the raw PT_NOTE bytes of a core."""
    for note in iter_notes(raw):
        if note.name == "CORE" and note.kind == NT_PRSTATUS and len(note.desc) >= PRSTATUS_REGS_AT + 8 * 27:
            signo, _, _, cursig, _, _, pid, _, _, _ = PRSTATUS.unpack_from(note.desc)
            values = struct.unpack_from("<27Q", note.desc, PRSTATUS_REGS_AT)
            head.threads.append(Thread(pid, cursig or signo, dict(zip(REGISTER_NAMES, values, strict=True))))
        elif note.name == "CORE" and note.kind == NT_PRPSINFO and len(note.desc) >= PRPSINFO.size:
            *_, uid, gid, pid, ppid, _, _, fname, psargs = PRPSINFO.unpack_from(note.desc)
            head.process = ProcessInfo(pid, ppid, uid, gid, c_string(fname, 0, 16), c_string(psargs, 0, 80))
        elif note.kind == NT_SIGINFO and len(note.desc) >= SIGINFO.size:
            head.siginfo = SigInfo(*SIGINFO.unpack_from(note.desc))
        elif note.kind == NT_AUXV:
            pairs = struct.iter_unpack("<QQ", note.desc[:len(note.desc) // 16 * 16])
            head.auxv = {key: value for key, value in pairs if key}
        elif note.kind == NT_FILE and len(note.desc) >= 16:
            head.files = parse_file_note(note.desc)


def parse_file_note(desc: bytes) -> list[FileMapping]:
    count, page_size = struct.unpack_from("<QQ", desc)
    count = min(count, MAX_FILE_ENTRIES, (len(desc) - 16) // 24)
    names = desc[16 + 24 * count:].split(b"\0")
    mappings = []
    for index in range(count):
        start, end, page = struct.unpack_from("<QQQ", desc, 16 + 24 * index)
        name = names[index].decode("utf-8", "surrogateescape") if index < len(names) else ""
        mappings.append(FileMapping(start, end, page * page_size, name))
    return mappings


def _head_from(read_until: Callable[[int, int], bytes], header_bytes: bytes) -> CoreHead:
    header = parse_header(header_bytes)
    if header.kind != ET_CORE:
        raise NotElf("not a core file (e_type is not ET_CORE)")
    if header.phnum == PN_XNUM:
        raise NotElf("more than 65534 mappings (PN_XNUM) is not supported")
    phdrs = read_until(header.phoff, header.phnum * header.phentsize)
    head = CoreHead(parse_segments(phdrs, header.phnum, header.phentsize))
    digest = hashlib.sha256()
    for note in sorted((s for s in head.segments if s.kind == PT_NOTE), key=lambda s: s.offset):
        if note.filesz > MAX_NOTES_BYTES:
            raise NotElf(f"PT_NOTE of {note.filesz} bytes")
        raw = read_until(note.offset, note.filesz)
        digest.update(raw)
        parse_notes(raw, head)
    head.identity = digest.hexdigest()
    return head


class _Sequential:
    """A forward-only stream read up to given offsets (what a pipe allows)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.position = stream, 0

    def read_exactly(self, size: int) -> bytes:
        chunks = []
        while size > 0:
            chunk = self.stream.read(min(size, READ_PIECE))
            if not chunk:
                raise NotElf(f"the core ends after {self.position} bytes")
            chunks.append(chunk)
            size -= len(chunk)
            self.position += len(chunk)
        return b"".join(chunks)

    def read_at(self, offset: int, size: int) -> bytes:
        if offset < self.position:
            raise NotElf(f"offset {offset} lies behind the stream's position {self.position}")
        if offset + size > MAX_HEAD_BYTES:
            raise NotElf(f"bytes {offset} to {offset + size} lie past any core's head ({MAX_HEAD_BYTES} "
                         "bytes): a corrupt program header")
        while self.position < offset:  # skipped a piece at a time
            self.read_exactly(min(offset - self.position, READ_PIECE))
        return self.read_exactly(size)


def read_core_head(stream: BinaryIO) -> tuple[CoreHead, int]:
    """The core's head from a sequential stream (a pipe from the kernel: never seeks), and the
    number of bytes consumed, so the caller can go on streaming the rest."""
    reader = _Sequential(stream)
    head = _head_from(reader.read_at, reader.read_exactly(EHDR.size))
    return head, reader.position


def read_core_file(path: str) -> CoreHead:
    """The head of the core file at `path`; NotElf if the file ends within it (cut short)."""
    with open(path, "rb") as core:
        def read_at(offset: int, size: int) -> bytes:
            data = os.pread(core.fileno(), size, offset)
            if len(data) < size:
                raise NotElf(f"the core ends after {os.fstat(core.fileno()).st_size} bytes, within its "
                             f"head (bytes {offset} to {offset + size}): it was cut short")
            return data
        return _head_from(read_at, read_at(0, EHDR.size))


# --- memory -------------------------------------------------------------------------------


class Memory(Protocol):
    """A crashed process's address space: `size` bytes at `address`, or None if unreadable."""

    def read(self, address: int, size: int) -> bytes | None: ...


class MemoryBudget:
    """Counts the bytes read from a process's memory and refuses reads past a bound."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def take(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True


DEFAULT_MEMORY_BUDGET = 32 << 20


class CoreMemory:
    """Memory from a core file's PT_LOAD segments. Bytes past a segment's p_filesz were not
    dumped (file-backed text is left out by coredump_filter): unreadable, not zero."""

    def __init__(self, path: str, segments: list[Segment], budget: int = DEFAULT_MEMORY_BUDGET) -> None:
        self.file = open(path, "rb")  # noqa: SIM115  (closed by close(), the reporter's lifetime)
        self.loads = sorted((s for s in segments if s.kind == PT_LOAD and s.filesz), key=lambda s: s.vaddr)
        self.starts = [s.vaddr for s in self.loads]
        self.budget = MemoryBudget(budget)

    def read(self, address: int, size: int) -> bytes | None:
        index = bisect.bisect_right(self.starts, address) - 1
        if index < 0 or size <= 0:
            return None
        segment = self.loads[index]
        if address + size > segment.vaddr + segment.filesz or not self.budget.take(size):
            return None
        data = os.pread(self.file.fileno(), size, segment.offset + address - segment.vaddr)
        return data if len(data) == size else None

    def close(self) -> None:
        self.file.close()


class ProcMemory:
    """Memory of a live (or, in a core_pattern pipe handler, dumping) process: /proc/<pid>/mem."""

    def __init__(self, pid: int, budget: int = DEFAULT_MEMORY_BUDGET, proc: str = "/proc") -> None:
        self.fd = os.open(f"{proc}/{pid}/mem", os.O_RDONLY)
        self.budget = MemoryBudget(budget)

    def read(self, address: int, size: int) -> bytes | None:
        if size <= 0 or address < 0 or not self.budget.take(size):
            return None
        try:
            data = os.pread(self.fd, size, address)
        except (OSError, OverflowError):
            return None
        return data if len(data) == size else None

    def close(self) -> None:
        os.close(self.fd)


class NoMemory:
    """The memory of a process already gone from /proc (pipe mode, with the kernel not waiting
    for the handler): every read fails, so its report holds what the core's head says
    (registers, mappings, signal) and its frames begin at the pc."""

    def __init__(self) -> None:
        self.budget = MemoryBudget(0)

    def read(self, address: int, size: int) -> bytes | None:
        return None

    def close(self) -> None:
        pass


def read_u64(memory: Memory, address: int) -> int | None:
    raw = memory.read(address, 8)
    return int.from_bytes(raw, "little") if raw else None


__all__ = ["CoreHead", "CoreMemory", "FileMapping", "Memory", "NoMemory", "ProcMemory", "ProcessInfo",
           "SigInfo", "Thread", "read_core_file", "read_core_head", "read_u64"]
