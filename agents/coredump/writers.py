"""Where a core handler puts a core: the whole core as the kernel streams it (`full`), or a
bounded core rebuilt from the head and the process's memory (`filtered`).

Both go through a Sink: bytes in order, zero pages as holes (uncompressed) or compressed
(gzip, xz), under a cap on the bytes stored (systemd-coredump's ExternalSizeMax) and a
free-space floor on the target's filesystem (its KeepFree); a core that would pass either is
not kept at all (no half core is ever left behind). DirectorySink writes a local directory;
from there the capture's recording uploads the core to the dump store (agents/reporter/upload.py).
The directory as a whole has a cap too (ABRT's MaxCrashReportsSize, systemd-coredump's
MaxUse): once a core is in, the oldest of the handler's cores there are deleted until its
cores fit under it; the new core is never the one deleted, and one core alone may not pass it.

The bounded core is a valid ELF core (gdb, eu-stack and drgn open it): the original notes
byte for byte (every thread's registers, NT_FILE, NT_AUXV, NT_SIGINFO), every PT_LOAD of the
original with its permissions, and bytes only for every thread's stack (from the red zone
below its stack pointer up, at most `range_bytes`), the first page of each mapped ELF object
(its headers and build-id note, as the kernel's coredump_filter bit 4 keeps them) and the
vdso; everything else is a PT_LOAD with p_filesz 0, as the kernel writes a mapping it did
not dump.
"""

from __future__ import annotations

import contextlib
import itertools
import lzma
import os
import re
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agents.reporter.elf import EHDR, ELF_MAGIC, PF_W, PHDR, PT_LOAD, PT_NOTE

from .core import CoreHead, Memory, Thread

PAGE = 4096
ZERO_PAGE = bytes(PAGE)
RED_ZONE = 128
AT_SYSINFO_EHDR = 33
VDSO_BYTES = 2 * PAGE  # the kernel's x86-64 vdso image: two pages
# Compression -> (file suffix, a new compressor). "none" writes zero pages as holes instead.
COMPRESSORS = {
    "none": ("", None),
    "gzip": (".gz", lambda: zlib.compressobj(1, zlib.DEFLATED, 31)),
    "xz": (".xz", lambda: lzma.LZMACompressor(preset=1)),
}


class OverLimit(Exception):
    """The core would pass the size cap or the free-space floor: it is not kept."""


@dataclass(frozen=True)
class Limits:
    """The caps of a core's target (bytes): stored per core, and left free on its filesystem."""

    max_bytes: int
    keep_free: int
    compression: str = "none"
    directory_max_bytes: int = 0  # all the handler's cores in the directory, stored; 0: no cap


# What the handler's cores are called in their directory (`<report_id>[.filtered].core[.gz|.xz]`,
# report ids are `core-` and hex): only these count towards the directory's cap, or are deleted.
OUR_CORES = re.compile(r"(?P<report_id>core-[0-9a-f]+)(?P<filtered>\.filtered)?\.core(?:\.gz|\.xz)?")


def capture_key_of(name: str) -> str | None:
    """The capture key the handler recorded a core of its directory under (None: not ours)."""
    ours = OUR_CORES.fullmatch(name)
    if ours is None:
        return None
    return f"{ours['report_id']}-{'core_filtered' if ours['filtered'] else 'core'}"


@dataclass(frozen=True)
class Stored:
    """A core kept: where, its stored bytes, and the core's own (uncompressed) size."""

    target: str
    stored_bytes: int
    core_bytes: int
    removed: tuple[tuple[str, int], ...] = ()  # older cores deleted for the directory's cap: (file, bytes)


class Sink(Protocol):
    """A core written front to back; nothing is visible at the target before `commit`."""

    def write(self, data: bytes) -> None: ...

    def commit(self) -> Stored: ...

    def discard(self) -> None: ...


