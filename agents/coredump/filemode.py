"""File mode: a core already on disk (systemd-coredump's store, an upload, a backfill) read
into the same report pipe mode sends."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from .core import CoreHead, CoreMemory, read_core_file
from .modules import file_opener
from .report import AT_ENTRY, Analysis, CrashFacts, analyse, close, userspace_report


def program_path(head: CoreHead) -> str | None:
    """The path the program ran from: the NT_FILE mapping holding its entry point."""
    entry = head.auxv.get(AT_ENTRY)
    return next((f.path for f in head.files if entry is not None and f.start <= entry < f.end), None)


def core_file_analysis(path: str, executable: str | None = None) -> Analysis:
    """The analysis of the core at `path`; `executable` is the program's file when the path
    the core names is not where it is now. The files it read are closed: what it holds is
    plain data, ready for a report per set of facts."""
    head = read_core_file(path)
    memory = CoreMemory(path, head.segments)
    try:
        analysis = analyse(head, memory, file_opener(executable, program_path(head)))
        close(analysis)
        return analysis
    finally:
        memory.close()


def core_file_report(path: str, hostname: str, executable: str | None = None) -> dict[str, Any]:
    """The report of the core at `path`. The core's mtime is the crash time (the kernel writes
    the core as the process dies); the process start time is not in a core, so it is left out."""
    analysis = core_file_analysis(path, executable)
    crashed_at = datetime.fromtimestamp(os.stat(path).st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return userspace_report(analysis, CrashFacts(hostname=hostname, crashed_at=crashed_at))
