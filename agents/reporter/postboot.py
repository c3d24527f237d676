"""The post-boot agent's resend: every spooled report, then every spooled capture, removal
and upload, and the captures Debian's kdump-tools made itself. A resend reuses the spooled
body byte for byte: same report_id, same payload, so the registry replays or joins it and
never stores a crash twice."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.reporter.captures import resend_capture, resend_removed, send_capture, upload_dump, upload_spooled
from agents.reporter.client import Unsent, send_report_body
from agents.reporter.config import Config
from agents.reporter.log import log
from agents.reporter.spool import prune_sent, replayed, resend


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
        outcome, answer = resend(config, path)
        outcomes.append(outcome)
        if answer is None:
            reports_kept += outcome == "kept"
            continue
        events[path.stem] = answer["event_id"]
        log(f"{path.name}: event {answer['event_id']}{replayed(answer)}")
    for path in sorted(spool_dir.glob("*.capture")):
        outcomes.append(resend_capture(config, path, events))
    for path in sorted(spool_dir.glob("*.removed")):
        outcomes.append(resend_removed(config, path))
    from agents.reporter.upload import STATE_SUFFIX

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
