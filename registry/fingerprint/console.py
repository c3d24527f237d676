"""Find the crash in a kernel console log and read its kind, guilty frame and key frames.

The log is scanned once with a single alternation of literal needles (C speed), and only the
lines that contain one are examined further, so the cost is linear in the input and bounded by
the caps below whatever the input is: binary noise, one 1 MiB line, or a repeated header.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .frames import ExplainedFrame, canonical_function, frame_decisions, frame_label, search_matcher
from .patterns import (
    GENERIC_SKIP,
    HARDWARE_KINDS,
    HARDWARE_LABEL,
    HUNG_ANCHORS,
    HUNG_SKIP,
    IGNORED_LINES,
    KERNEL_TIMESTAMPS,
    LINE_NOISE,
    MCE_ERROR_CLASSES,
    MCE_MESSAGE_CLASSES,
    NAMED_SKIP_CLASSES,
    OOPSES,
    REPLAY_MARKER,
    SKIP_CLASSES,
    STALL_ANCHORS,
    STALL_BUCKETS,
    STRONG,
    TRANSPORT_PREFIXES,
    TRIGGERS,
    WEAK,
    Oops,
    Read,
)

MAX_TEXT = 16 << 20  # characters of log considered at all
MAX_LINE = 512  # characters of one line examined by any regex
MAX_CANDIDATES = 1024  # header-candidate lines examined from the head (then from the tail)
TAIL_BYTES = 256 << 10  # where the search resumes when the head exhausts the budget
MAX_REPORT_LINES = 800  # lines of one report read after its header
MAX_REPORT_BYTES = 128 << 10  # characters of one report read after its header
LONG_LINE_CHECK = 64 << 10  # logs this big are checked for pathological line lengths
LONG_LINE_AVERAGE = 2048  # an average line longer than this means junk
HEADER_GRACE_LINES = 8  # a header this close to the first belongs to its report
MAX_DETAIL_LINES = 80  # lines searched for title details and hardware classes
KEY_FRAMES = 3  # frames kept as the signature's key frames (guilty first)
STACK_HEADER_REACH = 15  # lines after a stack header within which its first frame must be

_NEEDLES = TRIGGERS
_HEADERS = tuple((oops, re.compile(oops.header)) for oops in OOPSES)
_DETAILS = {oops.kind + oops.title: tuple(re.compile(d) for d in oops.details)
            for oops in OOPSES if oops.details}


def _either(patterns) -> str:
    return "(?:" + "|".join(f"(?:{pattern})" for pattern in patterns) + ")"


# The prefixes of patterns.py's tables, in the order they stand before the kernel's text:
# noise, one transport (journal, syslog, dmesg), `<6>`, the timestamp, the caller id
# (`[ T123]`/`[  C1]`, CONFIG_PRINTK_CALLER; dmesg puts a space before it).
# Optional groups are greedy, not possessive: Python before 3.11.5 mismatches a possessive
# quantifier on a group holding a capture or an alternation (gh-106052), and the reporter runs
# on the host's own python3. Each part is anchored on a literal, so backtracking stays short.
_PREFIX = re.compile(
    f"{_either(LINE_NOISE)}?{_either(p for _, p in TRANSPORT_PREFIXES)}?"
    f"(?:<\\d{{1,2}}>)?(?P<ts>{_either(KERNEL_TIMESTAMPS)})?"
    r"(?: ?\[ *+(?P<ctx>[CT]\d++)\])? ?"
)
_REPORT_LINE = re.compile(
    rf"^{_PREFIX.pattern}(?P<body>[^\n\r]{{0,{MAX_LINE}}})[^\n]*+", re.MULTILINE
)
_LONG_LINE = re.compile(rf"([^\n]{{{MAX_LINE}}})[^\n]++")
_FRAME = re.compile(
    r"(?P<q>\? )?(?:\[<?[0-9a-f]++>?\] ?){0,2}+(?P<q2>\? )?(?:\d++:)?+"
    r"(?P<func>[A-Za-z_][\w.$]*+)(?:\+0x[0-9a-f]++/0x[0-9a-f]++"
    r"(?: \[(?P<mod>[\w-]++)(?: [0-9a-f]++)?\])?+(?P<unreliable> \(unreliable\))?)"
)
# arch/arm/kernel/traps.c dump_backtrace_entry(): "[<pc>] (func) from [<lr>] (caller+0x../0x..)"
_ARM_FRAME = re.compile(r"\[<[0-9a-f]++>\] \((?P<func>[A-Za-z_][\w.$]*+)(?:\+0x[0-9a-f]++/0x"
                        r"[0-9a-f]++)?\) from \[<[0-9a-f]++>\] \((?P<caller>[A-Za-z_][\w.$]*+)")
# The registers a PC line starts with (arch/*/kernel/process.c __show_regs, arch/arm
# "PC is at", arch/x86/kernel/dumpstack.c show_ip), with and without a symbol after them.
_PC_REGISTERS = ("RIP", "EIP", "IP", "NIP", "PC is at", "EIP is at", "pc :", "pc:", "epc :")
_PC_BARE_REGISTERS = ("RIP", "EIP", "IP", "NIP", "pc", "epc")
_RIP = re.compile(
    rf"(?P<reg>{'|'.join(_PC_REGISTERS)})(?::| is at)?+ *+(?:\[<?[0-9a-f]++>?\] *+)?+"
    r"(?:[0-9a-f]{4}:)?+(?:\[<?[0-9a-f]++>?\] *+){0,2}+(?P<func>[A-Za-z_][\w.$]*+)\+0x[0-9a-f]++"
    r"/0x[0-9a-f]++(?: \[(?P<mod>[\w-]++)(?: [0-9a-f]++)?\])?+"
)
# A PC line without a symbol: a jump to NULL prints "RIP: 0010:0x0" (arch/x86/kernel/dumpstack.c
# show_ip), old kernels "IP: [<  (null)>]  (null)".
_PC_BARE = re.compile(rf"(?P<reg>{'|'.join(_PC_BARE_REGISTERS)}) ?: (?:\d{{4}}:)?(?:0x[0-9a-f]++\b"
                      r"|\[< *+\(null\)>\])")

# Where a stack's frames begin: arch/*/kernel/dumpstack.c and stacktrace.c ("Call Trace:",
# arm64 "Call trace:"), mm/kmemleak.c ("backtrace:"), arch/arm/kernel/traps.c ("Backtrace:"),
# arch/riscv/kernel/process.c show_regs() without a marker (its last register line).
_TRACE_START = re.compile(r"Call [Tt]race:|Backtrace:|^backtrace(?: \(crc [0-9a-f]*+\))?:"
                          r"|status: [0-9a-f]{16} badaddr: [0-9a-f]{16} cause: [0-9a-f]{16}")
# Lines that start another stack, ending the one being read: the traces above, and the KASAN /
# KFENCE / KMSAN auxiliary stacks (mm/kasan/report.c, mm/kfence/report.c, mm/kmsan/report.c).
_STACK_START = re.compile(r"Call [Tt]race|(?:[Aa]llocated|[Ff]reed) by task \d|^(?:Allocated|Freed)"
                          r"(?: by task \d++)?:|(?<!stack) backtrace(?: \(crc [0-9a-f]*+\))?:"
                          r"|^backtrace|Backtrace:|Uninit was (?:stored to memory|created) at"
                          r"|Local variable .{1,120}? created at:|potentially related work creation")
# Another console line's timestamp inside the header: two CPUs printed into one line.
_MERGED_TIMESTAMP = re.compile(r"\[ *+\d++\.\d++\]")  # what VOLATILE_TEXT takes for a timestamp
# lib/fault-inject.c prints its own stack (should_fail*) into whatever else is printing.
_FOREIGN_FRAMES = ("should_fail",)
# Cheap gates before the line regexes, from literals each regex cannot match without (a line
# the regex would read and its gate refused would be lost silently: test_console.py generates
# lines from every regex and checks each passes its gate): a PC line starts with a register
# name; a stack marker holds one of _STACK_GATE; a frame or lock site holds "+0x", a lock site
# "at: ", an arm frame ") from [".
_PC_GATE = frozenset(name[0] for name in (*_PC_REGISTERS, *_PC_BARE_REGISTERS))
_STACK_GATE = re.compile("race|by task |Uninit was|created at|Allocated|Freed|status: |related work")
_LOCK_AT = re.compile(r"at: (?:\[<?[0-9a-f]++>?\] *+)?+(?P<func>[A-Za-z_][\w.$]*+)\+0x")
_MCE_BANK = re.compile(r"Bank (?P<bank>\d++): (?P<status>[0-9a-f]{16})\b")
_AER_TYPE = re.compile(r"(?P<driver>[\w-]++) [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: "
                       r"(?:AER: )?PCIe Bus Error: severity=(?P<sev>[\w ()-]+?), "
                       r"type=(?P<type>[\w ]+?),")
_AER_DEVICE = re.compile(r"device \[(?P<id>[0-9a-f]{4}:[0-9a-f]{4})\]")
_AER_ERROR = re.compile(r"\[ ?\d++\] (?P<name>\w++)")
_AER_FIRST = re.compile(r"\[ ?\d++\] (?P<name>\w++) ++\(First\)")

# Headers that repeat inside one report of these kinds without starting a new crash.
_SAME_REPORT_KINDS = frozenset({"machine-check", "edac", "pcie-aer"})
_STALL_ANCHORS = search_matcher(STALL_ANCHORS)
_HUNG_SKIP = search_matcher(HUNG_SKIP)
_GENERIC_SKIP = search_matcher(GENERIC_SKIP)
_NAMED_SKIP = search_matcher(entry for name, entries in SKIP_CLASSES if name in NAMED_SKIP_CLASSES
                             for entry in entries)


@functools.cache
def _kind_skip(kind_helpers: str) -> re.Pattern[str]:
    """The generic skip classes plus one report kind's own helpers, as one regex (one search a
    frame), compiled when a kind is first met: all kinds at import took ~0.1 s, paid by every
    reporter run mid-crash and every CLI start."""
    return search_matcher([*GENERIC_SKIP, kind_helpers])


_SKIP_CLASS_RULES = tuple((name, search_matcher(entries)) for name, entries in SKIP_CLASSES)
_EXPLAIN_RULES = {oops.name: ((f"{oops.name}-helpers", search_matcher([oops.skip])),
                              *_SKIP_CLASS_RULES) for oops in OOPSES if oops.skip}


@dataclass(frozen=True, slots=True)
class Line:
    """One report line without its console prefix, and what it holds (shared: _parse_line's
    cache hands the same one to every report that prints the line)."""

    text: str
    frame: tuple[str, str | None] | None = None  # (function, module), reliable frames only
    rip: tuple[str, str | None] | None = None  # the symbol of a PC line
    register: str = ""  # set on PC lines (with or without a symbol): RIP, pc, epc ...
    at: tuple[str, str | None] | None = None  # lockdep's "..., at: func+0x" acquisition site
    bracketed: bool = False  # the frame is printed "[<address>] func+0x" (print_ip_sym)
    caller: tuple[str, str | None] | None = None  # arm's "(f) from [<pc>] (caller+0x..)"
    trace_start: str = ""  # the call-trace marker this line is ("Call Trace", ...)
    boundary: bool = False  # the line starts a stack (a trace, "Allocated by task" ...)


@dataclass
class KernelCrash:
    """What the console parser found: the ingredients of a signature."""

    oops: Oops
    fields: dict[str, str]
    header: str
    function: str | None = None
    module: str | None = None
    frames: list[str] = field(default_factory=list)
    detail: str = ""  # what identifies the crash when code does not (hardware class, reason)
    labels: list[str] = field(default_factory=list)
    pick: Pick | None = None  # how the guilty frame was chosen, for the explanation
    flags: list[str] = field(default_factory=list)  # corrupted, interleaved, truncated


def strip_prefix(line: str) -> tuple[str, str | None]:
    """Drop timestamps and log-level prefixes; return the text and the printk caller context."""
    line = line[:MAX_LINE].rstrip("\r")
    match = _PREFIX.match(line)
    if match is None:  # pragma: no cover - the prefix pattern matches the empty string
        return line, None
    return line[match.end():], match.group("ctx")


def _rows_by_trigger() -> dict[str, tuple[int, ...]]:
    """Rows a line can match, per trigger it holds (rows naming no trigger go everywhere)."""
    index: dict[str, list[int]] = {trigger: [] for trigger in TRIGGERS}
    for row, oops in enumerate(OOPSES):
        named = [trigger for trigger in TRIGGERS if trigger in oops.header
                 or trigger in oops.needle or oops.needle in trigger] or TRIGGERS
        for trigger in named:
            index[trigger].append(row)
    return {trigger: tuple(rows) for trigger, rows in index.items()}


_ROWS_BY_TRIGGER = _rows_by_trigger()


@functools.lru_cache(maxsize=512)
def _candidate_rows(present: tuple[str, ...]) -> tuple[tuple[Oops, re.Pattern[str]], ...]:
    rows = sorted({row for trigger in present for row in _ROWS_BY_TRIGGER[trigger]})
    return tuple(_HEADERS[row] for row in rows)


@functools.lru_cache(maxsize=2048)  # consoles repeat their messages; the cache is bounded
def _match_header(text: str) -> tuple[Oops, re.Match[str]] | None:
    present = tuple(trigger for trigger in TRIGGERS if trigger in text)
    for oops, pattern in _candidate_rows(present):
        if oops.needle in text:
            match = pattern.search(text)
            if match:
                return None if IGNORED_LINES.search(text) else (oops, match)
    return None


def _needle_lines(log: str, begin: int, limit: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line in log[begin:limit] holding a needle, in order.

    One str.find per needle occurrence that starts a line's examination, so a needle repeated
    thousands of times on one line costs one find, and the total is linear in the input.
    """
    heap = [(at, needle) for needle in _NEEDLES if (at := log.find(needle, begin, limit)) >= 0]
    heapq.heapify(heap)
    while heap:
        start = log.rfind("\n", begin, heap[0][0]) + 1 or begin
        end = log.find("\n", heap[0][0], limit)
        end = limit if end < 0 else end
        yield start, end
        while heap and heap[0][0] <= end:
            _, needle = heapq.heappop(heap)
            following = log.find(needle, end + 1, limit)
            if following >= 0:
                heapq.heappush(heap, (following, needle))


