"""The reporters' one log line format: stderr, where kdump, systemd and a core handler's
kmsg redirect (coredump/pipe.py) put it."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(f"crashreg-report: {message}", file=sys.stderr)


def printable(text: str) -> str:
    """`text` with its control characters (a newline, an escape, U+2028...) and backslashes
    escaped: a crashed process's own strings (its name, its files' paths) in a log line cannot
    split the line or forge another."""
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char.isprintable():
        return char
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
