"""Captures: recorded with their event (or spooled for the post-boot agent), their dumps
uploaded to the dump store (upload.py), and the removal of cores a cap deleted."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.reporter.client import Unsent, post_with_retries, send_report_body
from agents.reporter.config import Config
from agents.reporter.files import write_atomically
from agents.reporter.log import log
from agents.reporter.report import safe_report_id
from agents.reporter.spool import kept_path, set_aside, spool_for_post_boot


def record_capture(config: Config, report_id: str, event_id: str | None, capture: dict[str, Any],
                   upload_now: bool = True) -> None:
    """Record the capture with its event now and upload its dump (or spool the upload), or spool
    the capture for the post-boot agent (which records it, then uploads)."""
    if event_id:
        try:
            recorded = send_capture(config, event_id, capture)
            size = "no dump" if capture["bytes"] is None else f"{capture['bytes']} bytes"
            log(f"capture recorded: {capture['status']}, {size}")
            upload_dump(config, report_id, recorded, now=upload_now)
            return
        except Unsent as error:
            log(f"capture not recorded: {error}")
    # One file per capture: a core handler's report can have two (a full core over its cap,
    # then the bounded one); the crash kernel's single one keeps the sh reporter's name.
    method = "" if capture["method"] == "makedumpfile" else f".{capture['method']}"
    path = Path(config.spool_dir) / f"{safe_report_id(report_id)}{method}.capture"
    if capture["status"] != "completed" and spooled_status(path) == "completed":
        # A later run that failed does not undo a dump an earlier one took: its record stays.
        log("capture not spooled: a completed capture of this crash waits in the spool already")
        return
    spool_for_post_boot(path, {"event_id": event_id, "report_id": report_id, "capture": capture}, "capture")


def spooled_status(path: Path) -> str | None:
    """The status of the capture spooled at `path`, if one is."""
    try:
        return json.loads(path.read_bytes())["capture"]["status"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def send_capture(config: Config, event_id: str, capture: dict[str, Any]) -> dict[str, Any]:
    """Record a capture with its event; the registry's capture (its id names the upload)."""
    body = json.dumps(capture).encode()
    return post_with_retries(config, f"/api/v1/events/{event_id}/captures", body).json()


def resend_capture(config: Config, path: Path, events: dict[str, str]) -> str:
    """A spooled capture, once its event is known (from the crash kernel or a resend of its
    report: `events`, report_id -> event id)."""
    spooled = json.loads(path.read_bytes())
    report_id = spooled.get("report_id") or path.stem
    event_id = spooled.get("event_id") or events.get(report_id) or event_of_sent_report(config, report_id)
    if not event_id:
        if kept_path(config, report_id).exists() or kept_path(config, report_id, "sent").exists():
            log(f"{path.name}: its report is not delivered yet")
            return "kept"
        # Its report neither waits in the spool nor was delivered from here: no event will come.
        return set_aside(path, Unsent(f"its report {report_id} was neither spooled nor delivered", 404))
    try:
        recorded = send_capture(config, event_id, spooled["capture"])
    except Unsent as error:
        write_atomically(path, json.dumps({"event_id": event_id, "capture": spooled["capture"]}))
        return set_aside(path, error)
    path.unlink()
    log(f"{path.name}: capture recorded with event {event_id}")
    return upload_dump(config, path.stem, recorded) or "sent"


def event_of_sent_report(config: Config, report_id: str) -> str | None:
    """The event of a report delivered in an earlier run (its body kept in sent/), from a replay
    of it (the registry answers a replay with the first answer); None if it cannot be asked."""
    sent = kept_path(config, report_id, "sent")
    try:
        return str(send_report_body(config, sent.read_bytes())["event_id"])
    except (OSError, Unsent, KeyError, TypeError, ValueError):
        return None


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


def registry_post(config: Config) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The uploader's way to the registry: POST with retries; a refusal is an UploadError."""
    from agents.reporter.upload import UploadError

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return post_with_retries(config, path, json.dumps(body).encode()).json()
        except Unsent as error:
            raise UploadError(str(error)) from error

    return post


def upload_spooled(config: Config, state: Path) -> str:
    """Finish one upload the spool describes (from its first part or where it stopped); our
    compressed copy of a dump whose upload is refused goes (it holds the process's memory)."""
    from agents.reporter.upload import Uploader, UploadError, UploadState, remove_packed_copy

    uploader = Uploader(registry_post(config), threads=max(1, config.upload_threads),
                        timeout=max(config.max_time, 60.0), ca_file=config.ca_file or None, log=log)
    try:
        dump = uploader.upload(state)
    except (UploadError, OSError) as error:
        cause = error.__cause__
        outcome = set_aside(state, cause if isinstance(cause, Unsent) else Unsent(str(error)))
        if outcome == "rejected":
            with contextlib.suppress(UploadError, OSError, ValueError):
                remove_packed_copy(UploadState.read(state.parent / "rejected" / state.name))
        return outcome
    log(f"{state.name}: dump stored at {dump['uri']} ({dump['bytes']} bytes)")
    return "sent"


def upload_dump(config: Config, report_id: str, capture: dict[str, Any], now: bool = True) -> str | None:
    """A completed capture's dump file goes to the dump store; its progress is spooled. Not
    `now`: only the spooled state, which the post-boot agent uploads (upload_spooled)."""
    target = capture.get("target")
    wanted = config.upload_dumps and capture.get("status") == "completed"
    if not wanted or not target or not Path(target).is_file():
        return None
    from agents.reporter.upload import prepare

    try:
        state = prepare(Path(config.spool_dir), safe_report_id(report_id), capture["id"], Path(target))
    except OSError as error:
        log(f"could not prepare the upload of {target}: {error}")
        return "kept"
    if not now:
        log(f"{state.name}: upload spooled for the post-boot agent")
        return "spooled"
    return upload_spooled(config, state)