Header = tuple[int, Oops, re.Match[str], str]  # line start, row, match, stripped line


def _find_header(log: str) -> Header | None:
    """First crash header in the log: the first strong or continuation one, else a weak one.

    A log whose head is so full of look-alike lines that the candidate budget runs out is
    searched again from its tail, where a console log's crash usually is."""
    found, exhausted = _first_header(log, 0)
    if exhausted and (found is None or found[1].rank == WEAK):
        tail, _ = _first_header(log, max(len(log) - TAIL_BYTES, 0))
        if tail is not None and (found is None or tail[1].rank != WEAK):
            found = tail
    return found


def _first_header(log: str, begin: int) -> tuple[Header | None, bool]:
    """(header, whether the candidate budget ran out) from `begin` on."""
    fallback = None
    for examined, (start, end) in enumerate(_needle_lines(log, begin, len(log))):
        if examined >= MAX_CANDIDATES:
            return fallback, True
        text, _ = strip_prefix(log[start:min(end, start + MAX_LINE)])
        found = _match_header(text)
        if found is None:
            continue
        oops, match = found
        if oops.rank != WEAK:
            return (start, oops, match, text), False
        if fallback is None:
            fallback = (start, oops, match, text)
    return fallback, False


def _foreign(ctx: str | None, has_time: bool, context: str | None, timed: bool,
             cpu_traceback: bool) -> bool:
    """A line of another task or CPU (printk caller ids differ; an NMI backtrace of all CPUs
    keeps the CPU contexts), or of another program on the console (no timestamp)."""
    if context and ctx != context and not (cpu_traceback and ctx and ctx[0] == "C"):
        return True
    return timed and not has_time


