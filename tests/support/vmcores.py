"""Vmcores as the crash kernel's /proc/vmcore lays them out, made for a test: ELF64 core headers,
the notes, and sparse memory (nothing follows the notes but holes)."""

from __future__ import annotations

import struct
from pathlib import Path

SPARSE_MEMORY = 256 << 30  # what follows the notes: read it and the test never ends
BUILD_ID = "01d2640d3a13145ee314eb05b155f141b7b7058b"
VMCOREINFO = (f"OSRELEASE=6.1.0-57-cloud-amd64\nBUILD-ID={BUILD_ID}\nPAGESIZE=4096\n"
              "KERNELOFFSET=35000000\n").encode()


def note(name: bytes, kind: int, desc: bytes) -> bytes:
    def padded(raw: bytes) -> bytes:
        return raw + bytes(-len(raw) % 4)

    return struct.pack("<III", len(name) + 1, len(desc), kind) + padded(name + b"\0") + padded(desc)


def elf_vmcore(path: Path, vmcoreinfo: bytes | None = VMCOREINFO, cpus: int = 8) -> Path:
    """What the crash kernel's /proc/vmcore looks like: ELF64 core, a PT_NOTE segment with every
    CPU's NT_PRSTATUS then VMCOREINFO, a PT_LOAD for the memory (sparse, 256 GiB)."""
    notes = b"".join(note(b"CORE", 1, bytes(336)) for _ in range(cpus))
    notes += note(b"VMCOREINFO", 0, vmcoreinfo) if vmcoreinfo is not None else b""
    notes_at, memory_at = 64 + 2 * 56, 1 << 20
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    header = struct.pack("<16sHHIQQQIHHHHHH", ident, 4, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    phdrs = struct.pack("<IIQQQQQQ", 4, 0, notes_at, 0, 0, len(notes), len(notes), 0)
    phdrs += struct.pack("<IIQQQQQQ", 1, 7, memory_at, 0xFFFFFFFF81000000, 0x1000000, SPARSE_MEMORY,
                         SPARSE_MEMORY, 0)
    with path.open("wb") as out:
        out.write(header + phdrs + notes)
        out.truncate(memory_at + SPARSE_MEMORY)
    return path
