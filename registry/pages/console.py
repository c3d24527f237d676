"""The part of a console log an engineer reads first: the lines around the oops, with the
stack frames picked out and the guilty one marked. Pure functions over the stored text.

Which line is the oops and which frame is guilty are the signature engine's decisions
(`registry.fingerprint`); this module only finds them again in the raw text to show them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from registry.fingerprint.console import parse_console_log

LINES_BEFORE, LINES_AFTER = 8, 48
# "func+0x1a/0x30 [mod]" as printed in call traces and RIP/PC lines; "? func" is unreliable.
FRAME = re.compile(
    r"(?:^|[\s:])(?P<unreliable>\? )?(?P<function>[A-Za-z_.$][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+"
    r"(?: \[(?P<module>[\w-]+)\])?"
)
# Compiler suffixes the engine strips before it names a guilty function.
COMPILER_SUFFIX = re.compile(r"\.(?:isra|constprop|cold|part|llvm)(?:\.\d+)*")


@dataclass(frozen=True)
class LogLine:
    number: int  # 1-based, in the whole log
    text: str
    role: str  # "header" | "guilty" | "frame" | "unreliable" | ""


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

    @property
    def omitted_before(self) -> int:
        return self.lines[0].number - 1 if self.lines else 0

    @property
    def omitted_after(self) -> int:
        return self.total_lines - self.lines[-1].number if self.lines else 0


def plain_function(name: str) -> str:
    return COMPILER_SUFFIX.sub("", name)


def excerpt(
    log: str, guilty: str | None, before: int = LINES_BEFORE, after: int = LINES_AFTER
) -> ConsoleExcerpt:
    """The lines around the crash header the engine found (the log's tail when it found none),
    each frame line tagged, the first frame of the guilty function after the header marked."""
    lines = log.splitlines()
    crash = parse_console_log(log)
    header = next((i for i, line in enumerate(lines) if crash and crash.header in line), None)
    first = max(0, header - before) if header is not None else max(0, len(lines) - before - after)
    window = lines[first : (header + after) if header is not None else len(lines)]
    shown, frames, guilty_found = [], [], False
    for offset, text in enumerate(window):
        index = first + offset
        match = FRAME.search(text)
        role = "header" if index == header else ""
        if match and index != header:
            function = plain_function(match.group("function"))
            unreliable = bool(match.group("unreliable"))
            is_guilty = (
                not guilty_found
                and not unreliable
                and guilty is not None
                and function == guilty
                and (header is None or index > header)
            )
            guilty_found = guilty_found or is_guilty
            role = "guilty" if is_guilty else ("unreliable" if unreliable else "frame")
            if header is None or index > header:
                frames.append(Frame(function, match.group("module"), unreliable, is_guilty, index + 1))
        shown.append(LogLine(index + 1, text, role))
    return ConsoleExcerpt(shown, len(lines), header + 1 if header is not None else None, frames)