def _read_report(log: str, start: int) -> list[Line]:
    """The report's lines: same printk context as the header, up to the next crash. When the
    header carries printk's timestamp, untimed lines are another program on the same serial
    console (a fuzzer's log, a shell), not the kernel, and are left out."""
    limit = min(len(log), start + MAX_REPORT_BYTES)
    headers = _needle_lines(log, start, limit)  # walked in step with the lines, never further
    next_header = next(headers, (limit, limit))[0]
    lines: list[Line] = []
    context: str | None = None
    cpu_traceback = timed = False
    for match in _REPORT_LINE.finditer(log, start, limit):
        text, ctx, stamp = match.group("body", "ctx", "ts")
        if not lines:
            context, timed = ctx, stamp is not None
        elif _foreign(ctx, stamp is not None, context, timed, cpu_traceback):
            continue
        at = match.start()
        if next_header <= at:  # only lines holding a needle can be another crash's header
            while next_header < at:
                next_header = next(headers, (limit, limit))[0]
            if len(lines) > HEADER_GRACE_LINES and at == next_header:
                found = _match_header(text)
                if found and found[0].rank == STRONG and found[0].kind not in _SAME_REPORT_KINDS:
                    break
        if "NMI" in text and ("NMI backtrace for cpu" in text or "Sending NMI from" in text):
            cpu_traceback = True
        lines.append(_parse_line(text))
        if len(lines) >= MAX_REPORT_LINES:
            break
    return lines


