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
Every dump is reported, whatever its reason (RECORD_KINDS): a panic or an emergency restart
ended the boot (`source: pstore`, joined to the boot's event); an oops, or a shutdown's log,
is a crash the host lived through (`source: live_kernel`, an event of its own, unless the
watcher already reported it). A dump's files are removed only after the registry acknowledged
(2xx) the report made from it (CRASHREG_PSTORE_CLEAR=0 keeps them); offline, refused or
unauthorised, the report waits in the spool and the files stay for the next run. Files that
are not a readable kmsg dump are never removed.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.reporter.captures import record_capture
from agents.reporter.config import Config
from agents.reporter.log import log
from agents.reporter.postboot import PSTORE_REPORT_PREFIX
from agents.reporter.report import (
    boot_id_of,
    console_report,
    hostname_of,
    iso_time,
    safe_report_id,
    tail_text,
)
from agents.reporter.spool import deliver

RECORD_NAMES = ("dmesg-ramoops-*", "dmesg-efi-*", "dmesg-erst-*")
PART_HEADER = re.compile(r"^(?P<reason>[A-Za-z]+)#(?P<count>\d+) Part(?P<part>\d+)\n")
SYSLOG_PREFIX = re.compile(r"^<\d+>", re.MULTILINE)


@dataclass(frozen=True)
class RecordKind:
    """How a dump of one reason is reported."""

    source: str  # pstore: the boot ended here (joins the boot's event); live_kernel: it ran on
    panic: bool = False  # the boot's panic: pstore-<boot> (docs), and its kdump capture is checked


# fs/pstore's kmsg_dump_reason_str(): the reasons a kernel writes, old names and new.
ENDED_BOOT = RecordKind("pstore")
LIVED_THROUGH = RecordKind("live_kernel")
SHUT_DOWN = LIVED_THROUGH  # a clean shutdown's log (printk.always_kmsg_dump): what it holds ran on
RECORD_KINDS = {
    "Panic": RecordKind("pstore", panic=True),
    "Emergency": ENDED_BOOT,  # emergency_restart(): sysrq-b, a watchdog, a panic's reboot
    "Oops": LIVED_THROUGH,  # an oops with panic_on_oops=0: a live oops, not a panic
    "Restart": SHUT_DOWN, "Halt": SHUT_DOWN, "Poweroff": SHUT_DOWN, "Shutdown": SHUT_DOWN,
}
UNKNOWN_KIND = LIVED_THROUGH  # a reason this reader does not know: no claim that the boot ended
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

    backend: str
    reason: str
    parts: list[Part]

    @property
    def time(self) -> float:
        return min(part.time for part in self.parts)

    @property
    def kind(self) -> RecordKind:
        return RECORD_KINDS.get(self.reason, UNKNOWN_KIND)

    @property
    def count(self) -> int:
        return self.parts[0].count

    @property
    def paths(self) -> list[Path]:
        return [part.path for part in self.parts]

    @property
    def console_log(self) -> str:
        ordered = sorted(self.parts, key=lambda part: -part.number)  # Part1 is the newest piece
        return SYSLOG_PREFIX.sub("", "".join(part.text for part in ordered))


def read_part(path: Path) -> Part | None:
    raw = path.read_bytes()
    if path.name.endswith(".enc.z"):
        raw = inflate(raw)
        if raw is None:
            log(f"{path.name}: compressed with neither zlib nor deflate: left alone")
            return None
    text = raw.decode("utf-8", "replace").replace("\0", "")
    match = PART_HEADER.match(text)
    if match is None:
        log(f"{path.name}: no '<Reason>#<n> Part<n>' line: not a kmsg dump")
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
    dumps = sorted((Dump(key[0], key[1], parts) for key, parts in groups.items()), key=lambda dump: dump.time)
    return dumps, paths


# --- which boot crashed ---------------------------------------------------------------


def record_boot(config: Config) -> str | None:
    """Append this boot to the boot log (once); its boot_id."""
    boot_id = boot_id_of(config.boot_id_file)
    if boot_id is None:
        return None
    boot_log = Path(config.boot_log)
    known = boots(boot_log)
    if not known or known[-1][0] != boot_id:
        started = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        boot_log.parent.mkdir(parents=True, exist_ok=True)
        with boot_log.open("a") as out:
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


def pstore_report(config: Config, dump: Dump, boot_id: str | None) -> dict[str, Any]:
    """The report made from one dump; its report_id depends on the dump alone (a rerun sends
    the same id, which the registry replays)."""
    hostname = hostname_of(config.hostname)
    kind = dump.kind
    suffix = boot_id or f"{hostname}-{int(dump.time)}"
    if not kind.panic:  # one id per dump of a boot: its reason and pstore's oops count
        suffix += f"-{dump.reason.lower()}-{dump.count}"
    console_log = tail_text(dump.console_log.encode(), config.max_log_bytes)
    return console_report(f"{PSTORE_REPORT_PREFIX}{suffix}", kind.source, iso_time(dump.time), hostname, None,
                          boot_id, console_log)


def reported_live(config: Config, report: dict[str, Any]) -> Path | None:
    """The watcher's own report of this oops, if it made one: a first report of the same boot
    and fingerprint in the spool or its sent/ folder (then the record adds nothing)."""
    if report["source"] != "live_kernel" or not report["boot_id"] or not report["fingerprint"]:
        return None
    spool = Path(config.spool_dir)
    name = f"live-{safe_report_id(report['boot_id'])}-*.json"
    for path in sorted([*spool.glob(name), *(spool / "sent").glob(name)]):
        if ".r" in path.stem.rsplit("-", 1)[-1]:  # a repeat's count, not a first report
            continue
        try:
            if json.loads(path.read_bytes()).get("fingerprint") == report["fingerprint"]:
                return path
        except (OSError, ValueError, AttributeError):
            continue
    return None


def dump_exists(config: Config, boot_id: str | None, panic_time: float) -> bool:
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
            "capture_key": safe_report_id(f"{key}-makedumpfile")}


