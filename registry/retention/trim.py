"""What a console log keeps when retention trims it: the crash report the signature engine
reads, so the event page still shows the oops and a rebuild fingerprints it the same.

Kept: LINES_BEFORE lines before the crash header (what the event page shows above it), the
header, and after it as much as the engine ever reads of one report (MAX_REPORT_LINES lines,
MAX_REPORT_BYTES characters). A log with no crash in it keeps its last TAIL_LINES lines. A
trim is only made when the engine fingerprints the trimmed text exactly as the whole log;
otherwise the whole log stays. Pure: the engine and the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.fingerprint import analyse_report
from registry.fingerprint.console import MAX_REPORT_BYTES, MAX_REPORT_LINES, parse_console_log

LINES_BEFORE = 8  # as many as the event page's excerpt shows above the crash header
TAIL_LINES = 64  # a log without a crash: its last lines, where the crash kernel took over


@dataclass(frozen=True)
class TrimmedLog:
    text: str
    first_line: int  # the first kept line's number (1-based) in the whole log
    total_lines: int  # lines in the whole log
    whole_chars: int  # characters in the whole log


def report_span(lines: list[str], header: str | None) -> tuple[int, int]:
    """The [first, end) line indexes kept: around the crash header, or the tail without one."""
    at = next((i for i, line in enumerate(lines) if header in line), None) if header else None
    if at is None:
        return max(0, len(lines) - TAIL_LINES), len(lines)
    end, chars = at, 0
    while end < len(lines) and end - at < MAX_REPORT_LINES and chars < MAX_REPORT_BYTES:
        chars += len(lines[end])
        end += 1
    return max(0, at - LINES_BEFORE), end


def trim_log(log: str, stack: dict[str, Any] | None = None) -> TrimmedLog | None:
    """The log's crash report, or None when trimming saves nothing or would change what the
    engine makes of the report (its `stack` too: a report may be fingerprinted from it)."""
    lines = log.splitlines(keepends=True)
    crash = parse_console_log(log)
    first, end = report_span(lines, crash.header if crash else None)
    text = "".join(lines[first:end])
    if len(text) >= len(log):
        return None
    whole, trimmed = analyse_report(log, stack), analyse_report(text, stack)
    if (whole and whole.fingerprint) != (trimmed and trimmed.fingerprint):
        return None
    return TrimmedLog(text, first + 1, len(lines), len(log))