@functools.lru_cache(maxsize=4096)  # a storm's reports print the same stack lines; bounded
def _parse_line(text: str) -> Line:
    """What one report line holds. Symboliser annotations ("f file.c:12 [inline]") are not
    frames: the kernel's unwinder printed only the real frame after them."""
    stripped = text.strip()
    if stripped[:2] == "? ":  # an unreliable frame: never guilty, never a marker
        return Line(stripped)
    if _STACK_GATE.search(stripped):
        marker = _TRACE_START.search(stripped)
        if marker or _STACK_START.search(stripped):
            trace_start = marker.group(0).rstrip(":")[:40] if marker else ""
            return Line(stripped, trace_start=trace_start, boundary=True)
    if stripped.endswith("[inline]"):
        return Line(stripped)
    if stripped[:1] in _PC_GATE:
        rip = _RIP.match(stripped) or _PC_BARE.match(stripped)
        if rip:
            symbol = (canonical_function(rip.group("func")), rip.group("mod")) if rip.re is _RIP else None
            return Line(stripped, register=rip.group("reg").split(" ")[0], rip=symbol)
    if "+0x" in stripped:
        if "at: " in stripped:
            at = _LOCK_AT.search(stripped)
            if at:
                return Line(stripped, at=(canonical_function(at.group("func")), None))
        frame = _FRAME.match(stripped)
        if frame:
            if frame.group("q") or frame.group("q2") or frame.group("unreliable"):
                return Line(stripped)
            return Line(stripped, frame=(canonical_function(frame.group("func")), frame.group("mod")),
                        bracketed=stripped[:2] == "[<")
    if ") from [" in stripped:
        arm = _ARM_FRAME.search(stripped)
        if arm:
            return Line(stripped, frame=(canonical_function(arm.group("func")), None),
                        caller=(canonical_function(arm.group("caller")), None))
    return Line(stripped)


