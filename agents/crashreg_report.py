#!/usr/bin/env python3
"""crashreg reporter: one stdlib-only zipapp for crash kernels, post-boot agents and DPU agents.

Does what agents/kdump/crashreg-kdump.sh does (read the crashed kernel's log, report it,
turn the capture answer into makedumpfile arguments, decide from the offline policy bundle
when the registry is unreachable, spool the report) and adds what only Python can carry:
the registry's own fingerprint engine (the package registry.fingerprint, zipped with this
module into crashreg-report.pyz by `make reporter`), so the offline decision matches bundle
entries exactly, and the `post-boot` resend of spooled reports. A resend reuses the
spooled body byte for byte: same report_id, same payload, so the registry replays or joins
it and never stores a crash twice.

    crashreg-report.pyz report [--dmesg-file F]   crash kernel: decide, print makedumpfile args
    crashreg-report.pyz collect ARGS...           core collector: makedumpfile, capture recorded
    crashreg-report.pyz post-boot                 resend every spooled report and capture
    crashreg-report.pyz fetch-bundle              refresh the offline bundle (JSON and text)
    crashreg-report.pyz fingerprint FILE...       local fingerprint of console logs / reports
    crashreg-report.pyz watch [--once]            report a running kernel's oopses and warnings
    crashreg-report.pyz core --core FILE [--exe EXE] [--crashed-at T] [--started-at T]  a core on disk
    crashreg-report.pyz core --pipe %P %I %s ...      kernel.core_pattern handler (core on stdin)

Configuration: /etc/crashreg/reporter.conf (or $CRASHREG_CONF), KEY=VALUE lines shared with
the sh reporter; see agents/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Imported where they are used, not here: ssl, subprocess, tempfile, uuid and the dump uploader
# (dumpupload, zipped beside this module) are most of the imports of a core handler, which
# needs none of them before its answer (bench/README.md, core handler). Nor http.client: its
# imports (the email package, ssl with OpenSSL's start) were a third of the handler's
# instructions to its answer; one HTTP/1.1 request is done here instead (http_request).

EXIT_DUMP = 0
EXIT_SKIP = 10
EXIT_UNSENT = 3
ACTIONS = ("full", "filtered", "skip")
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def log(message: str) -> None:
    print(f"crashreg-report: {message}", file=sys.stderr)


# --- configuration --------------------------------------------------------------------


@dataclass
class Config:
    """The reporter's settings; attribute `x` is the config key CRASHREG_X."""

    url: str = ""
    token_file: str = "/etc/crashreg/token"
    ca_file: str = ""
    connect_timeout: float = 5.0
    max_time: float = 20.0
    retries: int = 3
    retry_delay: float = 1.0
    spool_dir: str = "/var/spool/crashreg"
    bundle: str = "/etc/crashreg/policy-bundle.txt"
    bundle_json: str = "/etc/crashreg/policy-bundle.json"
    vmcore: str = "/proc/vmcore"
    dmesg_file: str = ""
    makedumpfile: str = "makedumpfile"
    vmcore_dmesg: str = "vmcore-dmesg"
    compression: str = "-c"
    filtered_level: int = 31
    fallback_action: str = "filtered"
    max_log_bytes: int = 524288
    cmdline: str = "/proc/cmdline"
    decision_file: str = "/run/crashreg/decision.env"
    hostname: str = ""
    kdump_coredir: str = ""
    core_dir: str = "/var/lib/crashreg/cores"
    core_max_bytes: int = 2 << 30
    core_keep_free: int = 1 << 30
    core_dir_max_bytes: int = 8 << 30  # all cores in core_dir (0: no cap); the oldest go first
    core_compression: str = "gzip"
    core_range_bytes: int = 1 << 20
    core_chain: str = ""
    core_log: str = "/dev/kmsg"
    boot_id_file: str = "/proc/sys/kernel/random/boot_id"
    kmsg: str = "/dev/kmsg"
    watch_state: str = "/var/lib/crashreg/watch-state.json"
    watch_quiet: float = 10.0
    watch_repeat_interval: float = 60.0
    pstore_dir: str = "/sys/fs/pstore"
    pstore_clear: int = 1
    boot_log: str = "/var/lib/crashreg/boots"
    upload_dumps: int = 1  # send kept dumps to the dump store (through the registry's URLs)
    kdump_upload: str = "spool"  # collect: "spool" for the post-boot agent (no downtime), or "now"
    upload_threads: int = 4  # parts in flight at once

    @classmethod
    def load(cls, path: str | None = None) -> Config:
        path = path or os.environ.get("CRASHREG_CONF") or "/etc/crashreg/reporter.conf"
        try:
            text = Path(path).read_text()
        except OSError:
            log(f"no readable config at {path}: defaults only")
            text = ""
        return cls.from_values(parse_conf(text))

    @classmethod
    def from_values(cls, values: dict[str, str]) -> Config:
        config = cls()
        for spec in fields(cls):
            key = "CRASHREG_" + spec.name.upper()
            raw = values.get(key)
            if raw is None:
                continue
            kind = type(getattr(config, spec.name))
            try:
                setattr(config, spec.name, kind(raw))
            except ValueError:
                log(f"{key}={raw!r} is not a valid {kind.__name__}: keeping {getattr(config, spec.name)!r}")
        return config

    def token(self) -> str | None:
        try:
            return Path(self.token_file).read_text().strip() or None
        except OSError:
            log(f"token file {self.token_file} unreadable")
            return None