def report_records(config: Config, hold: bool = False) -> bool:
    """Report every dump in pstore and remove each one's files once its report is acknowledged;
    True when one is left unreported (exit 3). `hold`: record this boot, but leave the dumps
    for the next run (a crash report they may belong to is still spooled)."""
    current = record_boot(config)
    directory = Path(config.pstore_dir)
    if not directory.is_dir():
        return False
    dumps, paths = read_dumps(directory)
    unread = sorted(set(paths) - {path for dump in dumps for path in dump.paths})
    for path in unread:
        log(f"pstore: {path.name} kept: not a kmsg dump this reader can read")
    if hold:
        if dumps:
            log("pstore: left for the next run, after the spooled crash reports")
        return bool(dumps)
    reports = {id(dump): pstore_report(config, dump, crashed_boot(Path(config.boot_log), dump.time, current))
               for dump in dumps}
    covered = panics_oopses(dumps, reports)
    unsent = False
    for dump in dumps:
        if id(dump) in covered:
            continue
        if not report_dump(config, dump, reports[id(dump)]):
            unsent = True
        elif config.pstore_clear:
            its_oopses = [oops for oops in dumps if covered.get(id(oops)) is dump]
            for gone in (dump, *its_oopses):
                for path in gone.paths:
                    path.unlink(missing_ok=True)  # pstore frees the backend's record on unlink
    return unsent


def panics_oopses(dumps: list[Dump], reports: dict[int, dict[str, Any]]) -> dict[int, Dump]:
    """Oops dumps that are a panic's first half (panic_on_oops: the kernel dumps the oops, then
    the panic it causes): the Panic dump after it, the backend's next dump (pstore_dump counts
    every dump of a boot, whatever its reason: Oops#N, then Panic#N+1), whose log has the
    oops's fingerprint. Such an oops is in the panic's report and goes with it.
    {id(oops): its panic}."""
    covered = {}
    for oops in dumps:
        if oops.reason != "Oops" or not reports[id(oops)]["fingerprint"]:
            continue
        for panic in dumps:
            if (panic.reason == "Panic" and (panic.backend, panic.count) == (oops.backend, oops.count + 1)
                    and panic.time >= oops.time
                    and reports[id(panic)]["fingerprint"] == reports[id(oops)]["fingerprint"]):
                log(f"pstore: Oops #{oops.count} is the one the Panic after it reports")
                covered[id(oops)] = panic
                break
    return covered


def report_dump(config: Config, dump: Dump, report: dict[str, Any]) -> bool:
    """Report one dump; True once the registry acknowledged it (now or, for an oops the
    watcher reported, before)."""
    boot_id = report["boot_id"]
    described = f"pstore: {dump.reason} of boot {boot_id or 'unknown'}"
    live = reported_live(config, report)
    if live is not None:
        acknowledged = live.parent.name == "sent"
        log(f"{described} is the watcher's {live.stem}"
                     f"{'' if acknowledged else ', not delivered yet: kept'}")
        return acknowledged
    answer = deliver(config, report)
    if answer is None:
        log(f"{described} kept: its report {report['report_id']} is not acknowledged")
        return False
    log(f"{described} reported as {report['source']}: event {answer['event_id']}")
    if dump.kind.panic and not dump_exists(config, boot_id, dump.time):
        log("pstore: no dump of that boot: its capture is recorded as failed")
        record_capture(config, report["report_id"], answer["event_id"], failed_capture(report))
    return True
