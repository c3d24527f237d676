"""The ELF objects a crashed process had mapped: where each is loaded, its build-id, its
.eh_frame and its function symbols.

A module's file comes from an opener (file mode: the path on disk, `--exe` for the program;
pipe mode: /proc/<pid>/map_files or /proc/<pid>/root). When the file cannot be opened, or is
not the one that was mapped (its build-id differs from the one in memory), the module is read
from the ELF image in the process's memory instead: its program headers always are (the
kernel dumps the first page of every ELF mapping), its .eh_frame and .dynsym when the memory
holds them (a live process, the vdso).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from agents.reporter.elf import (
    EHDR,
    PT_DYNAMIC,
    PT_GNU_EH_FRAME,
    PT_LOAD,
    PT_NOTE,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_SYMTAB,
    SYM,
    NotElf,
    Reader,
    Section,
    Segment,
    build_id_of,
    file_reader,
    iter_notes,
    parse_header,
    read_sections,
    read_segments,
)

from .cfi import EhFrame
from .core import CoreHead, FileMapping, Memory

AT_SYSINFO_EHDR = 33
VDSO_PATH = "[vdso]"
STT_FUNC, STT_GNU_IFUNC = 2, 10
MAX_SECTION_BYTES = 64 << 20  # .eh_frame or a symbol table larger than this is not read
MAX_SYMBOLS = 1 << 21
MAX_IMAGE_BYTES = 1 << 20  # in-memory images: the vdso, a stripped module's .dynsym
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_GNU_HASH = 0, 4, 5, 6, 10, 0x6FFFFEF5

Opener = Callable[[str, int], "BinaryIO | None"]  # (path, mapping start) -> the file, or None


@dataclass
class Symbols:
    """Function symbols sorted by address (link-time)."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def lookup(self, address: int) -> tuple[str, int] | None:
        """(name, offset into it) of the function holding `address` (aliases share a start:
        the last of them in sorted order wins, the same one every time)."""
        index = bisect.bisect_right(self.starts, address) - 1
        for at in range(index, max(index - 8, -1), -1):
            if address < self.ends[at]:
                return self.names[at], address - self.starts[at]
        return None

    def starts_at(self, address: int) -> bool:
        index = bisect.bisect_left(self.starts, address)
        return index < len(self.starts) and self.starts[index] == address


Contents = tuple["EhFrame | None", Symbols]  # a module's CFI and function symbols


def _no_contents() -> Contents:
    return None, Symbols()


@dataclass
class Module:
    """One mapped ELF object. Its CFI and symbols are parsed the first time they are asked
    for: most objects a process maps are never on the crashing thread's stack, and parsing a
    large library's tables is most of a handler's reading before its answer."""

    path: str
    start: int  # lowest mapped address
    end: int
    bias: int  # runtime address - link-time address
    build_id: str | None = None
    contents: Callable[[], Contents] = _no_contents  # parses .eh_frame and the symbols
    source: str = "memory"  # file | memory: where its CFI and symbols came from
    text: Reader | None = None  # link-time address -> the file's bytes (code a core leaves out)
    handle: BinaryIO | None = None
    parsed: Contents | None = field(default=None, repr=False)

    def _parsed(self) -> Contents:
        if self.parsed is None:
            self.parsed = self.contents()
        return self.parsed

    @property
    def eh_frame(self) -> EhFrame | None:
        return self._parsed()[0]

    @property
    def symbols(self) -> Symbols:
        return self._parsed()[1]

    def read_text(self, address: int, size: int) -> bytes | None:
        return self.text(address - self.bias, size) if self.text else None

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()

    @property
    def name(self) -> str:
        return os.path.basename(self.path) or self.path

    def symbolize(self, address: int) -> tuple[str, int] | None:
        return self.symbols.lookup(address - self.bias)