def parse_conf(text: str) -> dict[str, str]:
    """KEY=VALUE lines as a POSIX shell would assign them (quotes, comments); no expansion."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$", line)
        if not match:
            continue
        try:
            words = shlex.split(match.group(2), comments=True)
        except ValueError as error:  # unbalanced quotes: the line is ignored, not the file
            log(f"config line {line!r} ignored: {error}")
            continue
        values[match.group(1)] = words[0] if words else ""
    return values


# --- what crashed ---------------------------------------------------------------------


def cmdline_values(path: str) -> dict[str, str]:
    """crashreg.<name>=value parameters the kexec load put on the crash kernel's command line."""
    try:
        words = Path(path).read_text().split()
    except OSError:
        return {}
    return {
        key.removeprefix("crashreg."): value
        for key, _, value in (word.partition("=") for word in words)
        if key.startswith("crashreg.")
    }


def read_kernel_log(config: Config) -> str:
    """The crashed kernel's log (dmesg file, makedumpfile --dump-dmesg, vmcore-dmesg), tail-capped."""
    if config.dmesg_file:
        try:
            return tail_text(Path(config.dmesg_file).read_bytes(), config.max_log_bytes)
        except OSError as error:
            log(f"could not read the kernel log: {error}")
            return ""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="crashreg.") as work:
        out = Path(work) / "dmesg"
        extractors = (
            ([config.makedumpfile, "--dump-dmesg", config.vmcore, str(out)], out),
            ([config.vmcore_dmesg, config.vmcore], None),
        )
        for command, target in extractors:
            try:
                done = subprocess.run(command, capture_output=True, timeout=300, check=False)
            except (OSError, subprocess.TimeoutExpired):
                continue
            raw = target.read_bytes() if target and target.exists() else done.stdout
            if done.returncode == 0 and raw:
                return tail_text(raw, config.max_log_bytes)
    log(f"could not read the kernel log from {config.vmcore}")
    return ""


def tail_text(raw: bytes, limit: int) -> str:
    """The last `limit` bytes as text (the crash is at the end), starting on a whole line."""
    raw = raw.replace(b"\0", b"")
    if len(raw) > limit:
        raw = raw[-limit:]
        raw = raw[raw.find(b"\n") + 1 :]
    return raw.decode("utf-8", "replace")


def log_uptime(console_log: str) -> int | None:
    stamps = re.findall(r"^\[ *(\d+)\.\d+\]", console_log, re.MULTILINE)
    return int(stamps[-1]) if stamps else None


def log_kernel_version(console_log: str) -> str | None:
    match = re.search(r"Linux version (\S+)", console_log)
    return match.group(1) if match else None


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def safe_report_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:128]


def local_fingerprint(console_log: str | None, stack: dict[str, Any] | None = None) -> str | None:
    # The engine (the zipapp carries the package) compiles its rules when imported: a third of
    # a core handler's time to its answer, so only when a fingerprint is needed here.
    from registry.fingerprint import analyse_report

    signature = analyse_report(console_log, stack)
    return signature.fingerprint if signature else None


def crash_kernel_report(config: Config, console_log: str) -> dict[str, Any]:
    """The contract's report from a crash kernel, keyed by the crashed boot."""
    import uuid

    params = cmdline_values(config.cmdline)
    hostname = config.hostname or params.get("hostname") or socket.gethostname() or "unknown"
    boot_id = params.get("boot_id")
    suffix = boot_id or f"{hostname}-{uuid.uuid4()}"
    return {
        "report_id": safe_report_id(f"kdump-{suffix}"),
        "source": "crash_kernel",
        "crashed_at": utc_now(),
        "host": {
            "hostname": hostname,
            "kernel_version": params.get("kernel") or log_kernel_version(console_log) or os.uname().release,
        },
        "boot_id": boot_id,
        "uptime_s": log_uptime(console_log),
        "fingerprint": local_fingerprint(console_log),
        "console_log": console_log,
    }


# --- the registry over HTTP -----------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class BadResponse(OSError):
    """What came back is not an HTTP/1.x response."""


MAX_HEADER_LINES = 200
MAX_LINE = 65536


