"""kmsg records (what a read of /dev/kmsg returns) made from the crash lab's real console logs.

The lab's golden logs are dmesg as makedumpfile read it from real guests' vmcores:
`[    s.uuuuuu] message` lines. A kmsg record of the same line is `prio,seq,usec,-;message`;
sequence numbers count from the log's first line. The tests feed these to the watcher as a
file, never through this host's /dev/kmsg.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support.golden import golden

LINE = re.compile(r"^\[ *(\d+)\.(\d{6})\] (.*)$")


@dataclass(frozen=True)
class Line:
    usec: int
    message: str


def lab_lines(name: str) -> list[Line]:
    """A golden lab log's lines (header and untimed lines left out)."""
    found = []
    for text in golden(f"lab/{name}").splitlines():
        match = LINE.match(text)
        if match:
            found.append(Line(int(match[1]) * 1_000_000 + int(match[2]), match[3]))
    return found


def between(lines: list[Line], first: str, last: str) -> list[Line]:
    """From the first line holding `first` to the next one holding `last`, both included."""
    start = next(i for i, line in enumerate(lines) if first in line.message)
    end = next(i for i, line in enumerate(lines[start:], start) if last in line.message)
    return lines[start : end + 1]


def shifted(lines: list[Line], usec: int) -> list[Line]:
    """The same lines printed `usec` later (a warning printed again)."""
    return [Line(line.usec - lines[0].usec + usec, line.message) for line in lines]


def escaped(message: str) -> str:
    """How /dev/kmsg prints a message: bytes below 0x20 (but tab) and backslash escaped."""
    return "".join(f"\\x{ord(c):02x}" if (ord(c) < 0x20 and c != "\t") or c == "\\" else c for c in message)


def records(lines: list[Line], first_seq: int = 0) -> str:
    """kmsg records, one per line, with a dictionary line after each driver message as the
    kernel adds them (` SUBSYSTEM=...`), to be skipped."""
    out = []
    for seq, line in enumerate(lines, first_seq):
        out.append(f"4,{seq},{line.usec},-;{escaped(line.message)}\n")
        if line.message.startswith("virtio"):
            out.append(" SUBSYSTEM=virtio\n DEVICE=+virtio:virtio0\n")
    return "".join(out)
