"""The post-boot agent's pstore step: the previous boot's panic, read back after the reboot.

When kdump fails (the crash kernel runs out of memory, the dump target is unreachable, the host
resets first) the panic's log survives only in pstore: ramoops (reserved RAM that a warm reset
keeps), efi-pstore or ERST. Mounted at /sys/fs/pstore (CRASHREG_PSTORE_DIR), a kmsg dump is
one file per part: `dmesg-ramoops-N`, `dmesg-efi-<id>`, `dmesg-erst-<id>`, with `.enc.z` added
when the kernel could not decompress it (zlib or raw deflate, read here). Each part starts with
the line fs/pstore/platform.c writes, `<Reason>#<count> Part<n>`; Part1 is the newest piece
of the log, so a dump is its parts in descending order. Its lines carry syslog prefixes
(`<4>[   12.3] ...`), stripped here. The record's time (the file's mtime: pstore sets it
from the record) is when the kernel panicked.

The crashed boot's boot_id is not in the record. Every post-boot run appends the current
boot's boot_id and start time to CRASHREG_BOOT_LOG; the crashed boot is the last one that
started before the panic. With that boot_id the report joins the crash kernel's event (same
hostname and boot_id) when kdump got through; without it the registry joins by fingerprint
and time (docs/api.md). When that boot left no dump (no `<boot_id>` directory and no
kdump-tools dump made after the panic in CRASHREG_KDUMP_COREDIR), the capture is recorded as
failed; a capture the crash kernel recorded under the same key wins (first one stored).
The records are removed only after the registry acknowledged the report (CRASHREG_PSTORE_CLEAR=0
keeps them); offline, the report waits in the spool and the records stay for the next run.
"""

from __future__ import annotations

import re
import socket
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import crashreg_report as reporter

RECORD_NAMES = ("dmesg-ramoops-*", "dmesg-efi-*", "dmesg-erst-*")
PART_HEADER = re.compile(r"^(?P<reason>[A-Za-z]+)#(?P<count>\d+) Part(?P<part>\d+)\n")
SYSLOG_PREFIX = re.compile(r"^<\d+>", re.MULTILINE)
REPORTED_REASONS = ("Panic",)  # an oops the host survived is the watcher's (live_kernel)
DUMP_SEARCH_S = 3600  # a kdump-tools dump directory made this long after the panic is its dump


@dataclass(frozen=True)
class Part:
    path: Path
    reason: str
    count: int
    number: int
    text: str
    time: float


@dataclass(frozen=True)
class Dump:
    """One kmsg dump put back together: its parts, its log, when it was written."""

    reason: str
    parts: list[Part]

    @property
    def time(self) -> float:
        return min(part.time for part in self.parts)

    @property
    def console_log(self) -> str:
        ordered = sorted(self.parts, key=lambda part: -part.number)  # Part1 is the newest piece
        return SYSLOG_PREFIX.sub("", "".join(part.text for part in ordered))


def read_part(path: Path) -> Part | None:
    raw = path.read_bytes()
    if path.name.endswith(".enc.z"):
        raw = inflate(raw)
        if raw is None:
            reporter.log(f"{path.name}: compressed with neither zlib nor deflate: left alone")
            return None
    text = raw.decode("utf-8", "replace").replace("\0", "")
    match = PART_HEADER.match(text)
    if match is None:
        reporter.log(f"{path.name}: no '<Reason>#<n> Part<n>' line: not a kmsg dump")
        return None
    return Part(path, match["reason"], int(match["count"]), int(match["part"]), text[match.end():],
                path.stat().st_mtime)


def inflate(raw: bytes) -> bytes | None:
    """pstore compresses with zlib (a header) or raw deflate, by kernel version and backend."""
    for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):
        try:
            return zlib.decompressobj(wbits).decompress(raw)
        except zlib.error:
            continue
    return None


def read_dumps(directory: Path) -> tuple[list[Dump], list[Path]]:
    """The dumps in a pstore directory (oldest first) and every dmesg record file read."""
    paths = sorted({path for pattern in RECORD_NAMES for path in directory.glob(pattern)})
    groups: dict[tuple[str, str, int, int], list[Part]] = {}
    for path in paths:
        part = read_part(path)
        if part is not None:
            backend = path.name.split("-")[1]
            # parts of one dump share backend, reason, count and (to the second) time
            groups.setdefault((backend, part.reason, part.count, int(part.time)), []).append(part)
    dumps = sorted((Dump(key[1], parts) for key, parts in groups.items()), key=lambda dump: dump.time)
    return dumps, paths


