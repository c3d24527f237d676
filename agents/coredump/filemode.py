"""File mode: a core already on disk (systemd-coredump's store, an upload, a backfill) read
into the same report pipe mode sends.

A compressed core (systemd-coredump compresses its store's cores with zstd, xz or lz4 as it was
built; pipe mode's own may be gzip or xz) is decompressed into a temporary file first
(agents/reporter/compression.py: xz, gzip and bzip2 by the standard library, zstd and lz4 by
their programs).

When the crash happened and when the process started are not in a core (its notes hold the
registers, pids, signal and CPU times, no clock). Each comes from the first source that has it:

- crash time: `--crashed-at`; else systemd-coredump's `user.coredump.timestamp` extended
  attribute on a core in its store (microseconds since the epoch: %t, as the journal's
  COREDUMP_TIMESTAMP); else the core file's mtime (the kernel writes the core as the process
  dies; a copy made later, e.g. by `coredumpctl dump`, has the copy's time: pass --crashed-at);
- process start time: `--started-at` only (the service manager knows it, e.g. `systemctl show
  -p ExecMainStartTimestamp`; systemd-coredump does not keep it); the uptime at the crash is
  the difference, as pipe mode's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from agents.reporter.compression import compression_at, decompress, file_head
from agents.reporter.log import printable
from agents.reporter.report import iso_time

from .core import CoreHead, CoreMemory, read_core_file
from .modules import VDSO_PATH, file_opener
from .report import AT_ENTRY, Analysis, CrashFacts, analyse, close, userspace_report


def program_path(head: CoreHead) -> str | None:
    """The path the program ran from: the NT_FILE mapping holding its entry point."""
    entry = head.auxv.get(AT_ENTRY)
    return next((f.path for f in head.files if entry is not None and f.start <= entry < f.end), None)


@contextmanager
def uncompressed(path: str) -> Iterator[str]:
    """The core at `path` as a file read at random offsets: itself, or if compressed (by its
    first bytes) a temporary copy decompressed into $TMPDIR, removed afterwards
    (DecompressorMissing: its program is not on this host)."""
    compression = compression_at(file_head(path))
    if compression is None:
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="crashreg-core-") as plain:
        decompress(path, compression, plain)
        plain.flush()
        yield plain.name


def core_file_analysis(path: str, executable: str | None = None) -> Analysis:
    """The analysis of the core at `path` (compressed or not); `executable` is the program's
    file when the path the core names is not where it is now. The files it read are closed:
    what it holds is plain data, ready for a report per set of facts. A core cut short within
    its head is NotElf; one cut in its memory is read from what is there (`missing_bytes`)."""
    with uncompressed(path) as plain:
        head = read_core_file(plain)
        memory = CoreMemory(plain, head.segments)
        try:
            analysis = analyse(head, memory, file_opener(executable, program_path(head)))
            close(analysis)
            analysis.missing_bytes, analysis.memory_bytes = head.memory_missing(os.path.getsize(plain))
            return analysis
        finally:
            memory.close()


SYSTEMD_TIMESTAMP = "user.coredump.timestamp"  # systemd-coredump's xattr: %t in microseconds
LATEST_CLOCK_SKEW = timedelta(days=1)  # a crash this far after now is a wrong clock or option


class BadTime(ValueError):
    """A crash or start time that cannot be: the caller's mistake, not the core's."""


def parse_time(text: str) -> datetime:
    """ISO 8601 (UTC when no offset is given) or `@` and seconds since the epoch."""
    try:
        moment = (datetime.fromtimestamp(float(text[1:]), UTC) if text.startswith("@")
                  else datetime.fromisoformat(text))
    except (ValueError, OverflowError, OSError) as error:
        raise BadTime(f"{text!r} is not a time (ISO 8601, or @ and epoch seconds)") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def systemd_crash_time(path: str) -> datetime | None:
    """The crash time systemd-coredump stored with the core, if it did."""
    try:
        return datetime.fromtimestamp(int(os.getxattr(path, SYSTEMD_TIMESTAMP)) / 1e6, UTC)
    except (OSError, ValueError, OverflowError):
        return None


def crash_times(path: str, crashed_at: str | None = None,
                started_at: str | None = None) -> tuple[datetime, datetime | None]:
    """(crash time, process start time) of the core at `path`, from the module's sources."""
    crashed = (parse_time(crashed_at) if crashed_at else systemd_crash_time(path)
               or datetime.fromtimestamp(os.stat(path).st_mtime, UTC))
    started = parse_time(started_at) if started_at else None
    if started is not None and started > crashed:
        raise BadTime(f"the process started ({started:%Y-%m-%dT%H:%M:%SZ}) after it crashed "
                         f"({crashed:%Y-%m-%dT%H:%M:%SZ})")
    if crashed > datetime.now(UTC) + LATEST_CLOCK_SKEW:
        raise BadTime(f"the crash time {crashed:%Y-%m-%dT%H:%M:%SZ} is in the future")
    return crashed, started


def core_file_report(path: str, hostname: str, executable: str | None = None, crashed_at: str | None = None,
                     started_at: str | None = None) -> dict[str, Any]:
    """The report of the core at `path`, with the crash and process start times its sources
    give (the module's docstring); what none gives is left out."""
    return core_file_reading(path, hostname, executable, crashed_at, started_at)[0]


def core_file_reading(path: str, hostname: str, executable: str | None = None, crashed_at: str | None = None,
                      started_at: str | None = None) -> tuple[dict[str, Any], Analysis]:
    """core_file_report's report, and the analysis it was made of."""
    crashed, started = crash_times(path, crashed_at, started_at)
    analysis = core_file_analysis(path, executable)
    facts = CrashFacts(hostname=hostname, crashed_at=iso_time(crashed.timestamp()),
                       process_started_at=iso_time(started.timestamp()) if started else None,
                       process_uptime_s=(crashed - started).total_seconds() if started else None)
    return userspace_report(analysis, facts), analysis


def files_not_here(analysis: Analysis, executable: str | None) -> list[str]:
    """File mode: what of the crashed process's files this machine lacks as it had them
    (missing, or another build): frames through them are read from the core alone, and a
    stack can come out shorter (the program's callers lost)."""
    problems = []
    program = analysis.program
    if program is not None and program.source != "file":
        name = printable(executable or program.path)
        problems.append(f"the program's file {name} is not here or is another build than the one that "
                        f"crashed (build-id {program.build_id or 'unknown'}): its frames are read from the "
                        "core alone and may be fewer; pass --exe with that build's file")
    libraries = [module for module in analysis.view.modules
                 if module.source != "file" and module is not program and module.path != VDSO_PATH]
    if libraries:
        problems.append(f"{len(libraries)} of the process's shared objects are not here as it had them "
                        f"({', '.join(printable(path) for path in sorted(m.path for m in libraries)[:3])}"
                        f"{', ...' if len(libraries) > 3 else ''}): frames through them may be lost; "
                        "read the core on the host that crashed")
    return problems
