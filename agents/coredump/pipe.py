"""Pipe mode: the reporter as the kernel's core handler, deciding before the core is read.

    kernel.core_pattern = |/usr/bin/python3 -IS /usr/lib/crashreg/crashreg-report.pyz core --pipe \
                          %P %I %s %t %c %u %g %d %h %E            (one line: CORE_PATTERN)
    kernel.core_pipe_limit = 16

The kernel starts the handler with the core on stdin and the crashing process held (with
core_pipe_limit > 0 its /proc/<pid> stays readable until the handler exits). The handler reads
only the core's head from stdin (ELF header, program headers, notes: the crashing thread's
NT_PRSTATUS first), the stack windows and each mapped ELF's build-id from /proc/<pid>/mem,
reports, and acts on the answer before reading the rest:

- skip: stdin is closed unread (the kernel stops writing: EPIPE), nothing is written;
- filtered: a bounded core (writers.write_bounded_core) from the head and /proc; stdin unread;
- full: the head, then the rest of stdin, into the target (writers.DirectorySink), under
  its caps; a core over them is not kept, and a bounded core is written instead.

With CRASHREG_CORE_CHAIN (e.g. systemd-coredump's own command line from its sysctl.d file) the
chained handler gets the whole original stdin, byte for byte, whatever the action, with its
own `%` specifiers expanded from ours: coredumpctl keeps working beside crashreg.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Protocol

from agents.reporter.log import log, printable
from agents.reporter.report import boot_id_of, hostname_of, iso_time

from .core import CoreHead, NoMemory, ProcMemory, read_core_head
from .modules import file_opener, proc_opener
from .report import CrashFacts, analyse, close, userspace_report

# What acts on the answer (the writers, a chained handler's subprocess) is imported after it:
# the handler's imports are most of its time to the answer (bench/README.md, core handler).
if TYPE_CHECKING:
    import subprocess

    from agents.reporter.config import Config

    from .writers import Limits, Sink

# The specifiers the core_pattern line passes, in order (core(5)): pid and tid in the initial
# pid namespace (the handler runs there), signal, dump time, RLIMIT_CORE soft limit, uid, gid,
# dumpable mode, hostname, the executable's path with '/' written '!'.
SPECIFIERS = ("P", "I", "s", "t", "c", "u", "g", "d", "h", "E")
# -I: no PYTHON* variables, no user site, no working directory on sys.path; -S: no site import
# (the pyz needs the standard library only, and `site` was a third of a bare python3's start).
CORE_PATTERN = "|/usr/bin/python3 -IS /usr/lib/crashreg/crashreg-report.pyz core --pipe " + " ".join(
    f"%{s}" for s in SPECIFIERS
)
CHUNK = 1 << 20
FILTERED_MEMORY_BUDGET = 1 << 30  # bytes a bounded core may read from /proc (its stacks and pages)


@dataclass(frozen=True)
class Dumping:
    """The dumping process as the kernel's command line names it: specifier -> value."""

    values: dict[str, str]

    @classmethod
    def from_argv(cls, words: list[str]) -> Dumping:
        if len(words) != len(SPECIFIERS):
            names = " ".join(f"%{s}" for s in SPECIFIERS)
            raise ValueError(f"--pipe takes {len(SPECIFIERS)} values ({names}), got {len(words)}")
        return cls(dict(zip(SPECIFIERS, words, strict=True)))

    def number(self, specifier: str) -> int:
        return int(self.values[specifier])

    @property
    def executable(self) -> str:
        return self.values["E"].replace("!", "/")

    def expand(self, word: str) -> str:
        """A chained command's word with our `%` values in it (`%%` is a percent sign); a
        specifier we were not given stays as it is."""

        def value(match: re.Match[str]) -> str:
            letter = match.group(1)
            return "%" if letter == "%" else self.values.get(letter, match.group(0))

        return re.sub(r"%(.)", value, word)