def line_frames(line: str) -> list[tuple[str, str | None, bool]]:
    """The frames one raw console line shows, read as the engine reads them, for pages that
    show a log: (function, module, unreliable) in reading order: a PC line's symbol, a lockdep
    acquisition site, a call-trace frame and (arm) its caller; a `? ` or `(unreliable)` frame
    is read only to be shown, never to be guilty."""
    text = strip_prefix(line)[0].strip()
    parsed = _parse_line(text)
    found = [(name, module, False)
             for name, module in filter(None, (parsed.rip, parsed.at, parsed.frame, parsed.caller))]
    if not found and "+0x" in text:
        loose = _FRAME.match(text[2:] if text[:2] == "? " else text)
        if loose:
            found.append((canonical_function(loose.group("func")), loose.group("mod"), True))
    return found


# --- guilty frame: a small program per report kind (patterns.Read: the parts and their grammar)

Frame = tuple[str, str | None]


@dataclass
class Pick:
    """A program's decision and what it read: the raw material of the explanation."""

    guilty: Frame | None = None
    key: list[Frame] = field(default_factory=list)
    section: str | None = None  # the part of the report the guilty frame came from
    frames: list[Frame] = field(default_factory=list)  # the frames read, in printed order
    index: int | None = None  # position of the guilty frame in `frames`
    passed: str | None = None  # rule naming real frames passed over before the guilty one
    named: frozenset[int] = frozenset()  # positions the report named (never skipped)