class DirectorySink:
    """A core file in a directory: written as `.<name>.partial`, renamed at commit, removed if
    discarded. Stored bytes are counted as allocated (holes are free), compressed as written."""

    def __init__(self, directory: str, name: str, limits: Limits) -> None:
        suffix, compressor = COMPRESSORS[limits.compression]
        Path(directory).mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(directory).free
        self.allowance = min(limits.max_bytes, free - limits.keep_free)
        if self.allowance <= 0:
            raise OverLimit(f"{directory}: {free} bytes free, {limits.keep_free} to keep free")
        if limits.directory_max_bytes:
            self.allowance = min(self.allowance, limits.directory_max_bytes)
        self.directory_max_bytes = limits.directory_max_bytes
        self.path = Path(directory) / f"{name}.core{suffix}"
        self.partial = self.path.with_name(f".{self.path.name}.partial")
        self.file = self.partial.open("wb")
        self.compressor = compressor() if compressor else None
        self.core_bytes = self.stored = 0
        self.pending = b""

    def write(self, data: bytes) -> None:
        self.core_bytes += len(data)
        if self.compressor is not None:
            self._store(self.compressor.compress(data))
            return
        # Page by page on the core's own page grid: a part page waits for the next write.
        buffer = memoryview(self.pending + data)
        whole = len(buffer) - len(buffer) % PAGE
        run = 0  # where the current run of data pages began
        for at in range(0, whole, PAGE):
            if buffer[at : at + PAGE] == ZERO_PAGE:
                self._store(buffer[run:at])
                self.file.seek(PAGE, os.SEEK_CUR)
                run = at + PAGE
        self._store(buffer[run:whole])
        self.pending = bytes(buffer[whole:])

    def _store(self, data: bytes | memoryview) -> None:
        if self.stored + len(data) > self.allowance:
            raise OverLimit(f"{self.path.name}: more than the {self.allowance} bytes allowed")
        self.file.write(data)
        self.stored += len(data)

    def commit(self) -> Stored:
        if self.compressor is not None:
            self._store(self.compressor.flush())
        elif self.pending.strip(b"\0"):
            self._store(self.pending)
        else:
            self.file.seek(len(self.pending), os.SEEK_CUR)
        self.file.truncate(self.file.tell())  # a trailing hole still counts in the file's size
        self.file.close()
        self.partial.replace(self.path)
        removed = make_room(self.path, self.directory_max_bytes) if self.directory_max_bytes else []
        return Stored(str(self.path), self.stored, self.core_bytes, tuple(removed))

    def discard(self) -> None:
        self.file.close()
        self.partial.unlink(missing_ok=True)


def stored_size(path: Path) -> int:
    """Bytes a file takes on its filesystem (holes are free)."""
    return path.stat().st_blocks * 512


def make_room(kept: Path, directory_max_bytes: int) -> list[tuple[str, int]]:
    """Delete the oldest of the handler's cores in `kept`'s directory (by mtime, never `kept`)
    until they fit under `directory_max_bytes` all told; what was deleted, oldest first. A core
    another handler deletes meanwhile is simply gone."""
    ours = []
    for path in kept.parent.iterdir():
        if OUR_CORES.fullmatch(path.name):
            with contextlib.suppress(FileNotFoundError):
                ours.append((path.stat().st_mtime, path.name, path, stored_size(path)))
    total = sum(size for *_, size in ours)
    removed = []
    for _, name, path, size in sorted(ours):
        if total <= directory_max_bytes:
            break
        if path == kept:
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append((name, size))
        total -= size
    return removed


# --- the bounded core -----------------------------------------------------------------


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def stack_window(thread: Thread, loads: list[tuple[int, int]], range_bytes: int) -> tuple[int, int] | None:
    """A thread's stack as kept: from the red zone below its stack pointer (page-aligned) up
    to the end of its mapping, at most `range_bytes`."""
    sp = thread.registers.get("rsp", 0)
    for start, end in loads:
        if start <= sp < end:
            low = max(start, (sp - RED_ZONE) & ~(PAGE - 1))
            return low, min(end, low + range_bytes)
    return None