def _parse_symbols(raw: bytes, strings: bytes) -> Symbols:
    rows = []
    count = min(len(raw) // SYM.size, MAX_SYMBOLS)
    for name, info, _, shndx, value, size in SYM.iter_unpack(raw[:count * SYM.size]):
        if info & 0xF in (STT_FUNC, STT_GNU_IFUNC) and shndx and value:
            end = strings.find(b"\0", name)
            rows.append((value, value + max(size, 1), strings[name:end if end >= 0 else None]))
    rows.sort()
    symbols = Symbols()
    for start, end, name in rows:
        symbols.starts.append(start)
        symbols.ends.append(end)
        symbols.names.append(name.decode("utf-8", "replace"))
    return symbols


def _section_bytes(read: Reader, section: Section) -> bytes | None:
    if section.kind == SHT_NOBITS or section.size > MAX_SECTION_BYTES:
        return None
    return read(section.offset, section.size)


def load_from_file(read: Reader) -> tuple[str | None, list[Segment], Callable[[], Contents]]:
    """Build-id and program headers of an ELF file (its headers and notes only), and how to
    parse its .eh_frame and function symbols (.symtab, else .dynsym)."""
    header = parse_header(read(0, EHDR.size))
    segments = read_segments(read, header)
    sections = read_sections(read, header)
    by_name = {section.name: section for section in sections}
    build_id = None
    for section in sections:
        if section.kind == SHT_NOTE and build_id is None:
            build_id = build_id_of(iter_notes(_section_bytes(read, section) or b""))
    if build_id is None:
        build_id = _segment_build_id(read, segments, file_offsets=True)

    def contents() -> Contents:
        eh_frame = None
        if ".eh_frame" in by_name:
            frame = by_name[".eh_frame"]
            data = _section_bytes(read, frame)
            hdr = by_name.get(".eh_frame_hdr")
            if data:
                eh_frame = EhFrame(data, frame.addr, _section_bytes(read, hdr) if hdr else None,
                                   hdr.addr if hdr else 0)
        symbols = Symbols()
        for kind in (SHT_SYMTAB, SHT_DYNSYM):
            table = next((s for s in sections if s.kind == kind), None)
            if table is None or table.link >= len(sections):
                continue
            symbols = _parse_symbols(_section_bytes(read, table) or b"",
                                     _section_bytes(read, sections[table.link]) or b"")
            if symbols.starts:
                break
        return eh_frame, symbols

    return build_id, segments, contents


def _segment_build_id(read: Reader, segments: list[Segment], file_offsets: bool) -> str | None:
    for segment in segments:
        if segment.kind == PT_NOTE and segment.filesz < 1 << 16:
            raw = read(segment.offset if file_offsets else segment.vaddr, segment.filesz)
            found = build_id_of(iter_notes(raw or b""))
            if found:
                return found
    return None


def link_base(segments: list[Segment]) -> int:
    """The link-time address of the object's first byte (its first PT_LOAD, page-aligned)."""
    loads = [s for s in segments if s.kind == PT_LOAD]
    if not loads:
        return 0
    first = min(loads, key=lambda s: s.offset)
    return (first.vaddr - first.offset) & ~0xFFF


class MemoryImage:
    """An ELF object as loaded in memory: link-time address -> runtime through the bias."""

    def __init__(self, memory: Memory, start: int) -> None:
        self.memory, self.start = memory, start
        header = parse_header(memory.read(start, EHDR.size))
        self.header = header
        self.segments = read_segments(lambda at, size: memory.read(start + at, size), header)
        self.bias = start - link_base(self.segments)

    def read_vaddr(self, address: int, size: int) -> bytes | None:
        return self.memory.read(self.bias + address, size) if 0 < size <= MAX_IMAGE_BYTES else None

    def build_id(self) -> str | None:
        return _segment_build_id(self.read_vaddr, self.segments, file_offsets=False)

    def eh_frame(self) -> EhFrame | None:
        """.eh_frame through PT_GNU_EH_FRAME (the .eh_frame_hdr) and its eh_frame_ptr."""
        hdr_segment = next((s for s in self.segments if s.kind == PT_GNU_EH_FRAME), None)
        if hdr_segment is None:
            return None
        hdr = self.read_vaddr(hdr_segment.vaddr, hdr_segment.memsz)
        if not hdr or hdr[0] != 1:
            return None
        from .cfi import CfiError, Cursor
        try:
            frame_address = Cursor(hdr, 4, hdr_segment.vaddr).pointer(hdr[1], hdr_segment.vaddr)
        except CfiError:
            return None
        # .eh_frame runs to the end of its PT_LOAD: read that much (bounded), the parser stops
        # at the zero terminator.
        load = next((s for s in self.segments if s.kind == PT_LOAD and s.vaddr <= frame_address
                     < s.vaddr + s.memsz), None)
        if load is None:
            return None
        data = self.read_vaddr(frame_address, min(load.vaddr + load.filesz - frame_address, MAX_IMAGE_BYTES))
        return EhFrame(data, frame_address, hdr, hdr_segment.vaddr) if data else None

    def dynamic_symbols(self) -> Symbols:
        """.dynsym through PT_DYNAMIC: DT_SYMTAB, DT_STRTAB, and the symbol count from
        DT_HASH's nchain (or, as glibc does, from the string table following the symbols)."""
        dynamic = next((s for s in self.segments if s.kind == PT_DYNAMIC), None)
        raw = self.read_vaddr(dynamic.vaddr, min(dynamic.memsz, 1 << 16)) if dynamic else None
        if not raw:
            return Symbols()
        tags: dict[int, int] = {}
        for tag, value in struct.iter_unpack("<qQ", raw[:len(raw) // 16 * 16]):
            if tag == DT_NULL:
                break
            tags.setdefault(tag, value)
        symtab, strtab, strsz = tags.get(DT_SYMTAB), tags.get(DT_STRTAB), tags.get(DT_STRSZ, 0)
        if not symtab or not strtab:
            return Symbols()
        # A loaded object's dynamic entries hold runtime addresses (ld.so relocated them);
        # the vdso's are link-time. Take whichever lies inside the image.
        symtab, strtab = (self._link_address(address) for address in (symtab, strtab))
        count = (strtab - symtab) // SYM.size if strtab > symtab else 0
        if DT_HASH in tags:
            nchain = self.read_vaddr(self._link_address(tags[DT_HASH]) + 4, 4)
            count = int.from_bytes(nchain, "little") if nchain else count
        raw_symbols = self.read_vaddr(symtab, min(count, MAX_IMAGE_BYTES // SYM.size) * SYM.size)
        strings = self.read_vaddr(strtab, min(strsz, MAX_IMAGE_BYTES))
        return _parse_symbols(raw_symbols or b"", strings or b"")

    def _link_address(self, address: int) -> int:
        return address - self.bias if address >= self.start else address

    def sections_in_memory(self) -> Contents:
        """The vdso is a whole ELF image in memory, section headers included."""
        def read(at: int, size: int) -> bytes | None:
            return self.memory.read(self.start + at, size) if 0 < size <= MAX_IMAGE_BYTES else None
        try:
            _, _, contents = load_from_file(read)
        except NotElf:
            return None, Symbols()
        return contents()


def _text_reader(read: Reader, segments: list[Segment]) -> Reader:
    """Link-time addresses of a file's PT_LOAD segments read from the file."""
    loads = [s for s in segments if s.kind == PT_LOAD]

    def read_text(address: int, size: int) -> bytes | None:
        for segment in loads:
            if segment.vaddr <= address and address + size <= segment.vaddr + segment.filesz:
                return read(segment.offset + address - segment.vaddr, size)
        return None
    return read_text


def load_modules(head: CoreHead, memory: Memory, opener: Opener) -> list[Module]:
    """Every ELF object the process had mapped (NT_FILE), and the vdso (AT_SYSINFO_EHDR). An
    object is loaded where a file is mapped from its first byte; its range is what its program
    headers span from there. (A file's other mappings elsewhere are not the object's: a process
    under AddressSanitizer has pieces of its runtime's library mapped far below where it is
    loaded, and an object loaded twice, by dlmopen, is two objects.)"""
    modules = []
    for mapping, mapped_end in _load_bases(head.files):
        module = _load_module(mapping.path, mapping.start, mapped_end, memory, opener)
        if module is not None:
            modules.append(module)
    vdso = head.auxv.get(AT_SYSINFO_EHDR)
    if vdso:
        module = _load_vdso(vdso, memory)
        if module is not None:
            modules.append(module)
    return sorted(modules, key=lambda m: m.start)


def _load_bases(files: list[FileMapping]) -> list[tuple[FileMapping, int]]:
    """Each mapping of a file's first byte, and the end of that file's last mapping from it on."""
    by_path: dict[str, list[FileMapping]] = {}
    for mapping in sorted(files, key=lambda m: m.start):
        by_path.setdefault(mapping.path, []).append(mapping)
    bases = []
    for mappings in by_path.values():
        last_end = 0
        for mapping in reversed(mappings):  # the furthest end from each mapping on
            last_end = max(last_end, mapping.end)
            if mapping.offset == 0:
                bases.append((mapping, last_end))
    return bases


def span_end(base: int, segments: list[Segment], mapped_end: int) -> int:
    """Where an object loaded at `base` ends: its PT_LOAD segments' extent (page-rounded),
    within its file's mappings from `base` on (`mapped_end`: a damaged header claims no more)."""
    loads = [s for s in segments if s.kind == PT_LOAD]
    if not loads:
        return mapped_end
    extent = max(s.vaddr + s.memsz for s in loads) - link_base(segments)
    return min(mapped_end, base + ((extent + 0xFFF) & ~0xFFF))


def _load_module(path: str, base: int, mapped_end: int, memory: Memory, opener: Opener) -> Module | None:
    image = None
    with contextlib.suppress(NotElf):
        image = MemoryImage(memory, base)
    memory_build_id = image.build_id() if image else None
    handle = opener(path, base)
    if handle is not None:
        read = file_reader(handle)
        try:
            build_id, segments, contents = load_from_file(read)
            usable = memory_build_id is None or build_id == memory_build_id
        except NotElf:
            usable = False
        if usable:
            end = span_end(base, segments, mapped_end)
            return Module(path, base, end, base - link_base(segments), build_id, contents, "file",
                          _text_reader(read, segments), handle)
        handle.close()
    if image is None:
        return None
    in_memory = image
    return Module(path, base, span_end(base, image.segments, mapped_end), image.bias, memory_build_id,
                  lambda: (in_memory.eh_frame(), in_memory.dynamic_symbols()))


def _load_vdso(address: int, memory: Memory) -> Module | None:
    try:
        image = MemoryImage(memory, address)
    except NotElf:
        return None
    size = max((s.vaddr + s.memsz for s in image.segments if s.kind == PT_LOAD), default=0x2000)

    def contents() -> Contents:
        eh_frame, symbols = image.sections_in_memory()
        return eh_frame or image.eh_frame(), symbols if symbols.starts else image.dynamic_symbols()

    return Module(VDSO_PATH, address, address + ((size + 0xFFF) & ~0xFFF) - link_base(image.segments),
                  image.bias, image.build_id(), contents)


def file_opener(executable: str | None = None, main_path: str | None = None) -> Opener:
    """File mode: each mapped path as it is on this machine; `executable` (`--exe`) replaces
    the program's own path (the core names where it ran, not where a copy is kept)."""
    def open_path(path: str, start: int) -> BinaryIO | None:
        target = executable if executable and path == main_path else path
        try:
            return open(target, "rb")
        except OSError:
            return None
    return open_path


def proc_opener(pid: int, proc: str = "/proc") -> Opener:
    """Pipe mode: the very file that was mapped (/proc/<pid>/map_files/<start>-<end> needs
    CAP_SYS_ADMIN, which a core_pattern handler has), else the path in the process's root."""
    def open_path(path: str, start: int) -> BinaryIO | None:
        directory = f"{proc}/{pid}/map_files"
        try:
            names = [name for name in os.listdir(directory) if name.startswith(f"{start:x}-")]
        except OSError:
            names = []
        for candidate in [f"{directory}/{name}" for name in names] + [f"{proc}/{pid}/root{path}"]:
            try:
                return open(candidate, "rb")
            except OSError:
                continue
        return None
    return open_path


def module_at(modules: list[Module], address: int) -> Module | None:
    starts = [m.start for m in modules]
    index = bisect.bisect_right(starts, address) - 1
    if index >= 0 and modules[index].start <= address < modules[index].end:
        return modules[index]
    return None