def _stack_frames(lines: list[Line], at: int, frames: list, label: str) -> int:
    """Append the frames from `at` to the end of this stack; return where it ended."""
    for index in range(at, len(lines)):
        line = lines[index]
        if line.boundary:
            return index
        if line.frame:
            frames.append((line.frame, label, False))
            if line.caller:
                frames.append((line.caller, label, False))
    return len(lines)


def _run(parts: tuple[Read, ...], crash: KernelCrash, lines: list[Line]) -> list:
    """The frames one alternative yields: [(frame, section, named)] in printed order."""
    frames: list = []
    at, label = 0, "report"
    for read in parts:
        kind, named = read.part, read.named
        if kind == "header":
            name = crash.fields.get("func")
            if name:
                frames.append(((canonical_function(name), None), "header", named))
            continue
        if kind in ("frames", "trace"):
            if kind == "trace":
                start = next((i for i in range(at, len(lines)) if lines[i].trace_start), None)
                if start is None:
                    break
                label, at = lines[start].trace_start, start + 1
            at = _stack_frames(lines, at, frames, label)
            continue
        found = next((i for i in range(at, len(lines)) if _PART_TESTS[kind](lines[i], read.texts)),
                     None)
        if found is None:
            break
        line, at = lines[found], found + 1
        if kind == "find":
            label = next(text for text in read.texts if text in line.text)
        elif kind == "rip":
            label = line.register
            if line.rip:
                frames.append((line.rip, label, named))
        else:  # "at", "pc"
            label = "at:" if kind == "at" else "[<pc>]"
            frames.append((line.at if kind == "at" else line.frame, label, named))
    return frames


_PART_TESTS = {
    "find": lambda line, texts: any(text in line.text for text in texts),
    "rip": lambda line, texts: bool(line.register),
    "at": lambda line, texts: line.at is not None,
    "pc": lambda line, texts: line.bracketed and line.frame is not None,
}


def _first(frames: list[Frame], kept: list[bool]) -> tuple[int | None, str | None, str | None]:
    return next((i for i, keep in enumerate(kept) if keep), None), None, None


def _stall(frames: list[Frame], kept: list[bool]) -> tuple[int | None, str | None, str | None]:
    """Stalls loop across several functions: name the bug after the real frame just above the
    first dispatch point (or the dispatch point itself when the stack starts there)."""
    previous = None
    for index, (name, _) in enumerate(frames):
        if _STALL_ANCHORS.search(name):
            bucket = next((b for prefix, b in STALL_BUCKETS if prefix in name), None)
            if bucket or previous is None:
                return index, None, bucket
            return previous, "stall-loop", None
        if kept[index]:
            previous = index
    return None, None, None


