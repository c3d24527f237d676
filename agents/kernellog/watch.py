"""`crashreg-report.pyz watch`: report the oopses and warnings of a running kernel as they are printed.

Follows /dev/kmsg (CRASHREG_KMSG; a file of kmsg records works the same, followed like
`tail -f`), cuts each crash report out of it (registry-side engine headers, kernellog.kmsg)
and reports it under `source: live_kernel` with the host's identity, boot_id and uptime.

Repeats: the first report of a fingerprint in a boot is sent at once; later ones are counted,
and their count is sent as a report with `repeat_of` and `repeat_count` when the log reaches
CRASHREG_WATCH_REPEAT_INTERVAL seconds (log time) past the previous report of it. Decisions
on log time make a report's id and body a function of the log alone.

Nothing twice, nothing skipped: the state file (CRASHREG_WATCH_STATE: boot_id, the last kmsg
sequence number handled, the repeat counters) is replaced atomically after each report is
written to the spool and before it is sent. A report being cut holds the cursor before its
header, so a restart cuts it again from the start; a report rebuilt after a crash of the
watcher has the same report_id and, read back from the spool or its sent/ copy, the same
bytes, so the registry replays it. Unsent reports wait in the spool (CRASHREG_SPOOL_DIR, like
every reporter's) and are retried with backoff, by this process or by `post-boot`.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import stat
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import crashreg_report as reporter

from kernellog.kmsg import Cut, Cutter, Record, records

READ_SIZE = 16384  # a kmsg record is at most 8 KiB (CONSOLE_EXT_LOG_MAX)
FILE_POLL_S = 0.2  # how often a followed regular file is checked for growth
MAX_TRACKED = 4096  # fingerprints whose repeats are counted per boot
MAX_RETRY_DELAY_S = 300.0
SAVE_EVERY_S = 5.0  # the cursor is saved this often while nothing is reported (and on exit)


@dataclass
class Repeats:
    """How often a fingerprint came back since its last report."""

    first: str  # report_id of its first report this boot
    last_usec: int  # log time of its last report
    header: str = ""  # its first header line as dmesg prints it: the repeats' console_log
    last_seq: int = 0  # the last occurrence counted
    pending: int = 0  # occurrences not reported yet


@dataclass
class State:
    boot_id: str
    boot_time: float  # wall-clock time of the boot, fixed once per boot (btime drifts)
    seq: int = -1  # every record up to this one is handled
    repeats: dict[str, Repeats] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, boot_id: str) -> State:
        """The saved state of this boot, else a fresh one (a new boot starts at its first record)."""
        try:
            saved = json.loads(path.read_text())
            if saved["boot_id"] == boot_id:
                repeats = {key: Repeats(**value) for key, value in saved["repeats"].items()}
                return cls(boot_id, saved["boot_time"], saved["seq"], repeats)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return cls(boot_id, boot_time())

    def save(self, path: Path) -> None:
        """Atomically: a crash leaves the old state or the new one, never half of either."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        with open(temporary, "w") as out:
            json.dump(asdict(self), out)
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(path)


def boot_time() -> float:
    """The boot's wall-clock time: now minus CLOCK_BOOTTIME (printk's clock is monotonic;
    the difference is suspend time, which a fleet's servers do not do)."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


class Source:
    """kmsg records from /dev/kmsg (one record per read, poll for more) or from a regular
    file of them (read lines, poll for growth)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.device = stat.S_ISCHR(os.fstat(self.fd).st_mode)
        self.partial = b""
        self.at_end = False

    def read(self, timeout: float) -> list[Record]:
        """What arrived within `timeout` seconds (may be nothing)."""
        if self.device and not select.select([self.fd], [], [], timeout)[0]:
            return []
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return []
        except OSError as error:
            if error.errno != errno.EPIPE:
                raise
            reporter.log("kmsg records were overwritten before they were read (EPIPE)")
            return []
        if self.device:
            return list(records([data]))
        if not data:
            self.at_end = True
            time.sleep(min(timeout, FILE_POLL_S))
            return []
        self.at_end = False
        whole, newline, self.partial = (self.partial + data).rpartition(b"\n")
        if not newline:  # no line finished yet: it all waits
            self.partial = whole + self.partial
        return list(records([whole]))