def http_request(
    config: Config, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Response:
    """One request, one connection (`Connection: close`): connect within connect_timeout, all
    of it within max_time; TLS (ca_file, else the system's CAs) for an https URL."""
    parts = urlsplit(config.url.rstrip("/") + path)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    deadline = time.monotonic() + config.max_time
    all_headers = {"Host": parts.netloc, "Accept": "application/json", "Accept-Encoding": "identity",
                   "Connection": "close"} | (headers or {})
    token = config.token()
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        all_headers |= {"Content-Type": "application/json", "Content-Length": str(len(body))}
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    address = (host, parts.port or (443 if https else 80))
    sock = socket.create_connection(address, timeout=config.connect_timeout)
    try:
        if https:
            import ssl

            context = ssl.create_default_context(cafile=config.ca_file or None)
            sock = context.wrap_socket(sock, server_hostname=host)
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        lines = [f"{method} {target} HTTP/1.1", *(f"{key}: {value}" for key, value in all_headers.items())]
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        with sock.makefile("rb") as stream:
            response = read_response(stream, method)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{method} {path} took longer than {config.max_time}s")
        return response
    finally:
        sock.close()


def _line(stream: Any) -> bytes:
    line = stream.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise BadResponse("a response line longer than 64 KiB")
    return line


def read_response(stream: Any, method: str) -> Response:
    """Status line, headers, then the body: chunked, Content-Length, or up to the close."""
    status_line = _line(stream).decode("latin-1").split(None, 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
        raise BadResponse(f"not an HTTP/1.x status line: {' '.join(status_line)[:100]!r}")
    status = int(status_line[1])
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        line = _line(stream).decode("latin-1").rstrip("\r\n")
        if not line:
            break
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    else:
        raise BadResponse(f"more than {MAX_HEADER_LINES} header lines")
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Response(status, headers, b"")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return Response(status, headers, _chunked(stream))
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise BadResponse(f"Content-Length {length[:40]!r}")
        data = stream.read(int(length))
        if len(data) != int(length):
            raise BadResponse(f"the body ended after {len(data)} of {length} bytes")
        return Response(status, headers, data)
    return Response(status, headers, stream.read())


def _chunked(stream: Any) -> bytes:
    data = bytearray()
    while True:
        size_text = _line(stream).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"a chunk size {size_text[:40]!r}") from None
        if size == 0:
            while _line(stream).strip():  # trailers
                pass
            return bytes(data)
        chunk = stream.read(size)
        if len(chunk) != size or _line(stream).strip():
            raise BadResponse("a chunk ended early")
        data += chunk


class Unsent(Exception):
    """The registry did not take the report: unreachable (status None), or it answered `status`."""

    def __init__(self, problem: str, status: int | None = None) -> None:
        super().__init__(problem)
        self.status = status

    @property
    def refused(self) -> bool:
        """A verdict on the report itself (bad body, reused report_id): resending cannot help.
        Auth failures are not: a fixed token on the host makes the same resend succeed."""
        status = self.status or 0
        return 400 <= status < 500 and status not in RETRYABLE_STATUSES | {401, 403}


def post_with_retries(config: Config, path: str, body: bytes) -> Response:
    """POST with retries and exponential backoff on network errors, 408, 429 and 5xx."""
    delay = config.retry_delay
    for attempt in range(config.retries + 1):
        status = None
        try:
            response = http_request(config, "POST", path, body)
        except OSError as error:
            problem = f"{type(error).__name__}: {error}"
        else:
            if 200 <= response.status < 300:
                return response
            status, problem = response.status, f"HTTP {response.status} {response.body[:300]!r}"
            if status not in RETRYABLE_STATUSES:
                raise Unsent(problem, status)
        log(f"attempt {attempt + 1}: {problem}")
        if attempt < config.retries:
            time.sleep(delay)
            delay *= 2
    raise Unsent(problem, status)


def report_body(report: dict[str, Any]) -> bytes:
    return json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode()


def send_report_body(config: Config, body: bytes) -> dict[str, Any]:
    """POST /api/v1/reports; the registry's answer, or Unsent."""
    if not config.url:
        raise Unsent("no registry URL configured")
    return post_with_retries(config, "/api/v1/reports", body).json()


# --- spool ----------------------------------------------------------------------------


SENT_RETENTION_S = 7 * 86400


def kept_path(config: Config, report_id: str, folder: str = ".") -> Path:
    """Where a report body is kept: the spool itself (unsent) or its sent/ folder."""
    return Path(config.spool_dir) / folder / f"{safe_report_id(report_id)}.json"


def keep(config: Config, report_id: str, body: bytes, folder: str = ".") -> Path:
    """Keep the exact body (written atomically) for a resend or a replay."""
    path = kept_path(config, report_id, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(body)
    temporary.replace(path)
    return path


def deliver(config: Config, report: dict[str, Any]) -> dict[str, Any] | None:
    """Send a report and keep its body: in sent/ when delivered (a rerun for the same crash
    replays it instead of clashing with it), in the spool for the post-boot resend when not."""
    report_id = report["report_id"]
    unsent, sent = kept_path(config, report_id), kept_path(config, report_id, "sent")
    kept = next((path for path in (unsent, sent) if path.exists()), None)
    body = kept.read_bytes() if kept else report_body(report)
    try:
        answer = send_report_body(config, body)
    except Unsent as error:
        log(f"report not delivered: {error}")
        try:
            keep(config, report_id, body)
            log(f"spooled {report_id} for the post-boot resend")
        except OSError as spool_error:
            log(f"could not spool the report to {config.spool_dir}: {spool_error}")
        return None
    try:
        keep(config, report_id, body, "sent")
    except OSError as error:
        log(f"could not keep the sent report: {error}")
    unsent.unlink(missing_ok=True)
    return answer


@dataclass(frozen=True)
class ResendSummary:
    sent: int
    kept: int
    rejected: int
    reports_kept: int = 0  # of the kept, spooled reports (not captures or uploads)


# A pstore record is the log of a panic whose crash kernel may have reported too. The registry
# joins the record to that report's event when the report is there first, so a pstore report
# waits while a crash report is still spooled (they are on one host's disk: this is the order).
PSTORE_REPORT_PREFIX = "pstore-"


def is_pstore_report(path: Path) -> bool:
    return path.name.startswith(PSTORE_REPORT_PREFIX)


def pstore_last(path: Path) -> tuple[bool, str]:
    """Spooled reports in name order, pstore's after every other."""
    return is_pstore_report(path), path.name


def resend_spooled(config: Config) -> ResendSummary:
    """Post-boot: resend every spooled report, then every spooled capture (which may need the
    event id a resent report just got); delivered reports move to sent/, refused ones to
    rejected/ for a human."""
    spool_dir = Path(config.spool_dir)
    events: dict[str, str] = {}
    outcomes: list[str] = []
    reports_kept = 0
    for path in sorted(spool_dir.glob("*.json"), key=pstore_last):
        if reports_kept and is_pstore_report(path):
            log(f"{path.name}: kept until the spooled crash reports before it are delivered")
            outcomes.append("kept")
            continue
        try:
            answer = send_report_body(config, path.read_bytes())
        except Unsent as error:
            outcome = set_aside(path, error)
            reports_kept += outcome == "kept"
            outcomes.append(outcome)
            continue
        events[path.stem] = answer["event_id"]
        (spool_dir / "sent").mkdir(exist_ok=True)
        path.replace(spool_dir / "sent" / path.name)
        outcomes.append("sent")
        replay = " (already registered)" if answer.get("duplicate") else ""
        log(f"{path.name}: event {answer['event_id']}{replay}")
    for path in sorted(spool_dir.glob("*.capture")):
        outcomes.append(resend_capture(config, path, events))
    for path in sorted(spool_dir.glob("*.removed")):
        outcomes.append(resend_removed(config, path))
    from dumpupload import STATE_SUFFIX

    for path in sorted(spool_dir.glob(f"*{STATE_SUFFIX}")):  # uploads a reboot interrupted
        outcomes.append(upload_spooled(config, path))
    if config.kdump_coredir:
        outcomes += record_kdump_tools_captures(config, Path(config.kdump_coredir))
    prune_sent(spool_dir / "sent")
    counts = (outcomes.count(outcome) for outcome in ("sent", "kept", "rejected"))
    return ResendSummary(*counts, reports_kept=reports_kept)


KDUMP_TOOLS_STAMP = re.compile(r"\d{12}")  # kdump-tools names dump directories date +%Y%m%d%H%M


def record_kdump_tools_captures(config: Config, coredir: Path) -> list[str]:
    """Debian/Ubuntu kdump-tools runs makedumpfile itself, so the capture is read back after
    the reboot from what it left in KDUMP_COREDIR: each crash reported from the crash kernel
    (a sent/ copy, examined once) owns the first dump directory made after its report and
    before the next report. Replaying the report body gives its event and answer."""
    sent_dir = Path(config.spool_dir) / "sent"
    reports = sorted((p for p in sent_dir.glob("*.json") if not p.with_suffix(".examined").exists()),
                     key=lambda p: p.stat().st_mtime)
    dump_dirs = sorted((d for d in coredir.glob("*") if d.is_dir() and KDUMP_TOOLS_STAMP.fullmatch(d.name)),
                       key=lambda d: d.stat().st_mtime)
    outcomes = []
    for index, report in enumerate(reports):
        since = report.stat().st_mtime - 60
        until = reports[index + 1].stat().st_mtime if index + 1 < len(reports) else float("inf")
        dump_dir = next((d for d in dump_dirs if since <= d.stat().st_mtime < until), None)
        if dump_dir is not None:
            try:
                answer = send_report_body(config, report.read_bytes())
                capture = kdump_tools_capture(dump_dir, answer["capture"], report.stem)
                recorded = send_capture(config, answer["event_id"], capture)
            except Unsent as error:
                log(f"{report.name}: capture from {dump_dir} not recorded: {error}")
                outcomes.append("kept")
                continue
            log(f"{report.name}: capture {capture['status']} from {dump_dir}")
            outcomes.append(upload_dump(config, report.stem, recorded) or "sent")
        report.with_suffix(".examined").touch()
    return outcomes


def kdump_tools_capture(dump_dir: Path, answer: dict[str, Any], report_id: str) -> dict[str, Any]:
    """A finished dump is dump.<stamp>; dump-incomplete* is one makedumpfile did not finish.
    dmesg.<stamp> is written just before makedumpfile starts, so the mtimes time the dump."""
    finished = sorted(dump_dir.glob("dump.*"))
    dump = finished[0] if finished else next(iter(sorted(dump_dir.glob("dump-incomplete*"))), None)
    dmesg = next(iter(sorted(dump_dir.glob("dmesg.*"))), None)
    levels = {"full": 0, "filtered": answer.get("dump_level")}
    return {
        "method": "makedumpfile",
        "status": "completed" if finished else "failed",
        "dump_level": levels.get(answer.get("action")),
        "bytes": dump.stat().st_size if dump else None,
        "duration_s": max(0.0, dump.stat().st_mtime - dmesg.stat().st_mtime) if dump and dmesg else None,
        "target": str(dump or dump_dir),
        "capture_key": f"{report_id}-makedumpfile",
    }


def set_aside(path: Path, error: Unsent) -> str:
    """An undelivered spool file: kept for the next run, or moved to rejected/ if refused."""
    log(f"{path.name}: {error}")
    if not error.refused:
        return "kept"
    (path.parent / "rejected").mkdir(exist_ok=True)
    path.replace(path.parent / "rejected" / path.name)
    return "rejected"


def resend_capture(config: Config, path: Path, events: dict[str, str]) -> str:
    """A spooled capture, once its event is known (from the crash kernel or a resend of its
    report: `events`, report_id -> event id)."""
    spooled = json.loads(path.read_bytes())
    event_id = spooled.get("event_id") or events.get(spooled.get("report_id") or path.stem)
    if not event_id:
        log(f"{path.name}: its report is not delivered yet")
        return "kept"
    try:
        recorded = send_capture(config, event_id, spooled["capture"])
    except Unsent as error:
        path.write_text(json.dumps({"event_id": event_id, "capture": spooled["capture"]}))
        return set_aside(path, error)
    path.unlink()
    log(f"{path.name}: capture recorded with event {event_id}")
    return upload_dump(config, path.stem, recorded) or "sent"


def send_capture(config: Config, event_id: str, capture: dict[str, Any]) -> dict[str, Any]:
    """Record a capture with its event; the registry's capture (its id names the upload)."""
    if not config.url:
        raise Unsent("no registry URL configured")
    body = json.dumps(capture).encode()
    return post_with_retries(config, f"/api/v1/events/{event_id}/captures", body).json()


# --- dump uploads (agents/dumpupload) ---------------------------------------------------


def registry_post(config: Config) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The uploader's way to the registry: POST with retries; a refusal is an UploadError."""
    from dumpupload import UploadError

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return post_with_retries(config, path, json.dumps(body).encode()).json()
        except Unsent as error:
            raise UploadError(str(error)) from error

    return post


def upload_spooled(config: Config, state: Path) -> str:
    """Finish one upload the spool describes (from its first part or where it stopped)."""
    from dumpupload import Uploader, UploadError

    uploader = Uploader(registry_post(config), threads=max(1, config.upload_threads),
                        timeout=max(config.max_time, 60.0), ca_file=config.ca_file or None, log=log)
    try:
        dump = uploader.upload(state)
    except (UploadError, OSError) as error:
        cause = error.__cause__
        return set_aside(state, cause if isinstance(cause, Unsent) else Unsent(str(error)))
    log(f"{state.name}: dump stored at {dump['uri']} ({dump['bytes']} bytes)")
    return "sent"


def upload_dump(config: Config, report_id: str, capture: dict[str, Any], now: bool = True) -> str | None:
    """A completed capture's dump file goes to the dump store; its progress is spooled. Not
    `now`: only the spooled state, which the post-boot agent uploads (upload_spooled)."""
    target = capture.get("target")
    wanted = config.upload_dumps and capture.get("status") == "completed"
    if not wanted or not target or not Path(target).is_file():
        return None
    from dumpupload import prepare

    try:
        state = prepare(Path(config.spool_dir), safe_report_id(report_id), capture["id"], Path(target))
    except OSError as error:
        log(f"could not prepare the upload of {target}: {error}")
        return "kept"
    if not now:
        log(f"{state.name}: upload spooled for the post-boot agent")
        return "spooled"
    return upload_spooled(config, state)


def prune_sent(folder: Path) -> None:
    """Sent copies only serve reruns for a recent crash; drop them after a week."""
    cutoff = time.time() - SENT_RETENTION_S
    for path in folder.glob("*.json"):
        if path.stat().st_mtime < cutoff:
            path.unlink()
            path.with_suffix(".examined").unlink(missing_ok=True)


# --- decisions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str
    dump_level: int | None
    decided_by: str  # registry | bundle | fallback
    event_id: str | None = None


def registry_decision(answer: dict[str, Any]) -> Decision:
    capture = answer.get("capture") or {}
    action = capture.get("action")
    if action not in ACTIONS:
        raise Unsent(f"unreadable capture answer {capture!r}")
    return Decision(action, capture.get("reason", ""), capture.get("dump_level"), "registry",
                    answer.get("event_id"))


def load_bundle(path: str) -> dict[str, Any] | None:
    try:
        bundle = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return bundle if bundle.get("format") == "crashreg-policy-bundle" else None


def bundle_decision(config: Config, fingerprint: str | None) -> Decision:
    """The offline answer: the bundle's entry for this fingerprint, else its `unknown` rule."""
    bundle = load_bundle(config.bundle_json)
    if bundle is None:
        return Decision(config.fallback_action, "offline and no policy bundle", None, "fallback")
    entries = {entry["fingerprint"]: entry for entry in bundle.get("entries", [])}
    entry = entries.get(fingerprint or "")
    if entry is not None:
        reason = f"offline: policy bundle {bundle.get('version')} entry for {fingerprint}"
        return Decision(entry["action"], reason, entry.get("dump_level"), "bundle")
    unknown = bundle.get("unknown") or {"action": "full", "reason": "a new bug"}
    return Decision(unknown["action"], f"offline: {unknown.get('reason', '')}", unknown.get("dump_level"),
                    "bundle")


def makedumpfile_args(config: Config, decision: Decision) -> list[str]:
    """full: every page (-d 0); filtered: the answer's dump level; skip: no dump at all."""
    levels = {"full": 0, "filtered": decision.dump_level if decision.dump_level is not None
              else config.filtered_level}
    if decision.action not in levels:
        return []
    return [*shlex.split(config.compression), "-d", str(levels[decision.action])]


def write_decision(config: Config, decision: Decision, report_id: str) -> str:
    """The sourced env file kdump hooks read (same keys as the sh reporter); returns the args."""
    args = shlex.join(makedumpfile_args(config, decision))
    values = {
        "CRASHREG_ACTION": decision.action,
        "CRASHREG_DUMP_LEVEL": "" if decision.dump_level is None else str(decision.dump_level),
        "CRASHREG_REASON": decision.reason,
        "CRASHREG_DECIDED_BY": decision.decided_by,
        "CRASHREG_EVENT_ID": decision.event_id or "",
        "CRASHREG_REPORT_ID": report_id,
        "CRASHREG_MAKEDUMPFILE_ARGS": args,
        "MAKEDUMP_ARGS": args,
    }
    path = Path(config.decision_file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text("".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items()))
        temporary.replace(path)
    except OSError as error:
        log(f"could not write {path}: {error}")
    level = f" (dump level {decision.dump_level})" if decision.dump_level is not None else ""
    log(f"decision: {decision.action}{level} by {decision.decided_by}: {decision.reason}")
    return args


def decide(config: Config, report: dict[str, Any]) -> Decision:
    """Ask the registry; when it cannot be asked, the offline bundle decides."""
    answer = deliver(config, report)
    if answer is not None:
        try:
            return registry_decision(answer)
        except Unsent as error:
            log(str(error))
    # A report sent without one (a core handler leaves it to the registry) is fingerprinted now.
    fingerprint = report.get("fingerprint") or local_fingerprint(report.get("console_log"),
                                                                 report.get("stack"))
    return bundle_decision(config, fingerprint)


# --- policy bundle refresh ------------------------------------------------------------


def fetch_bundle(config: Config) -> bool:
    """Refresh both bundle files (ETag / If-None-Match); True when either changed."""
    changed = False
    for target, query in ((config.bundle_json, ""), (config.bundle, "?format=text")):
        path = Path(target)
        etag_path = path.with_name(path.name + ".etag")
        headers = {}
        if path.exists() and etag_path.exists():
            headers["If-None-Match"] = etag_path.read_text().strip()
        response = http_request(config, "GET", "/api/v1/policy-bundle" + query, headers=headers)
        if response.status == 304:
            continue
        if response.status != 200:
            raise Unsent(f"policy bundle: HTTP {response.status} {response.body[:300]!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(response.body)
        temporary.replace(path)
        etag_path.write_text(response.headers.get("etag", ""))
        changed = True
    return changed


# --- command line ---------------------------------------------------------------------


def command_report(config: Config, args: argparse.Namespace) -> int:
    """Never fails closed: whatever breaks, the kdump tooling still gets a dump decision."""
    if args.dmesg_file:
        config.dmesg_file = args.dmesg_file
    report_id = ""
    try:
        report = crash_kernel_report(config, read_kernel_log(config))
        report_id = report["report_id"]
        decision = decide(config, report)
    except Exception as error:  # the crash kernel must dump rather than die here
        log(f"reporter failed ({type(error).__name__}: {error}): fallback decision")
        decision = Decision(config.fallback_action, "reporter failed", None, "fallback")
    print(write_decision(config, decision, report_id))
    return EXIT_SKIP if decision.action == "skip" else EXIT_DUMP


def command_collect(config: Config, args: argparse.Namespace) -> int:
    """Core collector: makedumpfile with the decided arguments, then record the capture."""
    try:
        decided = parse_conf(Path(config.decision_file).read_text())
    except OSError:
        decided = {}
    if decided.get("CRASHREG_ACTION") == "skip":
        log("registry decision is skip: no dump")
        return 0
    fallback = [*shlex.split(config.compression), "-d", str(config.filtered_level)]
    decided_args = shlex.split(decided.get("CRASHREG_MAKEDUMPFILE_ARGS", "")) or fallback
    started = time.monotonic()
    import subprocess

    returncode = subprocess.run([config.makedumpfile, *decided_args, *args.args], check=False).returncode
    report_id = decided.get("CRASHREG_REPORT_ID")
    if not report_id:
        return returncode
    target = args.args[-1] if args.args and args.args[-1] not in (config.vmcore, "/proc/vmcore") else None
    level = decided_args[decided_args.index("-d") + 1] if "-d" in decided_args else None
    capture = {
        "method": "makedumpfile",
        "status": "completed" if returncode == 0 else "failed",
        "dump_level": int(level) if level else None,
        "bytes": Path(target).stat().st_size if target and Path(target).exists() else None,
        "duration_s": round(time.monotonic() - started, 3),
        "downtime_s": crash_kernel_uptime(),
        "target": target,
        "capture_key": f"{report_id}-makedumpfile",
    }
    record_capture(config, report_id, decided.get("CRASHREG_EVENT_ID") or None, capture,
                   upload_now=config.kdump_upload == "now")
    return returncode


def crash_kernel_uptime() -> float | None:
    """Seconds the host has spent in the crash kernel: the downtime so far."""
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def record_capture(config: Config, report_id: str, event_id: str | None, capture: dict[str, Any],
                   upload_now: bool = True) -> None:
    """Record the capture with its event now and upload its dump (or spool the upload), or spool
    the capture for the post-boot agent (which records it, then uploads)."""
    if event_id:
        try:
            recorded = send_capture(config, event_id, capture)
            log(f"capture recorded: {capture['status']}, {capture['bytes']} bytes")
            upload_dump(config, report_id, recorded, now=upload_now)
            return
        except Unsent as error:
            log(f"capture not recorded: {error}")
    # One file per capture: a core handler's report can have two (a full core over its cap,
    # then the bounded one); the crash kernel's single one keeps the sh reporter's name.
    method = "" if capture["method"] == "makedumpfile" else f".{capture['method']}"
    path = Path(config.spool_dir) / f"{safe_report_id(report_id)}{method}.capture"
    spool_for_post_boot(path, {"event_id": event_id, "report_id": report_id, "capture": capture}, "capture")


def spool_for_post_boot(path: Path, spooled: dict[str, Any], what: str) -> None:
    """Leave `spooled` in the spool for the post-boot agent (resend_spooled)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spooled))
        log(f"{what} spooled for the post-boot agent")
    except OSError as error:
        log(f"could not spool the {what}: {error}")


REMOVED_REASON = "deleted by the core handler to keep its directory under CRASHREG_CORE_DIR_MAX_BYTES"


def record_removed(config: Config, capture_keys: list[str]) -> None:
    """Tell the registry that these captures' cores are gone (the directory's cap deleted them),
    or spool the notice for the post-boot agent."""
    try:
        send_removed(config, capture_keys)
        log(f"removal of {', '.join(capture_keys)} recorded")
        return
    except Unsent as error:
        log(f"removal of {', '.join(capture_keys)} not recorded: {error}")
    path = Path(config.spool_dir) / f"{safe_report_id(capture_keys[0])}.removed"
    spool_for_post_boot(path, {"capture_keys": capture_keys}, "removal")


def send_removed(config: Config, capture_keys: list[str]) -> None:
    if not config.url:
        raise Unsent("no registry URL configured")
    body = json.dumps({"capture_keys": capture_keys, "reason": REMOVED_REASON}).encode()
    post_with_retries(config, "/api/v1/captures/removed", body)


def resend_removed(config: Config, path: Path) -> str:
    """A spooled removal notice (after the captures it names, which it may follow)."""
    try:
        send_removed(config, json.loads(path.read_bytes())["capture_keys"])
    except Unsent as error:
        return set_aside(path, error)
    path.unlink()
    log(f"{path.name}: removal recorded")
    return "sent"


def command_post_boot(config: Config, args: argparse.Namespace) -> int:
    from kernellog import pstore  # imports this module: loaded once this one is

    summary = resend_spooled(config)
    log(f"resent {summary.sent}, kept {summary.kept} for later, rejected {summary.rejected}")
    # pstore's records wait (in pstore) while a crash report is still spooled: see PSTORE_REPORT_PREFIX.
    unsent = pstore.report_records(config, hold=summary.reports_kept > 0)
    return EXIT_UNSENT if summary.kept or unsent else 0


def command_watch(config: Config, args: argparse.Namespace) -> int:
    from kernellog import watch  # imports this module: loaded once this one is

    if args.kmsg:
        config.kmsg = args.kmsg
    return watch.run(config, once=args.once)


def command_fetch_bundle(config: Config, args: argparse.Namespace) -> int:
    try:
        changed = fetch_bundle(config)
    except (Unsent, OSError) as error:
        log(str(error))
        return EXIT_UNSENT
    log("policy bundle updated" if changed else "policy bundle unchanged")
    return 0


def fingerprint_input(raw: bytes, limit: int) -> tuple[str | None, dict[str, Any] | None]:
    """(console log, stack) of a file: a contract report (a spooled one, say), else a console
    log, tail-capped like the crash kernel's own."""
    try:
        report = json.loads(raw)
    except ValueError:
        report = None
    if not isinstance(report, dict):
        return tail_text(raw, limit), None
    stack = report.get("stack")
    return report.get("console_log"), stack if isinstance(stack, dict) else None


def command_fingerprint(config: Config, args: argparse.Namespace) -> int:
    for name in args.files:
        print(local_fingerprint(*fingerprint_input(Path(name).read_bytes(), config.max_log_bytes)) or "")
    return 0


def decide_or_fall_back(config: Config, report: dict[str, Any]) -> Decision:
    """A decision whatever breaks, as for a crash kernel."""
    try:
        return decide(config, report)
    except Exception as error:
        log(f"reporter failed ({type(error).__name__}: {error}): fallback decision")
        return Decision(config.fallback_action, "reporter failed", None, "fallback")


def command_core(config: Config, args: argparse.Namespace) -> int:
    return command_core_pipe(config, args) if args.pipe else command_core_file(config, args)


def command_core_pipe(config: Config, args: argparse.Namespace) -> int:
    """Pipe mode, the kernel's core_pattern handler: coredump/pipe.py (agents/README.md)."""
    from coredump import pipe  # an agent package the zipapp carries

    settings = pipe.Settings(directory=config.core_dir, max_bytes=config.core_max_bytes,
                             keep_free=config.core_keep_free, compression=config.core_compression,
                             range_bytes=config.core_range_bytes,
                             directory_max_bytes=config.core_dir_max_bytes, chain=config.core_chain,
                             log_device=config.core_log)
    return pipe.handle(
        args.pipe,
        settings,
        config.hostname or socket.gethostname() or "unknown",
        lambda report: decide_or_fall_back(config, report),
        lambda report_id, event_id, capture: record_capture(config, report_id, event_id, capture),
        lambda capture_keys: record_removed(config, capture_keys),
    )


def command_core_file(config: Config, args: argparse.Namespace) -> int:
    """File mode: report a core on disk and print the decision (exit 10: skip, the core can
    go). A core that cannot be read is an error (exit 1): there is nothing to report."""
    from coredump import core_file_report  # an agent package the zipapp carries
    from coredump.filemode import BadTime

    try:
        report = core_file_report(args.core, config.hostname or socket.gethostname() or "unknown", args.exe,
                                  args.crashed_at, args.started_at)
    except BadTime as error:
        log(f"core {args.core}: {error}")
        return 2
    except Exception as error:  # a broken or hostile core: say so, never a traceback
        log(f"cannot read the core {args.core}: {type(error).__name__}: {error}")
        return 1
    decision = decide_or_fall_back(config, report)
    level = f" (dump level {decision.dump_level})" if decision.dump_level is not None else ""
    log(f"{report['report_id']}: {decision.action}{level} by {decision.decided_by}: {decision.reason}")
    print(json.dumps({"report_id": report["report_id"], "fingerprint": report.get("fingerprint"),
                      "action": decision.action, "dump_level": decision.dump_level,
                      "decided_by": decision.decided_by, "event_id": decision.event_id}))
    return EXIT_SKIP if decision.action == "skip" else EXIT_DUMP


COMMANDS = {
    "report": command_report,
    "collect": command_collect,
    "post-boot": command_post_boot,
    "fetch-bundle": command_fetch_bundle,
    "fingerprint": command_fingerprint,
    "watch": command_watch,
    "core": command_core,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="default: $CRASHREG_CONF, else /etc/crashreg/reporter.conf")
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="crash kernel: report, decide, print makedumpfile args")
    report.add_argument("--dmesg-file", help="read the kernel log from this file, not the vmcore")
    sub.add_parser("collect", help="core collector: makedumpfile with the decided arguments, then ARGS")
    sub.add_parser("post-boot", help="resend spooled reports and captures")
    sub.add_parser("fetch-bundle", help="refresh the offline policy bundle")
    fingerprint = sub.add_parser("fingerprint", help="print the local fingerprint of console logs "
                                 "or JSON report files, one line each (empty: no crash)")
    fingerprint.add_argument("files", nargs="+")
    watch = sub.add_parser("watch", help="report the running kernel's oopses and warnings (kmsg)")
    watch.add_argument("--kmsg", help="kmsg records to follow (default: CRASHREG_KMSG, /dev/kmsg)")
    watch.add_argument("--once", action="store_true", help="stop at the end of a file of records")
    core = sub.add_parser("core", help="report a userspace core: a file (file mode, prints the decision) "
                          "or stdin as kernel.core_pattern pipes it (pipe mode)")
    source = core.add_mutually_exclusive_group(required=True)
    source.add_argument("--core", help="an ELF core file")
    source.add_argument("--pipe", nargs="+", metavar="VALUE",
                        help="the core on stdin, and the values of %%P %%I %%s %%t %%c %%u %%g %%d %%h %%E")
    core.add_argument("--exe", help="the program's file, when not at the path the core names")
    core.add_argument("--crashed-at", metavar="WHEN", help="file mode: when it crashed (ISO 8601 or @EPOCH; "
                      "default: systemd-coredump's user.coredump.timestamp, else the core's mtime)")
    core.add_argument("--started-at", metavar="WHEN", help="file mode: when the process started (ISO 8601 "
                      "or @EPOCH): the report then carries its start and its uptime at the crash")
    argv = sys.argv[1:] if argv is None else argv
    # Everything after `collect` is makedumpfile's, options included.
    split = argv.index("collect") + 1 if "collect" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.args = argv[split:]
    return COMMANDS[args.command](Config.load(args.config), args)


if __name__ == "__main__":
    sys.exit(main())