def _hung(frames: list[Frame], kept: list[bool]) -> tuple[int | None, str | None, str | None]:
    """A hung task's stack: the first known shared wait (rtnl_lock, synchronize_rcu), else the
    first real frame below the blocking primitives it sleeps in."""
    for index, (name, _) in enumerate(frames):
        bucket = next((b for anchor, b in HUNG_ANCHORS if anchor in name), None)
        if bucket is not None:
            return index, "hung-anchor", bucket or None
    return next((i for i, (name, _) in enumerate(frames)
                 if kept[i] and not _HUNG_SKIP.search(name)), None), None, None


EXTRACTORS = {"first": _first, "stall": _stall, "hung": _hung}


def _choose(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    """Run the row's alternatives; the first that names a frame decides."""
    extractor = EXTRACTORS[crash.oops.extract]
    first_read: Pick | None = None
    for parts in crash.oops.guilty:
        read = _run(parts, crash, lines)
        frames = [frame for frame, _, _ in read]
        kept = [not (_NAMED_SKIP if named else skip).search(frame[0]) for frame, _, named in read]
        index, passed, bucket = extractor(frames, kept)
        named = frozenset(i for i, (_, _, is_named) in enumerate(read) if is_named and kept[i])
        if index is not None:
            guilty = (bucket, frames[index][1]) if bucket else frames[index]
            if guilty[1] is None:  # a header names no module; the trace's frame of it does
                guilty = next((f for f in frames if f[0] == guilty[0] and f[1]), guilty)
            rest = [f for f, keep in zip(frames[index + 1:], kept[index + 1:], strict=True) if keep]
            key = [guilty, *rest][:KEY_FRAMES]
            return Pick(guilty, key, read[index][1], frames, index, passed, named)
        if first_read is None and read:
            first_read = Pick(section=read[0][1], frames=frames, named=named)
            fallback = next((i for i, keep in enumerate(kept) if keep), None)
            if fallback is not None:  # no anchor: the first real frame, as a last resort
                first_read = Pick(frames[fallback], [frames[fallback]], read[fallback][1],
                                  frames, fallback, None, named)
    return first_read or Pick()


def explain_frames(crash: KernelCrash) -> tuple[list[ExplainedFrame], int | None]:
    """The frames the program read, each with its decision and the skip class behind it."""
    pick = crash.pick
    rules = _EXPLAIN_RULES.get(crash.oops.name, _SKIP_CLASS_RULES)
    if crash.oops.extract == "hung":
        rules = (*rules, ("hung-wait", _HUNG_SKIP))
    return frame_decisions(pick.frames, pick.index, rules, pick.passed, pick.named)


# --- hardware classifiers: the identity of a hardware error is its class, not the code ------

def _mce_class(status: int) -> str:
    code = status & 0xFFFF & ~0x1000
    for mask, value, name in MCE_ERROR_CLASSES:
        if code & mask == value:
            return name
    return "unclassified"


def _classify_mce(crash: KernelCrash, lines: list[Line]) -> None:
    texts = [crash.header] + [line.text for line in lines[:MAX_DETAIL_LINES]]
    for text in texts:
        match = _MCE_BANK.search(text)
        if match:
            status = int(match.group("status"), 16)
            severity = "uncorrected" if status >> 61 & 1 else "corrected"
            crash.detail = f"{_mce_class(status)} error ({severity})"
            return
    for text in texts:
        for needle, name in MCE_MESSAGE_CLASSES:
            if needle in text:
                crash.detail = name
                return
    crash.detail = "unclassified"


def _classify_aer(crash: KernelCrash, lines: list[Line]) -> None:
    texts = [line.text for line in lines[:MAX_DETAIL_LINES]]
    severity, kind, device, error = "", "", "", ""
    for text in texts:
        bus = _AER_TYPE.search(text)
        if bus and not kind:
            crash.module = bus.group("driver")
            severity, kind = bus.group("sev"), bus.group("type")
        dev = _AER_DEVICE.search(text)
        if dev and not device:
            device = dev.group("id")
        first = _AER_FIRST.search(text)
        if first:
            error = first.group("name")
        elif not error:
            named = _AER_ERROR.search(text)
            error = named.group("name") if named else ""
    severity = severity or ("Uncorrected (Fatal)" if "Fatal" in crash.header else "Corrected")
    severity = severity.lower().replace("correctable", "corrected")  # newer kernels' wording
    parts = [severity, kind, error, f"on [{device}]" if device else ""]
    crash.detail = " ".join(part for part in parts if part)


CLASSIFIERS = {"mce": _classify_mce, "aer": _classify_aer}


def _cut_long_lines(log: str) -> str:
    """Keep the first MAX_LINE characters of each line when lines are suspiciously long on
    average (binary junk, a wedged console): no regex ever looks further into a line."""
    if len(log) > LONG_LINE_CHECK and log.count("\n") * LONG_LINE_AVERAGE < len(log):
        return _LONG_LINE.sub(lambda m: m.group(1), log)
    return log


def _stack_missing(lines: list[Line]) -> bool:
    """The kernel prints frames under every stack header; none means the console lost them."""
    if not any(line.frame or line.rip for line in lines):
        return True
    for index, line in enumerate(lines):
        if not line.boundary:
            continue
        followers = [f for f in lines[index + 1:] if f.text[:2] != "? "][:STACK_HEADER_REACH]
        for follower in followers:
            if follower.boundary:
                return True
            if follower.frame or "(stack is not available)" in follower.text:
                break
        else:
            return True
    return False


def _damage(crash: KernelCrash, header: str, lines: list[Line]) -> list[str]:
    """How the report was garbled: "corrupted" (the header lost its text), "interleaved"
    (another CPU's output in the header line, or a fault-injection stack among the frames
    read), "truncated" (the stack the kind prints is missing or empty)."""
    flags = [crash.oops.garbled] if crash.oops.garbled else []
    if _MERGED_TIMESTAMP.search(header) or any(
            name.startswith(_FOREIGN_FRAMES) for name, _ in crash.pick.frames):
        flags.append("interleaved")
    named = crash.pick.index is not None and crash.pick.section == "header"
    if crash.oops.by_function and crash.oops.guilty and not named and "truncated" not in flags \
            and _stack_missing(lines):
        flags.append("truncated")
    return flags


def _drop_replayed(log: str) -> str:
    """Without the copies of lines a console was cut off in: before each REPLAY_MARKER line the
    cut line (when the marker starts its line), and the marker itself; the line printed again
    after it is the one read."""
    if REPLAY_MARKER not in log:
        return log
    lines = log.split("\n")
    kept: list[str] = []
    for line in lines:
        if REPLAY_MARKER in line:
            if kept and strip_prefix(line)[0].startswith(REPLAY_MARKER):
                kept.pop()
            continue
        kept.append(line)
    return "\n".join(kept)


def parse_console_log(log: str) -> KernelCrash | None:
    """The first crash in a console log, or None when the log holds no crash."""
    log = _drop_replayed(_cut_long_lines(log[:MAX_TEXT]))
    found = _find_header(log)
    if found is None:
        return None
    start, oops, match, header = found
    fields = {name: value for name, value in match.groupdict().items() if value}
    crash = KernelCrash(oops=oops, fields=fields, header=header)
    lines = _read_report(log, start)
    for pattern in _DETAILS.get(oops.kind + oops.title, ()):
        for line in lines[:MAX_DETAIL_LINES]:
            detail = pattern.search(line.text)
            if detail:
                fields.update({k: v for k, v in detail.groupdict().items() if v})
                break
    crash.pick = _choose(crash, lines, _kind_skip(oops.skip) if oops.skip else _GENERIC_SKIP)
    if crash.pick.guilty is not None:
        crash.function, crash.module = crash.pick.guilty
        crash.frames = [frame_label(name, module) for name, module in crash.pick.key]
    crash.flags = _damage(crash, header, lines)
    if oops.classify:
        CLASSIFIERS[oops.classify](crash, lines)
    if oops.kind in HARDWARE_KINDS:
        crash.labels.append(HARDWARE_LABEL)
    return crash
