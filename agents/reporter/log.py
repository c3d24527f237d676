"""The reporters' one log line format: stderr, where kdump, systemd and a core handler's
kmsg redirect (coredump/pipe.py) put it."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(f"crashreg-report: {message}", file=sys.stderr)
