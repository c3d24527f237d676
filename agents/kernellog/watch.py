"""`crashreg-report.pyz watch`: report the oopses and warnings of a running kernel as they are printed.

Follows /dev/kmsg (CRASHREG_KMSG; a file of kmsg records works the same, followed like
`tail -f`), cuts each crash report out of it (registry-side engine headers, kernellog.kmsg)
and reports it under `source: live_kernel` with the host's identity, boot_id and uptime.

Repeats: the first report of a fingerprint in a boot is sent at once; later ones are counted,
and their count is sent as a report with `repeat_of` and `repeat_count` once the log's clock is
CRASHREG_WATCH_REPEAT_INTERVAL seconds past the previous report of it. The log's clock is the
last record's time, running on while the log is quiet (a poll timeout, not a new record, sends
the count). A count still pending is sent (or spooled) when the watcher stops, and the state
file carries it across a SIGKILL (the next start sends it) and a reboot (the next boot's
watcher sends it under the old boot's id). A repeat report's id and body are a function of
the log alone: its id names the last occurrence counted, its time is that occurrence's.

Nothing twice, nothing skipped: the state file (CRASHREG_WATCH_STATE: boot_id, the last kmsg
sequence number handled, the repeat counters) is replaced atomically after each report is
written to the spool and before it is sent. A report being cut holds the cursor before its
header, so a restart cuts it again from the start; a report rebuilt after a crash of the
watcher has the same report_id and, read back from the spool or its sent/ copy, the same
bytes, so the registry replays it. Unsent reports wait in the spool (CRASHREG_SPOOL_DIR, like
every reporter's) and are retried with backoff, by this process or by `post-boot`. A read of
the source that fails (other than EPIPE, records overwritten) is logged and retried with
doubling delays, reopening the source; the watcher does not die of it.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.kernellog.kmsg import Cut, Cutter, Record, records
from agents.reporter import EXIT_UNSENT
from agents.reporter.client import report_body
from agents.reporter.config import Config
from agents.reporter.files import write_atomically
from agents.reporter.log import log
from agents.reporter.report import (
    boot_id_of,
    hostname_of,
    iso_time,
    local_fingerprint,
    report_skeleton,
    safe_report_id,
)
from agents.reporter.spool import keep, kept_path, replayed, resend

READ_SIZE = 16384  # a kmsg record is at most 8 KiB (CONSOLE_EXT_LOG_MAX)
FILE_POLL_S = 0.2  # how often a followed regular file is checked for growth
MAX_TRACKED = 4096  # fingerprints whose repeats are counted per boot
MAX_RETRY_DELAY_S = 300.0
READ_RETRY_S = 1.0  # the first delay after a failed read of the source
SAVE_EVERY_S = 5.0  # the cursor is saved this often while nothing is reported (and on exit)
POLL_S = 1.0  # the longest wait for a record: timers (quiet log, due repeats) run this often


@dataclass
class Repeats:
    """How often a fingerprint came back since its last report."""

    first: str  # report_id of its first report this boot
    last_usec: int  # log time of its last report
    header: str = ""  # its first header line as dmesg prints it: the repeats' console_log
    last_seq: int = 0  # the last occurrence counted
    pending: int = 0  # occurrences not reported yet
    counted_usec: int = 0  # log time of the last occurrence counted: the repeats' report's time


@dataclass
class State:
    boot_id: str
    boot_time: float  # wall-clock time of the boot, fixed once per boot (btime drifts)
    seq: int = -1  # every record up to this one is handled
    repeats: dict[str, Repeats] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> State | None:
        """The saved state (of whichever boot), or None."""
        try:
            saved = json.loads(path.read_text())
            repeats = {key: Repeats(**value) for key, value in saved["repeats"].items()}
            return cls(saved["boot_id"], saved["boot_time"], saved["seq"], repeats)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save(self, path: Path) -> None:
        """Atomically: a crash leaves the old state or the new one, never half of either."""
        write_atomically(path, json.dumps(asdict(self)), durable=True)


def boot_time() -> float:
    """The boot's wall-clock time: now minus CLOCK_BOOTTIME (printk's clock is monotonic;
    the difference is suspend time, which a fleet's servers do not do)."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


