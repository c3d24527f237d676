"""The part of a console log an engineer reads first: the lines around the oops, with the
stack frames picked out and the guilty one marked. Pure functions over the stored text.

Which line is the oops, how a line's frames read and which frame is guilty are the signature
engine's decisions (`registry.fingerprint`): the header is found by the engine, each line's
frames are read by it (one reading of a frame name), and the guilty frame is the one the
event's stored explanation says it read, found again by walking the frames it read in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from registry.fingerprint.console import MAX_REPORT_LINES, line_frames, parse_console_log

LINES_BEFORE, LINES_AFTER = 8, 48


@dataclass(frozen=True)
class LogLine:
    number: int  # 1-based, in the whole log
    text: str
    role: str  # "header" | "guilty" | "frame" | "unreliable" | ""
    guilty: bool = False  # the guilty frame is on this line (the header, when it names it)


@dataclass(frozen=True)
class Frame:
    function: str
    module: str | None
    unreliable: bool
    guilty: bool
    line: int


@dataclass(frozen=True)
class ConsoleExcerpt:
    lines: list[LogLine]
    total_lines: int
    header_line: int | None  # None: the engine found no crash in this log
    frames: list[Frame] = field(default_factory=list)
    guilty_line: int | None = None  # the line holding the guilty frame, when it is shown

    @property
    def omitted_before(self) -> int:
        return self.lines[0].number - 1 if self.lines else 0

    @property
    def omitted_after(self) -> int:
        return self.total_lines - self.lines[-1].number if self.lines else 0


Read = tuple[int, str, str | None]  # (line index, function, module) of a reliable frame


def guilty_index(read: list[Read], explanation: Mapping[str, Any] | None) -> int | None:
    """The line index of the frame the explanation calls guilty: its frames are matched, in
    order, against the frames read from the lines after the header (a frame the log no longer
    shows, such as one the header named, is passed over). None when the explanation names no
    guilty frame or the log does not show it."""
    frames = (explanation or {}).get("frames") or []
    guilty = (explanation or {}).get("guilty")
    if guilty is None or not 0 <= guilty < len(frames):
        return None
    cursor = 0
    for position, wanted in enumerate(frames[:guilty + 1]):
        function, module = wanted.get("function"), wanted.get("module")
        found = next((k for k in range(cursor, len(read)) if read[k][1] == function
                      and (module is None or read[k][2] == module)), None)
        if found is not None and position == guilty:
            return read[found][0]
        if found is not None:
            cursor = found + 1
    return None


def excerpt(
    log: str, explanation: Mapping[str, Any] | None, before: int = LINES_BEFORE,
    after: int = LINES_AFTER,
) -> ConsoleExcerpt:
    """The lines around the crash header the engine found (the log's tail when it found none),
    each frame line tagged, the line of the explanation's guilty frame marked."""
    lines = log.splitlines()
    crash = parse_console_log(log)
    header = next((i for i, line in enumerate(lines) if crash and crash.header in line), None)
    first = max(0, header - before) if header is not None else max(0, len(lines) - before - after)
    last = (header + after) if header is not None else len(lines)
    shown_frames = {index: line_frames(lines[index]) for index in range(first, last)
                    if index < len(lines) and index != header}
    guilty = None
    if header is not None:
        section = (explanation or {}).get("section")
        end = min(len(lines), header + 1 + MAX_REPORT_LINES)  # the engine reads no further
        read = [(index, function, module) for index in range(header + 1, end)
                for function, module, unreliable in (
                    shown_frames[index] if index in shown_frames else line_frames(lines[index]))
                if not unreliable]
        guilty = header if section == "header" else guilty_index(read, explanation)
    shown, frames = [], []
    for index in range(first, min(last, len(lines))):
        found = shown_frames.get(index, [])
        role = "header" if index == header else ""
        if found and index != header:
            unreliable = all(frame[2] for frame in found)
            role = "guilty" if index == guilty else ("unreliable" if unreliable else "frame")
            if header is None or index > header:
                frames += [Frame(function, module, is_unreliable, index == guilty, index + 1)
                           for function, module, is_unreliable in found[:1]]
        shown.append(LogLine(index + 1, lines[index], role, index == guilty))
    return ConsoleExcerpt(shown, len(lines), header + 1 if header is not None else None, frames,
                          guilty + 1 if guilty is not None else None)
