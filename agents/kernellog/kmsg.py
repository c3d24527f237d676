"""/dev/kmsg records, and the crash reports cut out of them.

A read of /dev/kmsg returns one record (Documentation/ABI/testing/dev-kmsg):
`prio,seq,ts_usec,flags[,...];message\n` followed by dictionary lines that start with a space
(` SUBSYSTEM=pci`). Non-printable bytes of the message, newlines among them, are escaped as
`\\xXX`. `seq` counts every record of a boot without gaps, so it is the watcher's cursor; a
read that finds its next record overwritten fails with EPIPE and the next read goes on at the
oldest record left.

A report starts at a crash header (the engine's own header table, strong rows only: an oops,
a WARNING, a BUG, a soft lockup, a hung task, an RCU stall, a refcount or list corruption)
and ends at `---[ end trace`, at `</TASK>` (with the register and module lines that may still
follow it), at the next header, or when the log stays quiet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from registry.fingerprint.patterns import IGNORED_LINES, OOPSES, STRONG, TRIGGERS

MAX_REPORT_RECORDS = 800  # a report longer than the engine reads is closed there
_STRONG_HEADERS = tuple((oops.needle, re.compile(oops.header)) for oops in OOPSES if oops.rank == STRONG)
_ESCAPE = re.compile(rb"\\x([0-9a-fA-F]{2})")
END_TRACE = "---[ end trace"
END_STACK = "</TASK>"
# What the kernel may still print of the same report after its stack's </TASK>.
_AFTER_STACK = re.compile(
    r"^(?:Modules linked in:|CR2: |---\[ end trace|note: |Code: |"
    r" ?(?:RIP|RSP|RAX|RDX|RBP|R10|R13|FS|CS|CR0|DR0|DR3|DR6|PKRU)\b)"
)


@dataclass(frozen=True)
class Record:
    level: int  # syslog severity, 0 (emerg) .. 7 (debug)
    seq: int
    usec: int  # CLOCK_MONOTONIC (boot) time of the record, in microseconds
    message: str

    def console_lines(self) -> list[str]:
        """The record as dmesg prints it: one `[    s.uuuuuu] ` line per line of the message."""
        stamp = f"[{self.usec // 1_000_000:5d}.{self.usec % 1_000_000:06d}] "
        return [stamp + line for line in self.message.split("\n")]


def parse_record(raw: bytes) -> Record | None:
    """One record (its dictionary lines ignored); None for what is not a record."""
    head, _, rest = raw.partition(b";")
    fields = head.split(b",")
    if len(fields) < 3 or not rest:
        return None
    try:
        prio, seq, usec = int(fields[0]), int(fields[1]), int(fields[2])
    except ValueError:
        return None
    message = _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), rest.split(b"\n", 1)[0])
    return Record(prio & 7, seq, usec, message.decode("utf-8", "replace"))


def records(chunks: Iterable[bytes]) -> Iterator[Record]:
    """Records of a byte stream of kmsg reads or of lines (a file of them): dictionary lines,
    which start with a space, are skipped."""
    for chunk in chunks:
        for line in chunk.splitlines():
            if line and not line.startswith(b" "):
                record = parse_record(line)
                if record is not None:
                    yield record


def is_header(message: str) -> bool:
    """A line that starts a crash report of its own (the engine's strong header rows)."""
    if not any(trigger in message for trigger in TRIGGERS) or IGNORED_LINES.search(message):
        return False
    return any(needle in message and pattern.search(message) for needle, pattern in _STRONG_HEADERS)


@dataclass
class Cut:
    """A report being cut: its records from the header on."""

    records: list[Record] = field(default_factory=list)
    stack_closed: bool = False  # past </TASK>: only report-tail lines may still belong to it

    @property
    def header(self) -> Record:
        return self.records[0]

    def console_log(self) -> str:
        return "".join(line + "\n" for record in self.records for line in record.console_lines())


class Cutter:
    """Feeds records, hands back finished reports. `open` is the report being cut, if any."""

    def __init__(self) -> None:
        self.open: Cut | None = None

    def feed(self, record: Record) -> list[Cut]:
        """The reports this record finishes (the open one, when it ends here or before)."""
        done: list[Cut] = []
        message = record.message
        cut = self.open
        if cut is not None and cut.stack_closed and not _AFTER_STACK.match(message):
            done.append(self.close())
            cut = None
        if is_header(message):
            if cut is not None:
                done.append(self.close())
            self.open = Cut([record])
            return done
        if cut is None:
            return done
        cut.records.append(record)
        if END_TRACE in message or len(cut.records) >= MAX_REPORT_RECORDS:
            done.append(self.close())
        elif END_STACK in message and not _nested_stack_open(cut):
            cut.stack_closed = True
        return done

    def close(self) -> Cut:
        cut, self.open = self.open, None
        assert cut is not None
        return cut


def _nested_stack_open(cut: Cut) -> bool:
    """More <TASK> than </TASK> so far: a stack inside the report is still being printed."""
    opened = sum(1 for r in cut.records if r.message.strip() == "<TASK>")
    closed = sum(1 for r in cut.records if r.message.strip() == END_STACK)
    return opened > closed