class Source:
    """kmsg records from /dev/kmsg (one record per read, poll for more) or from a regular
    file of them (read lines, poll for growth). A failed open or read is logged and retried
    after a doubling delay, from a fresh open (records already handled are skipped by their
    sequence number): the source never ends the watcher."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.device = False
        self.partial = b""
        self.at_end = False
        self.retry_at = 0.0
        self.retry_delay = READ_RETRY_S

    def open(self) -> None:
        # O_NOCTTY: a terminal named as the source never becomes the watcher's controlling tty.
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        self.device = stat.S_ISCHR(os.fstat(self.fd).st_mode)
        self.partial = b""

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def failed(self, error: OSError) -> None:
        """Log, close, and wait a doubling delay before the next open."""
        problem = f"{type(error).__name__}: {error}"
        log(f"reading {self.path}: {problem}; retrying in {self.retry_delay:g}s")
        self.close()
        self.retry_at = time.monotonic() + self.retry_delay
        self.retry_delay = min(self.retry_delay * 2, MAX_RETRY_DELAY_S)

    def read(self, timeout: float) -> list[Record]:
        """What arrived within `timeout` seconds (may be nothing)."""
        if self.fd is None:
            wait = self.retry_at - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, timeout))
                return []
            try:
                self.open()
            except OSError as error:
                self.failed(error)
                return []
        try:
            records_read = self._read(timeout)
        except OSError as error:
            self.failed(error)
            return []
        self.retry_delay = READ_RETRY_S
        return records_read

    def _read(self, timeout: float) -> list[Record]:
        assert self.fd is not None
        if self.device and not select.select([self.fd], [], [], timeout)[0]:
            return []
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return []
        except OSError as error:
            if error.errno != errno.EPIPE:
                raise
            log("kmsg records were overwritten before they were read (EPIPE)")
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
    """`clock`: monotonic seconds; the log's clock runs on it while no record arrives."""

    def __init__(self, config: Config, state_path: Path, interval_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.state_path = state_path
        self.interval_usec = int(interval_s * 1_000_000)
        self.clock = clock
        self.hostname = hostname_of(config.hostname)
        boot_id = boot_id_of(config.boot_id_file) or ""
        saved = State.read(state_path)
        self.unsaved = False
        if saved is not None and saved.boot_id != boot_id:
            self.state = saved  # a reboot: the last boot's pending counts go first
            self.report_repeats(None)
            saved = None
        self.state = saved or State(boot_id, boot_time())
        self.cutter = Cutter()
        self.last_seen = self.state.seq
        self.log_usec: int | None = None  # time of the last record read, and when it was read
        self.log_read_at = clock()
        self.retry_at = 0.0
        self.retry_delay = max(config.retry_delay, 1.0)

    # --- the log -----------------------------------------------------------------------

    def take(self, record: Record) -> None:
        """One record: skipped if handled before a restart, else cut, counted, reported."""
        if record.seq <= self.state.seq:
            return
        self.last_seen = record.seq
        if self.state.seq >= 0 and record.seq > self.state.seq + 1 and self.cutter.open is None:
            log(f"kmsg records {self.state.seq + 1}..{record.seq - 1} were lost unread")
        self.log_usec, self.log_read_at = record.usec, self.clock()
        for cut in self.cutter.feed(record):
            self.finish(cut)
        self.report_repeats(record.usec)
        opened = self.cutter.open
        self.state.seq = record.seq if opened is None else max(self.state.seq, opened.header.seq - 1)

    def quiet(self) -> None:
        """The log went quiet: the report being cut is complete."""
        if self.cutter.open is not None:
            self.finish(self.cutter.close())
            self.state.seq = max(self.state.seq, self.last_seen)

    def finish(self, cut: Cut) -> None:
        console_log = cut.console_log()
        key = local_fingerprint(console_log) or cut.header.message
        seen = self.state.repeats.get(key)
        if seen is not None:
            seen.pending += 1
            seen.last_seq, seen.counted_usec = cut.header.seq, cut.header.usec
            self.unsaved = True  # the count and the cursor past it are saved together
            return
        report_id = safe_report_id(f"live-{self.state.boot_id}-{cut.header.seq:010d}")
        if len(self.state.repeats) < MAX_TRACKED:
            header = cut.header.console_lines()[0] + "\n"
            self.state.repeats[key] = Repeats(report_id, cut.header.usec, header, cut.header.seq)
        self.spool(self.report(report_id, cut.header, console_log=console_log, fingerprint=key))

    def log_now(self) -> int | None:
        """The log's clock: the last record's time, run on by `clock` since it was read."""
        if self.log_usec is None:
            return None
        return self.log_usec + int((self.clock() - self.log_read_at) * 1_000_000)

    def tick(self) -> None:
        """Timers of a quiet log: the counts whose interval has passed by the log's clock."""
        now_usec = self.log_now()
        if now_usec is not None:
            self.report_repeats(now_usec)

    def report_repeats(self, now_usec: int | None) -> None:
        """Counted repeats whose last report is an interval old (log time), or all of them
        (`now_usec` None: the watcher stops, or a new boot sends the last one's): one report each."""
        for key, seen in self.state.repeats.items():
            if seen.pending and (now_usec is None or now_usec >= seen.last_usec + self.interval_usec):
                # `.r`: sorts after the first report's spool file (`.json`), so it is sent after it
                report_id = safe_report_id(f"{seen.first}.r{seen.last_seq:010d}")
                repeat = Record(0, seen.last_seq, seen.counted_usec or seen.last_usec, "")
                # The header alone: the event exists (repeat_of), only the count is news.
                self.spool(self.report(report_id, repeat, console_log=seen.header, fingerprint=key,
                                       repeat_of=seen.first, repeat_count=seen.pending))
                seen.pending = 0
                seen.last_usec = repeat.usec if now_usec is None else now_usec

    def stop(self) -> None:
        """Before exit: every pending count into the spool (delivered next, or by post-boot).
        A report still being cut stays behind the cursor: the next start cuts it whole."""
        self.report_repeats(None)
        self.save()

    def report(self, report_id: str, record: Record, **fields: Any) -> dict[str, Any]:
        return report_skeleton(report_id, "live_kernel", iso_time(self.state.boot_time + record.usec / 1e6),
                               self.hostname, os.uname().release, self.state.boot_id,
                               uptime_s=record.usec // 1_000_000, **fields)

    # --- spool and delivery ------------------------------------------------------------

    def spool(self, report: dict[str, Any]) -> None:
        """Into the spool before the state moves past it; a body kept from before a restart
        is kept as it is (the registry replays it)."""
        report_id = report["report_id"]
        if not any(kept_path(self.config, report_id, f).exists() for f in (".", "sent")):
            keep(self.config, report_id, report_body(report))
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
                outcome, answer = resend(self.config, path)
            except Exception as error:  # the watcher never dies of a delivery: it tries again later
                log(f"{path.name}: not sent: {type(error).__name__}: {error}")
                outcome, answer = "kept", None
            if outcome == "kept":
                self.retry_at = time.monotonic() + self.retry_delay
                self.retry_delay = min(self.retry_delay * 2, MAX_RETRY_DELAY_S)
                return
            if answer is not None:
                log(f"sent {path.stem}: event {answer.get('event_id')}{replayed(answer)}")
        self.retry_delay = max(self.config.retry_delay, 1.0)

    def pending(self) -> bool:
        return any(Path(self.config.spool_dir).glob("live-*.json"))


def run(config: Config, once: bool) -> int:
    """Follow the log until SIGTERM (or, with `once`, to the end of a file); before exit, the
    pending counts are spooled and everything spooled is sent once more."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _: stopping.append(number))
    signal.signal(signal.SIGINT, lambda number, _: stopping.append(number))
    watcher = Watcher(config, Path(config.watch_state), config.watch_repeat_interval)
    source = Source(config.kmsg)
    state = watcher.state
    log(f"watching {config.kmsg} from kmsg record {state.seq + 1} of boot {state.boot_id}")
    quiet_since = saved_at = time.monotonic()
    while not stopping:
        arrived = source.read(timeout=POLL_S)
        for record in arrived:
            watcher.take(record)
        if arrived:
            quiet_since = time.monotonic()
        elif (once and source.at_end) or time.monotonic() - quiet_since >= config.watch_quiet:
            watcher.quiet()
        watcher.tick()
        if watcher.unsaved or time.monotonic() - saved_at >= SAVE_EVERY_S:
            watcher.save()
            saved_at = time.monotonic()
        watcher.deliver()
        if once and source.at_end and not arrived:
            break
    watcher.stop()
    watcher.deliver()
    source.close()
    return EXIT_UNSENT if watcher.pending() else 0