class Watcher:
    def __init__(self, config: reporter.Config, state_path: Path, interval_s: float) -> None:
        self.config = config
        self.state_path = state_path
        self.interval_usec = int(interval_s * 1_000_000)
        self.state = State.load(state_path, read_boot_id(config))
        self.hostname = config.hostname or socket.gethostname() or "unknown"
        self.cutter = Cutter()
        self.unsaved = False
        self.last_seen = self.state.seq
        self.retry_at = 0.0
        self.retry_delay = max(config.retry_delay, 1.0)

    # --- the log -----------------------------------------------------------------------

    def take(self, record: Record) -> None:
        """One record: skipped if handled before a restart, else cut, counted, reported."""
        if record.seq <= self.state.seq:
            return
        self.last_seen = record.seq
        if self.state.seq >= 0 and record.seq > self.state.seq + 1 and self.cutter.open is None:
            reporter.log(f"kmsg records {self.state.seq + 1}..{record.seq - 1} were lost unread")
        for cut in self.cutter.feed(record):
            self.finish(cut)
        self.report_due_repeats(record.usec)
        opened = self.cutter.open
        self.state.seq = record.seq if opened is None else max(self.state.seq, opened.header.seq - 1)

    def quiet(self) -> None:
        """The log went quiet: the report being cut is complete."""
        if self.cutter.open is not None:
            self.finish(self.cutter.close())
            self.state.seq = max(self.state.seq, self.last_seen)

    def finish(self, cut: Cut) -> None:
        console_log = cut.console_log()
        key = reporter.local_fingerprint(console_log) or cut.header.message
        seen = self.state.repeats.get(key)
        if seen is not None:
            seen.pending += 1
            seen.last_seq = cut.header.seq
            return
        report_id = reporter.safe_report_id(f"live-{self.state.boot_id}-{cut.header.seq:010d}")
        if len(self.state.repeats) < MAX_TRACKED:
            header = cut.header.console_lines()[0] + "\n"
            self.state.repeats[key] = Repeats(report_id, cut.header.usec, header, cut.header.seq)
        self.spool(self.report(report_id, cut.header, console_log=console_log, fingerprint=key))

    def report_due_repeats(self, now_usec: int) -> None:
        """Counted repeats whose last report is an interval old (log time): one report each."""
        for key, seen in self.state.repeats.items():
            if seen.pending and now_usec >= seen.last_usec + self.interval_usec:
                # `.r`: sorts after the first report's spool file (`.json`), so it is sent after it
                report_id = reporter.safe_report_id(f"{seen.first}.r{seen.last_seq:010d}")
                repeat = Record(0, seen.last_seq, now_usec, "")
                # The header alone: the event exists (repeat_of), only the count is news.
                self.spool(self.report(report_id, repeat, console_log=seen.header, fingerprint=key,
                                       repeat_of=seen.first, repeat_count=seen.pending))
                seen.pending, seen.last_usec = 0, now_usec

    def report(self, report_id: str, record: Record, **fields: Any) -> dict[str, Any]:
        crashed_at = datetime.fromtimestamp(self.state.boot_time + record.usec / 1e6, UTC)
        return {
            "report_id": report_id,
            "source": "live_kernel",
            "crashed_at": crashed_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": {"hostname": self.hostname, "kernel_version": os.uname().release},
            "boot_id": self.state.boot_id,
            "uptime_s": record.usec // 1_000_000,
        } | fields

    # --- spool and delivery ------------------------------------------------------------

    def spool(self, report: dict[str, Any]) -> None:
        """Into the spool before the state moves past it; a body kept from before a restart
        is kept as it is (the registry replays it)."""
        report_id = report["report_id"]
        if not any(reporter.kept_path(self.config, report_id, f).exists() for f in (".", "sent")):
            reporter.keep(self.config, report_id, reporter.report_body(report))
        self.unsaved = True

    def save(self) -> None:
        self.state.save(self.state_path)
        self.unsaved = False

    def deliver(self) -> None:
        """Send what waits in the spool, oldest first; on failure wait (doubling) and retry."""
        if time.monotonic() < self.retry_at:
            return
        for path in sorted(Path(self.config.spool_dir).glob("live-*.json")):
            try:
                answer = reporter.send_report_body(self.config, path.read_bytes())
            except reporter.Unsent as error:
                if reporter.set_aside(path, error) == "kept":
                    self.retry_at = time.monotonic() + self.retry_delay
                    self.retry_delay = min(self.retry_delay * 2, MAX_RETRY_DELAY_S)
                    return
                continue
            (path.parent / "sent").mkdir(exist_ok=True)
            path.replace(path.parent / "sent" / path.name)
            reporter.log(f"sent {path.stem}: event {answer.get('event_id')}"
                         f"{' (already registered)' if answer.get('duplicate') else ''}")
        self.retry_delay = max(self.config.retry_delay, 1.0)

    def pending(self) -> bool:
        return any(Path(self.config.spool_dir).glob("live-*.json"))


def read_boot_id(config: reporter.Config) -> str:
    return Path(config.boot_id_file).read_text().strip()


def run(config: reporter.Config, once: bool) -> int:
    """Follow the log until SIGTERM (or, with `once`, to the end of a file)."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _: stopping.append(number))
    signal.signal(signal.SIGINT, lambda number, _: stopping.append(number))
    watcher = Watcher(config, Path(config.watch_state), config.watch_repeat_interval)
    source = Source(config.kmsg)
    state = watcher.state
    reporter.log(f"watching {config.kmsg} from kmsg record {state.seq + 1} of boot {state.boot_id}")
    quiet_since = saved_at = time.monotonic()
    while not stopping:
        arrived = source.read(timeout=1.0)
        for record in arrived:
            watcher.take(record)
        if arrived:
            quiet_since = time.monotonic()
        elif (once and source.at_end) or time.monotonic() - quiet_since >= config.watch_quiet:
            watcher.quiet()
        if watcher.unsaved or time.monotonic() - saved_at >= SAVE_EVERY_S:
            watcher.save()
            saved_at = time.monotonic()
        watcher.deliver()
        if once and source.at_end and not arrived:
            break
    watcher.save()
    watcher.deliver()
    return reporter.EXIT_UNSENT if watcher.pending() else 0
