"""The spool (CRASHREG_SPOOL_DIR): report bodies kept byte for byte for a resend or a replay
(unsent in the spool, delivered in sent/, refused in rejected/), and what waits there for the
post-boot agent."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents.reporter.client import Unsent, report_body, send_report_body
from agents.reporter.config import Config
from agents.reporter.files import write_atomically
from agents.reporter.log import log
from agents.reporter.report import safe_report_id, tail_text

SENT_RETENTION_S = 7 * 86400
TOO_LARGE = 413
BAD_REQUEST = 400
# What a report does without, in this order, when the registry refuses it as too large: the
# other threads' stacks (which no fingerprint reads), then the mappings, then the older half of
# its console log, again and again down to its last MIN_CONSOLE_LOG_BYTES. The crash reaches
# the registry without them rather than not at all.
SLIMMER = (("the other threads' stacks", "threads"), ("the mappings", "mappings"))
# A console log within the contract's 1 MiB can still pass a 2 MiB body once written as JSON:
# each control character is six bytes there (an ANSI-coloured console's ESC, a noisy serial
# line's bytes): a 413. One spooled by crashreg-kdump.sh can pass the 1 MiB itself (each byte
# that is not UTF-8 is U+FFFD, three bytes): a 400 naming console_log. Its tail holds the
# crash: an oops with its stack and the lines before it.
MIN_CONSOLE_LOG_BYTES = 16 * 1024


def kept_path(config: Config, report_id: str, folder: str = ".") -> Path:
    """Where a report body is kept: the spool itself (unsent) or its sent/ folder."""
    return Path(config.spool_dir) / folder / f"{safe_report_id(report_id)}.json"


def keep(config: Config, report_id: str, body: bytes, folder: str = ".") -> Path:
    """Keep the exact body (written atomically) for a resend or a replay."""
    return write_atomically(kept_path(config, report_id, folder), body)


def slimmed(report: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The report without one more of SLIMMER's parts at a time (those it has), then with its
    console log's newer half, and so on while it is past MIN_CONSOLE_LOG_BYTES."""
    for what, part in SLIMMER:
        stack = report.get("stack")
        if isinstance(stack, dict) and stack.get(part):
            report = report | {"stack": {key: value for key, value in stack.items() if key != part}}
            yield what, report
    console_log = report.get("console_log")
    while isinstance(console_log, str) and len(encoded := console_log.encode()) > MIN_CONSOLE_LOG_BYTES:
        console_log = tail_text(encoded, len(encoded) // 2)
        report = report | {"console_log": console_log}
        yield f"the older half of its console log ({len(console_log.encode())} bytes left)", report


def slimmer_bodies(body: bytes) -> Iterator[tuple[str, bytes]]:
    """`body` as sent, then the report's body without each of SLIMMER's parts in turn (what is
    left out, the body)."""
    yield "", body
    try:
        report = json.loads(body)
    except ValueError:  # not a report this reporter wrote: nothing to leave out
        return
    for what, smaller in slimmed(report):
        yield what, report_body(smaller)


def too_large(error: Unsent) -> bool:
    """Refused for its size: the body (413), or its console log (a 400 naming it)."""
    return error.status == TOO_LARGE or (error.status == BAD_REQUEST and "console_log" in error.fields)


def sent_within_limit(config: Config, body: bytes) -> tuple[dict[str, Any], bytes]:
    """The registry's answer to `body` and the body it took: refused as too large, the report
    again without SLIMMER's parts, one more at a time, all within one CRASHREG_DEADLINE.
    Unsent otherwise."""
    refused: Unsent | None = None
    until = time.monotonic() + config.deadline  # one deadline for the delivery, slimmer bodies too
    for what, candidate in slimmer_bodies(body):
        if refused is not None:
            log(f"the registry refused the report as too large ({len(body)} bytes): "
                f"sending it without {what}")
        try:
            return send_report_body(config, candidate, until), candidate
        except Unsent as error:
            if not too_large(error):
                raise
            refused, body = error, candidate
    assert refused is not None  # slimmer_bodies yields the body itself first
    raise refused


def deliver(config: Config, report: dict[str, Any]) -> dict[str, Any] | None:
    """Send a report and keep its body: in sent/ when delivered (a rerun for the same crash
    replays it instead of clashing with it), in the spool for the post-boot resend when not."""
    report_id = report["report_id"]
    unsent, sent = kept_path(config, report_id), kept_path(config, report_id, "sent")
    kept = next((path for path in (unsent, sent) if path.exists()), None)
    body = kept.read_bytes() if kept else report_body(report)
    try:
        answer, body = sent_within_limit(config, body)
    except Exception as error:  # whatever broke the sending (a bad setting too): kept, not lost
        problem = str(error) if isinstance(error, Unsent) else f"{type(error).__name__}: {error}"
        log(f"report not delivered: {problem}")
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


def resend(config: Config, path: Path) -> tuple[str, dict[str, Any] | None]:
    """Send a spooled report's exact body (or, refused as too large, sent_within_limit's):
    ("sent", the answer) once delivered, the body taken kept in sent/; ("skipped", None) when
    another drainer (the watcher, the post-boot timer, a manual run) has it or has moved it
    already; else set_aside's outcome and None. Each file is sent under an advisory lock
    (flock), so two drainers at once never send one report concurrently, and a file that
    vanishes between the listing, the read and the move is left to whoever moved it."""
    import fcntl

    try:
        spooled = path.open("rb")
    except FileNotFoundError:
        return "skipped", None
    with spooled:
        try:
            fcntl.flock(spooled, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"{path.name}: being sent by another process")
            return "skipped", None
        if not _still_at(path, spooled.fileno()):  # sent and moved by another drainer meanwhile
            return "skipped", None
        body = spooled.read()
        try:
            answer, taken = sent_within_limit(config, body)
        except Unsent as error:
            return set_aside(path, error), None
        # Moved meanwhile by another drainer that sent it too (the same report_id): not an error.
        with contextlib.suppress(FileNotFoundError):
            if taken != body:  # kept as the registry took it, for a replay
                write_atomically(path, taken)
            (path.parent / "sent").mkdir(exist_ok=True)
            path.replace(path.parent / "sent" / path.name)
        return "sent", answer


def _still_at(path: Path, fd: int) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        return path.stat().st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def replayed(answer: dict[str, Any]) -> str:
    return " (already registered)" if answer.get("duplicate") else ""


def set_aside(path: Path, error: Unsent) -> str:
    """An undelivered spool file: kept for the next run, or moved to rejected/ if refused."""
    log(f"{path.name}: {error}")
    if not error.refused:
        return "kept"
    (path.parent / "rejected").mkdir(exist_ok=True)
    with contextlib.suppress(FileNotFoundError):  # moved by another drainer meanwhile
        path.replace(path.parent / "rejected" / path.name)
    return "rejected"


def spool_for_post_boot(path: Path, spooled: dict[str, Any], what: str) -> None:
    """Leave `spooled` in the spool for the post-boot agent (resend_spooled)."""
    try:
        write_atomically(path, json.dumps(spooled))
        log(f"{what} spooled for the post-boot agent")
    except OSError as error:
        log(f"could not spool the {what}: {error}")


def prune_sent(folder: Path) -> None:
    """Sent copies only serve reruns for a recent crash; drop them after a week."""
    cutoff = time.time() - SENT_RETENTION_S
    for path in folder.glob("*.json"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                path.with_suffix(".examined").unlink(missing_ok=True)
        except FileNotFoundError:  # pruned by another drainer meanwhile
            continue
