"""The report itself: one skeleton, one hostname rule, one time format, one report_id rule,
and what is read from a kernel's console log (its tail, uptime, release, fingerprint)."""

from __future__ import annotations

import json
import re
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The contract's bound on console_log (registry/ingest/schemas.py): a longer log is a 400, the
# whole report refused, whatever CRASHREG_MAX_LOG_BYTES says.
MAX_CONSOLE_LOG_BYTES = 1024 * 1024


def within(text: str, limit: int, tail: bool = False) -> str:
    """`text` in at most `limit` UTF-8 bytes (so as many characters): its head, or its tail,
    never half a character."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return (data[-limit:] if tail else data[:limit]).decode("utf-8", "ignore")


def tail_text(raw: bytes, limit: int) -> str:
    """The last `limit` bytes as text (the crash is at the end), starting on a whole line, and
    within `limit` bytes as UTF-8 too (each byte that is not UTF-8 reads as U+FFFD, three) and
    within the contract's bound."""
    limit = min(limit, MAX_CONSOLE_LOG_BYTES)
    raw = raw.replace(b"\0", b"")
    if len(raw) > limit:
        raw = raw[-limit:]
        raw = raw[raw.find(b"\n") + 1 :]
    text = raw.decode("utf-8", "replace")
    cut = within(text, limit, tail=True)  # grown by replacement characters: cut again
    return cut if cut == text else cut[cut.find("\n") + 1 :]


def log_uptime(console_log: str) -> int | None:
    stamps = re.findall(r"^\[ *(\d+)\.\d+\]", console_log, re.MULTILINE)
    return int(stamps[-1]) if stamps else None


def log_kernel_version(console_log: str) -> str | None:
    match = re.search(r"Linux version (\S+)", console_log)
    return match.group(1) if match else None


TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    return datetime.now(UTC).strftime(TIME_FORMAT)


def safe_report_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:128]


def local_fingerprint(console_log: str | None, stack: dict[str, Any] | None = None) -> str | None:
    # The engine (the zipapp carries the package) compiles its rules when imported: a third of
    # a core handler's time to its answer, so only when a fingerprint is needed here.
    from registry.fingerprint import analyse_report

    signature = analyse_report(console_log, stack)
    return signature.fingerprint if signature else None


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


def iso_time(seconds: float) -> str:
    """The reports' one time format: seconds since the epoch as ISO 8601 UTC, to the second."""
    return datetime.fromtimestamp(seconds, UTC).strftime(TIME_FORMAT)


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


BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def boot_id_of(path: str = BOOT_ID_FILE) -> str | None:
    """The running boot's id as the kernel prints it; None where it cannot be read."""
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def hostname_of(*named: str | None) -> str:
    """The one hostname rule: the first one named (the config's, the crash kernel's command
    line's, the crashed kernel's own), else this machine's, else "unknown"."""
    return next((name for name in named if name), None) or socket.gethostname() or "unknown"


def report_skeleton(report_id: str, source: str, crashed_at: str, hostname: str, kernel_version: str | None,
                    boot_id: str | None, **fields: Any) -> dict[str, Any]:
    """The contract's report: identity, source, time, host, boot; `fields` add the evidence."""
    host: dict[str, Any] = {"hostname": hostname}
    if kernel_version:
        host["kernel_version"] = kernel_version
    return {"report_id": safe_report_id(report_id), "source": source, "crashed_at": crashed_at,
            "host": host, "boot_id": boot_id} | fields


def console_report(report_id: str, source: str, crashed_at: str, hostname: str, kernel_version: str | None,
                   boot_id: str | None, console_log: str, **fields: Any) -> dict[str, Any]:
    """A kernel's console log as a report: its uptime, release and fingerprint read from it."""
    return report_skeleton(
        report_id, source, crashed_at, hostname, kernel_version or log_kernel_version(console_log), boot_id,
        uptime_s=log_uptime(console_log), fingerprint=local_fingerprint(console_log), console_log=console_log,
        **fields)