class Recording:
    """stdin as read_core_head reads it, every byte kept: the head is written again (full),
    rebuilt from (filtered) and handed on (chain)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.kept = stream, bytearray()

    def read(self, size: int) -> bytes:
        data = self.stream.read(size)
        self.kept += data
        return data


# --- what /proc says ------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def _start_ticks(pid: int | str) -> int | None:
    """Field 22 of /proc/<pid>/stat: when the process started, clock ticks after boot."""
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[19]) if stat else None
    except (IndexError, ValueError):
        return None


def started_after_boot_s(pid: int | str = "self") -> float | None:
    ticks = _start_ticks(pid)
    return ticks / os.sysconf("SC_CLK_TCK") if ticks is not None else None


def since_boot_s() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def crash_facts(dumping: Dumping, hostname: str) -> CrashFacts:
    """The host and the process around the core: boot id, uptime, when the process started."""
    now = since_boot_s()
    booted_at = time.time() - now
    started = started_after_boot_s(dumping.number("P"))
    boot_id = boot_id_of()
    return CrashFacts(
        hostname=hostname,
        crashed_at=iso_time(dumping.number("t")),
        kernel_version=os.uname().release,
        boot_id=boot_id,
        host_uptime_s=int(now),
        process_started_at=iso_time(booted_at + started) if started is not None else None,
        process_uptime_s=now - started if started is not None else None,
    )


def peak_memory_kb() -> int | None:
    found = re.search(r"^VmHWM:\s+(\d+) kB", _read("/proc/self/status") or "", re.M)
    return int(found.group(1)) if found else None


def standard_streams(log_device: str) -> None:
    """The kernel starts the handler with stdin only: fds 1 and 2 are closed. Fill them (a file
    opened later must not become fd 1 or 2) and send the log to `log_device` (/dev/kmsg: the
    kernel's log, which dmesg and the journal show)."""
    if sys.stderr is not None:
        return
    while (fd := os.open("/dev/null", os.O_RDWR)) <= 2:
        pass
    os.close(fd)
    try:
        kmsg = os.open(log_device, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    os.dup2(kmsg, 2)
    os.close(kmsg)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115  (the process's stderr)


# --- the handler ----------------------------------------------------------------------


def core_limits(config: Config) -> Limits:
    """The writers' caps from the config's CRASHREG_CORE_* (imported once there is something to write)."""
    from .writers import COMPRESSORS, Limits

    compression = config.core_compression
    if compression not in COMPRESSORS:
        log(f"CRASHREG_CORE_COMPRESSION={compression!r} is none of {', '.join(COMPRESSORS)}: gzip")
        compression = "gzip"
    return Limits(config.core_max_bytes, config.core_keep_free, compression, config.core_dir_max_bytes)


# The handler's time to the answer, in stages: (name, what ends it).
STAGES = (("start-up", "python3 started and the handler imported"), ("reading", "the report built"),
          ("round trip", "the answer"))


@dataclass
class Figures:
    """What one core cost: bytes read before the decision, the time to the answer by stage, and
    the CPU time it took (less noisy than wall time on a busy host)."""

    started_s: float | None  # the handler's start, seconds after boot (the kernel forked it)
    head_bytes: int = 0
    memory_bytes: int = 0
    marks: dict[str, float] = field(default_factory=dict)  # stage -> seconds after boot at its end
    cpu_s: dict[str, float] = field(default_factory=dict)  # stage -> the process's CPU time at its end
    after: dict[str, int] = field(default_factory=dict)  # bytes read or written by the action

    def mark(self, stage: str) -> None:
        self.marks[stage] = since_boot_s()
        self.cpu_s[stage] = time.process_time()

    @property
    def answer_s(self) -> float | None:
        """From the handler's start to the registry's (or the bundle's) answer."""
        end = self.marks.get(STAGES[-1][0])
        return end - self.started_s if end is not None and self.started_s is not None else None

    def stages_ms(self) -> dict[str, float]:
        """Each stage's wall time (ms): from the end of the one before (the start: the fork)."""
        out, before = {}, self.started_s
        for stage, _ in STAGES:
            if stage in self.marks and before is not None:
                out[stage] = (self.marks[stage] - before) * 1000
            before = self.marks.get(stage)
        return out

    def line(self) -> str:
        answer = f"{self.answer_s * 1000:.0f} ms" if self.answer_s is not None else "?"
        stages = ", ".join(f"{stage} {ms:.0f} ms" for stage, ms in self.stages_ms().items())
        cpu = self.cpu_s.get(STAGES[-1][0])
        start_cpu = self.cpu_s.get(STAGES[0][0])
        cpu_text = (f"; CPU {cpu * 1000:.0f} ms, {start_cpu * 1000:.0f} of them start-up"
                    if cpu is not None and start_cpu is not None else "")
        return (
            f"read {self.head_bytes} bytes of the core and {self.memory_bytes} of its memory before "
            f"the answer, {answer} after the kernel started the handler ({stages}{cpu_text}); "
            + "".join(f"{key} {value}; " for key, value in self.after.items())
            + f"peak memory {peak_memory_kb()} kB"
        )


class PipeHandler:
    """One dumping process: its head from stdin, its memory from /proc, then the action."""

    def __init__(self, dumping: Dumping, stdin: IO[bytes], config: Config) -> None:
        self.dumping, self.stdin, self.config = dumping, stdin, config
        self.figures = Figures(started_after_boot_s())
        self.recording = Recording(stdin)
        self.head: CoreHead | None = None
        self.chain: subprocess.Popen[bytes] | None = None
        self.report_id = ""
        self.removed_keys: list[str] = []  # capture keys of older cores the directory's cap deleted
        self.process_gone = False  # no /proc/<pid>: its memory is in stdin alone

    def elapsed(self) -> float | None:
        """Seconds since the kernel started the handler."""
        return since_boot_s() - self.figures.started_s if self.figures.started_s is not None else None

    def report(self, hostname: str) -> dict[str, Any]:
        """Read the head (nothing past the notes), unwind from /proc, build the report; from the
        head alone when the process is gone from /proc."""
        self.head, consumed = read_core_head(self.recording)
        self.figures.head_bytes = consumed
        pid = self.dumping.number("P")
        memory: ProcMemory | NoMemory
        try:
            memory, opener = ProcMemory(pid), proc_opener(pid)
        except OSError as error:
            log(f"process {pid} is gone from /proc ({error}){pipe_limit_hint()}: reported from the core's "
                "head alone (frames from its pc), its memory only in a full core")
            memory, opener, self.process_gone = NoMemory(), file_opener(), True
        try:
            analysis = analyse(self.head, memory, opener)
            try:
                return userspace_report(analysis, crash_facts(self.dumping, hostname), fingerprint=False)
            finally:
                close(analysis)
        finally:
            self.figures.memory_bytes = memory.budget.used
            memory.close()

    def start_chain(self) -> None:
        """The chained handler, fed what was read so far; the rest follows as it is read."""
        if not self.config.core_chain:
            return
        import shlex
        import subprocess

        words = [self.dumping.expand(word) for word in shlex.split(self.config.core_chain)]
        try:
            self.chain = subprocess.Popen(words, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        except OSError as error:
            log(f"chained handler {words[0]} not started: {error}")
            return
        self._to_chain(bytes(self.recording.kept))

    def _to_chain(self, data: bytes) -> None:
        if self.chain is not None and self.chain.stdin is not None:
            try:
                self.chain.stdin.write(data)
            except BrokenPipeError:  # it stopped reading: its own limits, its business
                self.chain.stdin = None

    def _sink(self, kind: str) -> Sink:
        from .writers import DirectorySink

        name = f"{self.report_id}.{kind}" if kind != "full" else self.report_id
        return DirectorySink(self.config.core_dir, name, core_limits(self.config))

    def act(self, action: str, report_id: str) -> list[dict[str, Any]]:
        """Do what was decided; the captures to record. stdin is read no further than the
        action needs (all of it only for full, or for a chained handler), then closed, which
        lets the kernel finish with the process."""
        self.report_id = report_id
        captures = []
        if action == "full":
            capture = self.capture("core", self.write_full)
            captures.append(capture)
            if capture["status"] != "completed":
                action = "filtered"  # over a cap: the bounded core is still worth keeping
        if action == "filtered" and self.process_gone:
            log("a bounded core is read from /proc, gone: the core as the kernel streams it instead")
            captures.append(self.capture("core", self.write_full))
        elif action == "filtered":
            captures.append(self.capture("core_filtered", self.write_filtered))
        self.drain()
        return captures

    def capture(self, method: str, write: Callable[[Sink], int]) -> dict[str, Any]:
        from .writers import OverLimit, Stored, capture_key_of

        started = time.monotonic()
        stored: Stored | None = None
        sink: Sink | None = None
        try:
            sink = self._sink("full" if method == "core" else "filtered")
            self.figures.after[f"{method} bytes read"] = write(sink)
            stored = sink.commit()
            for name, size in stored.removed:
                log(f"{name} ({size} bytes, the oldest of the handler's cores) deleted: the cores in "
                    f"{self.config.core_dir} may take {self.config.core_dir_max_bytes} bytes")
                if key := capture_key_of(name):
                    self.removed_keys.append(key)
        except (OverLimit, OSError) as error:
            log(f"{method} of {self.report_id} not kept: {error}")
            if sink is not None:
                sink.discard()
        return {
            "method": method,
            "status": "completed" if stored else "failed",
            "bytes": stored.stored_bytes if stored else None,
            "duration_s": round(time.monotonic() - started, 3),
            "downtime_s": round(self.elapsed() or 0.0, 3),
            "target": stored.target if stored else self.config.core_dir,
            "capture_key": f"{self.report_id}-{method}",
        }

    def write_full(self, sink: Sink) -> int:
        """The core as the kernel streams it: the head already read, then the rest."""
        sink.write(bytes(self.recording.kept))
        copied = len(self.recording.kept)
        while data := self.stdin.read(CHUNK):
            self._to_chain(data)
            sink.write(data)
            copied += len(data)
        return copied

    def write_filtered(self, sink: Sink) -> int:
        from .writers import write_bounded_core

        assert self.head is not None
        memory = ProcMemory(self.dumping.number("P"), budget=FILTERED_MEMORY_BUDGET)
        try:
            head_bytes = bytes(self.recording.kept)
            return write_bounded_core(self.head, head_bytes, memory, self.config.core_range_bytes, sink)
        finally:
            memory.close()

    def drain(self) -> None:
        """Hand the rest to the chained handler and wait for it, or stop reading at once."""
        if self.chain is not None:
            self._forward_rest()
        self.stdin.close()

    def _forward_rest(self) -> None:
        assert self.chain is not None
        while self.chain.stdin is not None and (data := self.stdin.read(CHUNK)):
            self._to_chain(data)
        if self.chain.stdin is not None:
            self.chain.stdin.close()
        self.chain.wait()


def pipe_limit_hint(path: str = "/proc/sys/kernel/core_pipe_limit") -> str:
    """Why a dumping process may be gone: the kernel waits for a handler only with a limit."""
    unlimited = (_read(path) or "").strip() == "0"
    return "; kernel.core_pipe_limit is 0: set it to 16 (agents/README.md)" if unlimited else ""


class Decided(Protocol):
    action: str
    reason: str
    decided_by: str
    event_id: str | None


def handle(
    words: list[str],
    config: Config,
    decide: Callable[[dict[str, Any]], Decided],
    record: Callable[[str, str | None, dict[str, Any]], None],
    removed: Callable[[list[str]], None],
) -> int:
    """The whole pipe mode: report, decide (the registry, else the bundle: `decide`), act,
    record the captures (`record`: sent, or spooled for the post-boot agent), and say which
    older cores the directory's cap deleted (`removed`: their capture keys, sent or spooled)."""
    standard_streams(config.core_log)
    dumping = Dumping.from_argv(words)
    handler = PipeHandler(dumping, sys.stdin.buffer, config)
    handler.figures.mark("start-up")
    try:
        report = handler.report(hostname_of(config.hostname))
        handler.figures.mark("reading")
    except Exception as error:  # not a core we can read (a broken or hostile one): said, nothing to report
        log(f"core of pid {dumping.values['P']} unreadable: {type(error).__name__}: {error}")
        handler.start_chain()
        handler.drain()
        return 1
    decision = decide(report)
    handler.figures.mark("round trip")
    handler.start_chain()
    try:
        captures = handler.act(decision.action, report["report_id"])
    except Exception as error:  # the report is in: the kernel (and a chained handler) still get theirs
        log(f"core of pid {dumping.values['P']}: {decision.action} failed: {type(error).__name__}: {error}")
        handler.drain()
        captures = []
    for capture in captures:
        record(report["report_id"], decision.event_id, capture)
    if handler.removed_keys:
        removed(handler.removed_keys)
    process = report["stack"].get("process", {})
    log(
        f"core of pid {dumping.values['P']} ({printable(process.get('name') or '?')}) "
        f"{report['stack'].get('signal')} "
        f"{report['report_id']}: {decision.action} by {decision.decided_by} ({decision.reason}); "
        + handler.figures.line()
    )
    return 0