# --- which boot crashed ---------------------------------------------------------------


def record_boot(config: reporter.Config) -> str | None:
    """Append this boot to the boot log (once); its boot_id."""
    try:
        boot_id = Path(config.boot_id_file).read_text().strip()
    except OSError:
        return None
    log = Path(config.boot_log)
    known = boots(log)
    if not known or known[-1][0] != boot_id:
        started = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(f"{boot_id} {started:.0f}\n")
    return boot_id


def boots(log: Path) -> list[tuple[str, float]]:
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        words = line.split()
        if len(words) == 2:
            try:
                found.append((words[0], float(words[1])))
            except ValueError:
                continue
    return found


def crashed_boot(log: Path, panic_time: float, current: str | None) -> str | None:
    """The boot that panicked: the last one before this one that started before the panic."""
    earlier = [boot_id for boot_id, started in boots(log) if started <= panic_time and boot_id != current]
    return earlier[-1] if earlier else None


# --- the report -----------------------------------------------------------------------


def pstore_report(config: reporter.Config, dump: Dump, boot_id: str | None) -> dict[str, Any]:
    hostname = config.hostname or socket.gethostname() or "unknown"
    console_log = reporter.tail_text(dump.console_log.encode(), config.max_log_bytes)
    suffix = boot_id or f"{hostname}-{int(dump.time)}"
    return {
        "report_id": reporter.safe_report_id(f"{reporter.PSTORE_REPORT_PREFIX}{suffix}"),
        "source": "pstore",
        "crashed_at": datetime.fromtimestamp(dump.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"hostname": hostname,
                 "kernel_version": reporter.log_kernel_version(console_log) or None},
        "boot_id": boot_id,
        "uptime_s": reporter.log_uptime(console_log),
        "fingerprint": reporter.local_fingerprint(console_log),
        "console_log": console_log,
    }


def dump_exists(config: reporter.Config, boot_id: str | None, panic_time: float) -> bool:
    """A dump of the crashed boot on this host's disk: `<coredir>/<boot_id>/` (the core
    collector's target), or a kdump-tools `<YYYYmmddHHMM>/dump.*` made after the panic."""
    if not config.kdump_coredir:
        return False
    coredir = Path(config.kdump_coredir)
    if boot_id and any((coredir / boot_id).glob("*")):
        return True
    return any(
        panic_time - 60 <= path.stat().st_mtime <= panic_time + DUMP_SEARCH_S
        for path in coredir.glob("*/dump.*")
    )


def failed_capture(report: dict[str, Any]) -> dict[str, Any]:
    """The capture kdump did not make. Keyed as the crash kernel's own capture record, so
    a record of a dump that did happen (sent earlier) is the one that stays."""
    key = f"kdump-{report['boot_id']}" if report["boot_id"] else report["report_id"]
    return {"method": "makedumpfile", "status": "failed", "bytes": None, "target": None,
            "capture_key": reporter.safe_report_id(f"{key}-makedumpfile")}


def report_previous_panic(config: reporter.Config, hold: bool = False) -> bool:
    """Report every panic dump in pstore; True when one could not be delivered (exit 3).
    `hold`: record this boot, but leave the dumps in pstore for the next run (a crash report
    they may belong to is still spooled)."""
    current = record_boot(config)
    directory = Path(config.pstore_dir)
    if not directory.is_dir():
        return False
    dumps, paths = read_dumps(directory)
    if hold:
        held = any(dump.reason in REPORTED_REASONS for dump in dumps)
        if held:
            reporter.log("pstore: left for the next run, after the spooled crash reports")
        return held
    unsent = False
    for dump in dumps:
        if dump.reason not in REPORTED_REASONS:
            continue
        boot_id = crashed_boot(Path(config.boot_log), dump.time, current)
        report = pstore_report(config, dump, boot_id)
        answer = reporter.deliver(config, report)
        if answer is None:
            unsent = True
            continue
        event_id = answer["event_id"]
        reporter.log(f"pstore: {dump.reason} of boot {boot_id or 'unknown'} reported: event {event_id}")
        if not dump_exists(config, boot_id, dump.time):
            reporter.log("pstore: no dump of that boot: its capture is recorded as failed")
            reporter.record_capture(config, report["report_id"], answer["event_id"], failed_capture(report))
    if config.pstore_clear and not unsent:
        for path in paths:
            path.unlink(missing_ok=True)  # pstore frees the backend's record on unlink
    return unsent