def module_data(head: CoreHead, range_bytes: int) -> list[tuple[int, int]]:
    """Each mapped ELF object's data as the loader left it: the pages of its mappings the kernel
    dumped (written: .dynamic, the GOT, .data) and the anonymous mapping right after them (.bss,
    and ld.so's first allocations: r_debug's link_map chain, which gdb follows to the
    libraries), each at most `range_bytes`."""
    files = [(f.start, f.end) for f in head.files]
    ranges = []
    previous_file_end = None
    for load in sorted(head.loads, key=lambda s: s.vaddr):
        backed = any(start <= load.vaddr < end for start, end in files)
        if backed and load.filesz:
            ranges.append((load.vaddr, load.vaddr + min(load.filesz, range_bytes)))
        elif not backed and load.flags & PF_W and load.vaddr == previous_file_end:
            ranges.append((load.vaddr, load.vaddr + min(load.memsz, range_bytes)))
        previous_file_end = load.vaddr + load.memsz if backed else None
    return ranges


def kept_ranges(head: CoreHead, memory: Memory, range_bytes: int) -> list[tuple[int, int]]:
    """What a bounded core holds bytes for: stacks, ELF header pages, the modules' data, the vdso."""
    loads = [(s.vaddr, s.vaddr + s.memsz) for s in head.loads]
    ranges = [w for thread in head.threads if (w := stack_window(thread, loads, range_bytes))]
    for mapping in head.files:
        if mapping.offset == 0 and memory.read(mapping.start, 4) == ELF_MAGIC:
            ranges.append((mapping.start, mapping.start + PAGE))
    ranges += module_data(head, range_bytes)
    vdso = head.auxv.get(AT_SYSINFO_EHDR)
    if vdso:
        ranges.append((vdso, vdso + VDSO_BYTES))
    return _merge(ranges)


@dataclass(frozen=True)
class Piece:
    """One PT_LOAD of the bounded core: a part of an original mapping, with bytes or without."""

    vaddr: int
    size: int
    flags: int
    data: bytes | None


def pieces(head: CoreHead, memory: Memory, range_bytes: int) -> list[Piece]:
    """Every original PT_LOAD, split where a kept range begins, each piece's bytes a prefix of
    it (a PT_LOAD holds p_filesz bytes from its start, as the kernel keeps a mapping's first
    page and nothing more); a kept range memory cannot give stays without bytes."""
    kept = kept_ranges(head, memory, range_bytes)
    out: list[Piece] = []
    for load in sorted(head.loads, key=lambda s: s.vaddr):
        end = load.vaddr + load.memsz
        inside = [(max(a, load.vaddr), min(b, end)) for a, b in kept if a < end and b > load.vaddr]
        starts = [load.vaddr] + [a for a, _ in inside if a > load.vaddr] + [end]
        for at, following in itertools.pairwise(starts):
            stop = next((b for a, b in inside if a == at), at)
            data = memory.read(at, stop - at) if stop > at else None
            out.append(Piece(at, following - at, load.flags, data))
    return out


def _align(value: int) -> int:
    return (value + PAGE - 1) & ~(PAGE - 1)


def write_bounded_core(
    head: CoreHead, head_bytes: bytes, memory: Memory, range_bytes: int, sink: Sink
) -> int:
    """The bounded core into `sink`, laid out as the kernel lays out a core (header, program
    headers, notes, then each segment's bytes page-aligned); returns the bytes read from memory."""
    notes = b"".join(head_bytes[s.offset : s.offset + s.filesz] for s in head.segments if s.kind == PT_NOTE)
    parts = pieces(head, memory, range_bytes)
    count = 1 + len(parts)
    notes_at = EHDR.size + count * PHDR.size
    ident = head_bytes[:16]
    _, kind, machine, version, *_ = EHDR.unpack_from(head_bytes)
    header = EHDR.pack(
        ident, kind, machine, version, 0, EHDR.size, 0, 0, EHDR.size, PHDR.size, count, 0, 0, 0
    )  # no entry, no section headers
    phdrs = [PHDR.pack(PT_NOTE, 0, notes_at, 0, 0, len(notes), 0, 4)]
    offset = _align(notes_at + len(notes))
    for part in parts:
        size = len(part.data) if part.data else 0
        phdrs.append(PHDR.pack(PT_LOAD, part.flags, offset, part.vaddr, 0, size, part.size, PAGE))
        offset += _align(size)
    front = header + b"".join(phdrs) + notes
    sink.write(front + bytes(_align(len(front)) - len(front)))
    for part in parts:
        if part.data:
            sink.write(part.data + bytes(_align(len(part.data)) - len(part.data)))
    return sum(len(part.data) for part in parts if part.data)
