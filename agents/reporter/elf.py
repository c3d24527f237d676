"""ELF64 little-endian structures (x86-64): the core reader's and module reader's, and the notes
of a vmcore and of a kernel module.

Everything reads through a `read(offset, size) -> bytes | None` function, so the same code
parses a file on disk, a core's memory or a live process's memory, and a short or failed
read is a missing piece, never an exception.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

Reader = Callable[[int, int], "bytes | None"]

ELF_MAGIC = b"\x7fELF"
ELFCLASS64, ELFDATA2LSB = 2, 1
ET_EXEC, ET_DYN, ET_CORE = 2, 3, 4
EM_X86_64 = 62
PT_LOAD, PT_DYNAMIC, PT_NOTE, PT_GNU_EH_FRAME = 1, 2, 4, 0x6474E550
PF_X, PF_W, PF_R = 1, 2, 4
PN_XNUM = 0xFFFF
SHT_SYMTAB, SHT_NOTE, SHT_DYNSYM, SHT_NOBITS = 2, 7, 11, 8
NT_GNU_BUILD_ID = 3

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
SHDR = struct.Struct("<IIQQQQIIQQ")
SYM = struct.Struct("<IBBHQQ")
NOTE = struct.Struct("<III")

MAX_PHDRS = 1 << 20  # a core has one per mapping; more is a broken header
MAX_SECTIONS = 1 << 16
MAX_NOTE_NAME = 256


class NotElf(ValueError):
    """The bytes are not an ELF64 little-endian x86-64 object of the expected kind."""


@dataclass(frozen=True)
class Header:
    kind: int  # e_type
    machine: int
    entry: int
    phoff: int
    shoff: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int


@dataclass(frozen=True)
class Segment:
    """A program header: where its bytes are in the file, where they go in memory."""

    kind: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int


@dataclass(frozen=True)
class Section:
    name: str
    kind: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class Note:
    name: str
    kind: int
    desc: bytes


def parse_header(raw: bytes | None) -> Header:
    if raw is None or len(raw) < EHDR.size or raw[:4] != ELF_MAGIC:
        raise NotElf("no ELF magic")
    ident, kind, machine, _, entry, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx = (
        EHDR.unpack_from(raw))
    if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB:
        raise NotElf("not ELF64 little-endian")
    if machine != EM_X86_64:
        raise NotElf(f"machine {machine} is not x86-64")
    if phnum and phentsize < PHDR.size:
        raise NotElf(f"program header size {phentsize}")
    return Header(kind, machine, entry, phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx)


def parse_segments(raw: bytes, count: int, entsize: int = PHDR.size) -> list[Segment]:
    segments = []
    for index in range(count):
        if index * entsize + PHDR.size > len(raw):
            break
        kind, flags, offset, vaddr, _, filesz, memsz, align = PHDR.unpack_from(raw, index * entsize)
        segments.append(Segment(kind, flags, offset, vaddr, filesz, memsz, align))
    return segments


def read_segments(read: Reader, header: Header) -> list[Segment]:
    count = min(header.phnum, MAX_PHDRS)
    raw = read(header.phoff, count * header.phentsize) if count else b""
    return parse_segments(raw or b"", count, header.phentsize)


def read_sections(read: Reader, header: Header) -> list[Section]:
    """The section headers with their names; empty when the object has none (a stripped or
    in-memory image whose section headers were never loaded)."""
    if not header.shoff or not header.shnum or header.shentsize < SHDR.size:
        return []
    count = min(header.shnum, MAX_SECTIONS)
    raw = read(header.shoff, count * header.shentsize)
    if not raw or len(raw) < count * header.shentsize:
        return []
    rows = [SHDR.unpack_from(raw, index * header.shentsize) for index in range(count)]
    names = b""
    if header.shstrndx < count:
        strtab = rows[header.shstrndx]
        names = read(strtab[4], min(strtab[5], 1 << 20)) or b""
    return [Section(c_string(names, row[0]), row[1], row[3], row[4], row[5], row[6], row[9])
            for row in rows]


def c_string(raw: bytes, at: int, limit: int = 4096) -> str:
    if at >= len(raw):
        return ""
    end = raw.find(b"\0", at, at + limit)
    return raw[at:end if end >= 0 else at + limit].decode("utf-8", "replace")


def iter_notes(raw: bytes) -> Iterator[Note]:
    """The notes of a PT_NOTE segment or SHT_NOTE section (4-byte aligned name and desc)."""
    at = 0
    while at + NOTE.size <= len(raw):
        namesz, descsz, kind = NOTE.unpack_from(raw, at)
        at += NOTE.size
        name_end = at + ((namesz + 3) & ~3)
        desc_end = name_end + ((descsz + 3) & ~3)
        if namesz > MAX_NOTE_NAME or name_end + descsz > len(raw):
            return
        yield Note(raw[at:at + namesz].rstrip(b"\0").decode("latin-1"), kind, raw[name_end:name_end + descsz])
        at = desc_end


def build_id_of(notes: Iterator[Note]) -> str | None:
    for note in notes:
        if note.name == "GNU" and note.kind == NT_GNU_BUILD_ID and note.desc:
            return note.desc[:64].hex()
    return None


def file_reader(handle: BinaryIO) -> Reader:
    """Reads of an open file by offset; a short or failed read is None."""
    descriptor = handle.fileno()

    def read(offset: int, size: int) -> bytes | None:
        if size <= 0 or offset < 0:
            return None
        try:
            data = os.pread(descriptor, size, offset)
        except (OSError, OverflowError):
            return None
        return data if len(data) == size else None
    return read


def file_build_id(read: Reader) -> str | None:
    """An ELF file's GNU build-id from its note sections (a vmlinux's `.notes`, a module's
    `.note.gnu.build-id`), else its PT_NOTE segments; None when it has none or is not ELF64."""
    try:
        header = parse_header(read(0, EHDR.size))
    except NotElf:
        return None
    notes = [(s.offset, s.size) for s in read_sections(read, header) if s.kind == SHT_NOTE]
    notes += [(s.offset, s.filesz) for s in read_segments(read, header) if s.kind == PT_NOTE]
    for offset, size in notes:
        found = build_id_of(iter_notes(read(offset, min(size, 1 << 20)) or b""))
        if found:
            return found
    return None
