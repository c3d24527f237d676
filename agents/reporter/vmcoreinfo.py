"""The crashed kernel's VMCOREINFO, read from the head of a vmcore: its release, build-id and
the moment it crashed.

The crashed kernel wrote VMCOREINFO (`KEY=VALUE` lines: `OSRELEASE=`, `BUILD-ID=` since Linux
5.9, `KERNELOFFSET=`, ...) before it crashed, and `CRASHTIME=` (its clock's seconds since the
epoch) as it crashed (kernel/vmcore_info.c, crash_save_vmcoreinfo). An ELF vmcore (the crash
kernel's /proc/vmcore, `makedumpfile -E`) holds it as a `VMCOREINFO` note in its PT_NOTE
segment; makedumpfile's kdump-compressed format at the sub header's
`offset_vmcoreinfo`/`size_vmcoreinfo`. Only those bytes are read (the headers, then the notes
or the block named): never the memory a 2 TB host's /proc/vmcore holds after them. Another
format drgn may open (libkdumpfile reads several) is searched for the VMCOREINFO text in its
first 16 MiB, as the DPU agent always did.
"""

from __future__ import annotations

import re
import struct
from datetime import UTC, datetime, timedelta
from typing import BinaryIO

from agents.reporter.elf import (
    ELF_MAGIC,
    PT_NOTE,
    NotElf,
    file_reader,
    iter_notes,
    parse_header,
    read_segments,
)

KDUMP_SIGNATURE = b"KDUMP   "
MAX_NOTES_BYTES = 16 << 20  # a vmcore's notes (every CPU's registers, VMCOREINFO) are far less
# disk_dump_header: signature[8], header_version, new_utsname (6 x 65, padded to 408), timeval,
# status, block_size; kdump_sub_header at block_size: phys_base, dump_level, split, start_pfn,
# end_pfn, offset_vmcoreinfo, size_vmcoreinfo (makedumpfile's diskdump_mod.h, 64-bit).
KDUMP_BLOCK_SIZE_AT = 428
KDUMP_VMCOREINFO_AT = 32
SCAN_BYTES = 16 << 20  # another format: its head, where VMCOREINFO is written
HEX = re.compile(r"(?:[0-9a-f]{2}){1,64}")
# A CRASHTIME taken as the crash's time only within these bounds of the crash kernel's now: the
# crash kernel runs minutes after the crash, and a crashed clock that was far off (an RTC reset
# to 1970) would make a report the registry refuses.
CRASHTIME_BEFORE, CRASHTIME_AFTER = timedelta(days=30), timedelta(days=1)


def read_vmcoreinfo(path: str) -> dict[str, str]:
    """VMCOREINFO's `KEY=VALUE` lines; empty when the file is unreadable or holds none."""
    try:
        with open(path, "rb") as handle:
            text = _vmcoreinfo_bytes(handle)
    except (OSError, struct.error, NotElf):
        return {}
    return parse_vmcoreinfo(text) if text else {}


def parse_vmcoreinfo(text: bytes) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.split(b"\0", 1)[0].decode("ascii", "replace").splitlines():
        key, equals, value = line.partition("=")
        if equals and key:
            values.setdefault(key, value.strip())
    return values


def kernel_build_id(info: dict[str, str]) -> str | None:
    """`BUILD-ID=` as the registry keys build-ids (lower-case hex), None when absent or malformed."""
    value = info.get("BUILD-ID", "").lower()
    return value if HEX.fullmatch(value) else None


def crash_time(info: dict[str, str], now: datetime) -> datetime | None:
    """`CRASHTIME=` as a UTC time: the same for every read of one vmcore, so that a rerun of the
    crash kernel's report sends the body the first run sent. None when absent, malformed or
    past the bounds around `now`."""
    value = info.get("CRASHTIME", "")
    if not value.isdigit() or len(value) > 12:
        return None
    crashed = datetime.fromtimestamp(int(value), UTC)
    return crashed if now - CRASHTIME_BEFORE <= crashed <= now + CRASHTIME_AFTER else None


def _vmcoreinfo_bytes(handle: BinaryIO) -> bytes | None:
    head = handle.read(512)
    if head[:8] == KDUMP_SIGNATURE:
        (block_size,) = struct.unpack_from("<i", head, KDUMP_BLOCK_SIZE_AT)
        handle.seek(block_size + KDUMP_VMCOREINFO_AT)
        offset, size = struct.unpack("<qQ", handle.read(16))
        if offset <= 0 or not 0 < size <= MAX_NOTES_BYTES:
            return None
        handle.seek(offset)
        return handle.read(size)

    if head[:4] != ELF_MAGIC:
        handle.seek(0)
        text = handle.read(SCAN_BYTES)
        start = text.find(b"OSRELEASE=")
        return text[start:text.find(b"\0", start)] if start >= 0 else None
    read = file_reader(handle)
    for segment in read_segments(read, parse_header(head)):
        if segment.kind == PT_NOTE and segment.filesz <= MAX_NOTES_BYTES:
            for note in iter_notes(read(segment.offset, segment.filesz) or b""):
                if note.name == "VMCOREINFO":
                    return note.desc
    return None
