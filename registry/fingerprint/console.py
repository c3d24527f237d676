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

from .frames import canonical_function, frame_decisions, frame_label, skip_matcher
from .patterns import (
    GENERIC_SKIP,
    HARDWARE_KINDS,
    HARDWARE_LABEL,
    HUNG_ANCHORS,
    HUNG_SKIP,
    IGNORED_LINES,
    MCE_ERROR_CLASSES,
    MCE_MESSAGE_CLASSES,
    OOPSES,
    SKIP_CLASSES,
    STALL_ANCHORS,
    STALL_BUCKETS,
    STRONG,
    TRIGGERS,
    WEAK,
    Oops,
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

_NEEDLES = TRIGGERS
_HEADERS = tuple((oops, re.compile(oops.header)) for oops in OOPSES)
_DETAILS = {oops.kind + oops.title: tuple(re.compile(d) for d in oops.details)
            for oops in OOPSES if oops.details}

# `<6>`, `[  12.345678]`, `[ T123]`/`[  C1]`, syslog/journal "... kernel: " prefixes.
_PREFIX = re.compile(
    r"(?:\*\* \d++ printk messages dropped \*\* )?+(?:[\w.-]++ login: )?+"
    r"(?:(?:[\w:.+/-]++ ){1,4}?kernel: )?"
    r"(?:<\d{1,2}>)?+(?:\[ *+\d++\.\d++\])?+(?:\[ *+(?P<ctx>[CT]\d++)\])?+ ?"
)
_REPORT_LINE = re.compile(
    rf"^{_PREFIX.pattern}(?P<body>[^\n\r]{{0,{MAX_LINE}}})[^\n]*+", re.MULTILINE
)
_LONG_LINE = re.compile(rf"([^\n]{{{MAX_LINE}}})[^\n]++")
_FRAME = re.compile(
    r"(?P<q>\? )?(?:\[<?[0-9a-f]++>?\] ?){0,2}+(?P<q2>\? )?(?:\d++:)?+"
    r"(?P<func>[A-Za-z_][\w.$]*+)(?:\+0x[0-9a-f]++/0x[0-9a-f]++"
    r"(?: \[(?P<mod>[\w-]++)(?: [0-9a-f]++)?\])?+(?P<unreliable> \(unreliable\))?"
    r"| [\w./-]++:\d++ \[inline\])"
)
_ARM_FRAME = re.compile(r"\[<[0-9a-f]++>\] \((?P<func>[A-Za-z_][\w.$]*+)(?:\+0x[0-9a-f]++/0x"
                        r"[0-9a-f]++)?\) from ")
_RIP = re.compile(
    r"(?P<reg>RIP|EIP|IP|NIP|PC is at|EIP is at|pc :|pc:|epc :)(?::| is at)?+ *+(?:\[<?[0-9a-f]++>?\] *+)?+"
    r"(?:[0-9a-f]{4}:)?+(?:\[<?[0-9a-f]++>?\] *+){0,2}+(?P<func>[A-Za-z_][\w.$]*+)\+0x[0-9a-f]++"
    r"/0x[0-9a-f]++(?: \[(?P<mod>[\w-]++)(?: [0-9a-f]++)?\])?+"
)
_TRACE_START = re.compile(r"(?:Call [Tt]race|[Bb]acktrace|stack backtrace):")
_SEGMENT_BREAK = re.compile(r"</?(?:IRQ|NMI|EOI|TASK|SOFTIRQ)>|^NMI backtrace")
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
_GENERIC_SKIP = skip_matcher(GENERIC_SKIP)
_STALL_ANCHORS = skip_matcher([entry[1:] if entry[0] == "^" else ".*" + entry
                               for entry in STALL_ANCHORS])
_HUNG_SKIP = skip_matcher(HUNG_SKIP)
_OWN_SKIP = {oops.skip: skip_matcher(".*" + entry for entry in oops.skip.split("|"))
             for oops in OOPSES if oops.skip}
_SKIP_CLASS_RULES = tuple((name, skip_matcher(entries)) for name, entries in SKIP_CLASSES)
_EXPLAIN_RULES = {oops.name: ((f"{oops.name}-helpers", skip_matcher(
    [entry[1:] if entry[0] == "^" else ".*" + entry for entry in oops.skip.split("|")])),
    *_SKIP_CLASS_RULES) for oops in OOPSES if oops.skip}
_HUNG_RULES = (("hung-wait", _HUNG_SKIP),)
_REGISTER_NAMES = {"PC is at": "PC", "EIP is at": "EIP", "pc :": "pc", "pc:": "pc", "epc :": "epc"}
_KIND_SKIP = {oops.skip: skip_matcher(GENERIC_SKIP, [entry[1:] if entry[0] == "^" else ".*" + entry
                                                      for entry in oops.skip.split("|")])
              for oops in OOPSES if oops.skip}


@dataclass
class Line:
    """One report line without its console prefix, and what it holds."""

    text: str
    frame: tuple[str, str | None] | None = None  # (function, module), reliable frames only
    rip: tuple[str, str | None] | None = None
    register: str = ""  # the PC line's register name when `rip` is set: RIP, pc, epc ...
    trace_start: bool = False
    segment_break: str = ""  # the context marker (<IRQ>, NMI backtrace ...) the line is


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


def _read_report(log: str, start: int) -> list[Line]:
    """The report's lines: same printk context as the header, up to the next crash."""
    limit = min(len(log), start + MAX_REPORT_BYTES)
    headers = _needle_lines(log, start, limit)  # walked in step with the lines, never further
    next_header = next(headers, (limit, limit))[0]
    lines: list[Line] = []
    context: str | None = None
    cpu_traceback = False
    for match in _REPORT_LINE.finditer(log, start, limit):
        text, ctx = match.group("body"), match.group("ctx")
        if not lines:
            context = ctx
        elif context and ctx != context and not (cpu_traceback and ctx and ctx[0] == "C"):
            continue
        while next_header < match.start():
            next_header = next(headers, (limit, limit))[0]
        if len(lines) > HEADER_GRACE_LINES and match.start() == next_header:
            found = _match_header(text)
            if found and found[0].rank == STRONG and found[0].kind not in _SAME_REPORT_KINDS:
                break
        if "NMI" in text and ("NMI backtrace for cpu" in text or "Sending NMI from" in text):
            cpu_traceback = True
        lines.append(_parse_line(text))
        if len(lines) >= MAX_REPORT_LINES:
            break
    return lines


def _parse_line(text: str) -> Line:
    stripped = text.strip()
    line = Line(text=stripped)
    if stripped[:2] == "? ":  # an unreliable frame: never guilty, never a marker
        return line
    if "race:" in stripped or "acktrace:" in stripped:
        line.trace_start = bool(_TRACE_START.search(stripped))
        return line
    if "<" in stripped:
        marker = _SEGMENT_BREAK.search(stripped)
        if marker:
            line.segment_break = marker.group(0)
            return line
    if "+0x" in stripped:
        rip = _RIP.match(stripped) if stripped[:1] in "REINPpe" else None
        if rip:
            line.rip = (canonical_function(rip.group("func")), rip.group("mod"))
            line.register = _REGISTER_NAMES.get(rip.group("reg"), rip.group("reg"))
            return line
        frame = _FRAME.match(stripped)
        if frame:
            if not (frame.group("q") or frame.group("q2") or frame.group("unreliable")):
                line.frame = (canonical_function(frame.group("func")), frame.group("mod"))
            return line
    if stripped.endswith("[inline]"):
        frame = _FRAME.match(stripped)
        if frame and not (frame.group("q") or frame.group("q2")):
            line.frame = (canonical_function(frame.group("func")), None)
    elif ") from [" in stripped:
        arm = _ARM_FRAME.search(stripped)
        if arm:
            line.frame = (canonical_function(arm.group("func")), None)
    return line


# --- guilty-frame strategies -----------------------------------------------------------------

Frame = tuple[str, str | None]


@dataclass
class Pick:
    """A strategy's decision and what it read: the raw material of the explanation."""

    guilty: Frame | None = None
    key: list[Frame] = field(default_factory=list)
    section: str | None = None  # the part of the report the frames came from
    frames: list[Frame] = field(default_factory=list)  # the frames read, in printed order
    index: int | None = None  # position of the guilty frame in `frames`
    passed: str | None = None  # rule naming real frames passed over before the guilty one
    extra: tuple[tuple[str, re.Pattern[str]], ...] = ()  # the strategy's own skip classes


def _trace(lines: list[Line]) -> tuple[str, list[Frame]]:
    """The first stack trace (after its marker) and the marker's name; else the whole report."""
    begin = next((i for i, line in enumerate(lines) if line.trace_start), None)
    if begin is None:
        return "report", [line.frame for line in lines if line.frame]
    marker = _TRACE_START.search(lines[begin].text)
    section = marker.group(0)[:-1] if marker else "report"
    return section, [line.frame for line in lines[begin:] if line.frame]


def _rip_frames(lines: list[Line]) -> tuple[str, list[Frame]]:
    """The faulting RIP/PC, then the frames printed after it; the trace if there is no PC."""
    for index, line in enumerate(lines):
        if line.rip:
            rest = [x.frame or x.rip for x in lines[index + 1:] if x.frame or x.rip]
            return line.register, [line.rip, *rest]
    return _trace(lines)


def _first_kept(frames: list[Frame], skip: re.Pattern[str]) -> int | None:
    return next((i for i, (name, _) in enumerate(frames) if not skip.match(name)), None)


def _pick(section: str, frames: list[Frame], skip: re.Pattern[str]) -> Pick:
    """The first frame that is not generic is guilty; the key frames run from it on."""
    index = _first_kept(frames, skip)
    if index is None:
        return Pick(section=section, frames=frames)
    return Pick(frames[index], _key_frames(frames[index:], skip), section, frames, index)


def _key_frames(frames: list[Frame], skip: re.Pattern[str]) -> list[Frame]:
    kept = [frames[0]] + [f for f in frames[1:] if not skip.match(f[0])]
    return kept[:KEY_FRAMES]


def _guilty_rip(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    return _pick(*_rip_frames(lines), skip)


def _guilty_stack(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    return _pick(*_trace(lines), skip)


def _guilty_frames(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    return _pick("report", [line.frame for line in lines if line.frame], skip)


def _guilty_header(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    """The function the header names (sanitizers print the faulting function there)."""
    section, frames = _trace(lines)
    name = crash.fields.get("func")
    if name:
        name = canonical_function(name)
        if not skip.match(name):
            key = _key_frames([(name, None), *(f for f in frames if f[0] != name)], skip)
            index = next((i for i, frame in enumerate(frames) if frame[0] == name), None)
            if index is None:
                frames, index = [(name, None), *frames], 0
            return Pick((name, None), key, "header", frames, index, passed="named-by-header")
    return _pick(section, frames, skip)


def _segments(lines: list[Line]) -> list[tuple[str, list[Frame]]]:
    """Frames split at IRQ/NMI boundaries and PC lines: each run is one execution context,
    named after the marker that opened it."""
    runs: list[tuple[str, list[Frame]]] = [("report", [])]
    for line in lines:
        if line.rip:
            runs.append((line.register, [line.rip]))
        elif line.segment_break:
            runs.append((line.segment_break, []))
        elif line.frame:
            runs[-1][1].append(line.frame)
    return [run for run in runs if run[1]]


def _stall_frame(section: str, run: list[Frame], skip: re.Pattern[str]) -> Pick:
    """Name a looping context after the dispatch point it runs under (no guilty frame if all
    generic): the last real frame above the first dispatch frame, generic or not, below it."""
    kept = [i for i, frame in enumerate(run) if not skip.match(frame[0])]
    if not kept:
        return Pick(section=section, frames=run)
    first = run[kept[0]]
    for prefix, bucket in STALL_BUCKETS:
        if first[0].startswith(prefix):
            return Pick((bucket, first[1]), [(bucket, first[1])], section, run, kept[0])
    above: list[int] = []
    for index, frame in enumerate(run):
        if _STALL_ANCHORS.match(frame[0]) and above:
            guilty, looped = run[above[-1]], [run[i] for i in above]
            key = [guilty, *(run[i] for i in kept if run[i] not in looped)][:KEY_FRAMES]
            return Pick(guilty, key, section, run, above[-1], passed="stall-loop")
        if not skip.match(frame[0]):
            above.append(index)
    return Pick(first, [run[i] for i in kept[:KEY_FRAMES]], section, run, kept[0])


def _guilty_stall(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    """Stalls loop over many functions: the first context with real code names the bug."""
    for section, run in _segments(lines):
        pick = _stall_frame(section, run, skip)
        if pick.guilty:
            return pick
    return Pick()


def _guilty_overflow(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    """Stack overflows: where the recursion was entered, not where the stack ran out."""
    return _stall_frame("report", [frame for _, run in _segments(lines) for frame in run], skip)


def _guilty_hung(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    section, frames = _trace(lines)
    for index, (name, module) in enumerate(frames):
        for anchor, bucket in HUNG_ANCHORS:
            if name.lstrip("_").startswith(anchor):
                return Pick((bucket, module), [(bucket, module)], section, frames, index,
                            passed="hung-anchor", extra=_HUNG_RULES)
    kept = [i for i, f in enumerate(frames) if not skip.match(f[0]) and not _HUNG_SKIP.match(f[0])]
    if not kept:
        return Pick(section=section, frames=frames, extra=_HUNG_RULES)
    return Pick(frames[kept[0]], [frames[i] for i in kept[:KEY_FRAMES]], section, frames, kept[0],
                extra=_HUNG_RULES)


def _guilty_lockdep(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    """Lock reports: the function taking (or releasing) the offending lock, as printed; when
    that is a generic helper, the first real caller in the chain that takes the new lock."""
    anchor, own_skip = crash.oops.anchor, _OWN_SKIP.get(crash.oops.skip)
    for index, line in enumerate(lines):
        if anchor and anchor in line.text:
            for follower in lines[index + 1:index + 12]:
                match = _LOCK_AT.search(follower.text)
                if match:
                    name = canonical_function(match.group("func"))
                    if own_skip is not None and own_skip.match(name):
                        break
                    printed = Pick((name, None), [(name, None)], anchor, [(name, None)], 0)
                    if not skip.match(name):
                        return printed
                    chain = _lock_chain_frames(lines)
                    picked = _pick("-> #0", chain, skip) if chain else _pick(*_trace(lines), skip)
                    return picked if picked.guilty else printed
            break
    return _pick(*_trace(lines), skip)


def _lock_chain_frames(lines: list[Line]) -> list[Frame]:
    """Frames under lockdep's "-> #0" entry: where the new lock is being taken."""
    begin = next((i for i, line in enumerate(lines) if line.text.startswith("-> #0")), None)
    if begin is None:
        return []
    frames = []
    for line in lines[begin + 1:]:
        if not line.frame:
            break
        frames.append(line.frame)
    return frames


def _guilty_none(crash: KernelCrash, lines: list[Line], skip: re.Pattern[str]) -> Pick:
    return Pick()


GUILTY_STRATEGIES = {
    "rip": _guilty_rip,
    "stack": _guilty_stack,
    "frames": _guilty_frames,
    "header": _guilty_header,
    "stall": _guilty_stall,
    "overflow": _guilty_overflow,
    "hung": _guilty_hung,
    "lockdep": _guilty_lockdep,
    "none": _guilty_none,
}


def explain_frames(crash: KernelCrash) -> tuple[list[dict], int | None]:
    """The frames the strategy read, each with its decision and the skip class behind it."""
    pick = crash.pick
    rules = (*_EXPLAIN_RULES.get(crash.oops.name, _SKIP_CLASS_RULES), *pick.extra)
    return frame_decisions(pick.frames, pick.index, rules, pick.passed)


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


def parse_console_log(log: str) -> KernelCrash | None:
    """The first crash in a console log, or None when the log holds no crash."""
    log = _cut_long_lines(log[:MAX_TEXT])
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
    if oops.begin:
        begin = next((i for i, line in enumerate(lines) if oops.begin in line.text), 0)
        lines = lines[begin:]
    skip = _KIND_SKIP.get(oops.skip, _GENERIC_SKIP)
    crash.pick = GUILTY_STRATEGIES[oops.guilty](crash, lines, skip)
    if crash.pick.guilty is not None:
        crash.function, crash.module = crash.pick.guilty
        crash.frames = [frame_label(name, module) for name, module in crash.pick.key]
    if oops.kind == "corrupted":
        crash.flags.append("corrupted")
    if oops.classify:
        CLASSIFIERS[oops.classify](crash, lines)
    if oops.kind in HARDWARE_KINDS:
        crash.labels.append(HARDWARE_LABEL)
    return crash
