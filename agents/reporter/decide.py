"""The capture decision: the registry's answer, else the offline policy bundle's, else the
fallback; and what kdump's tools are told of it (makedumpfile arguments, the decision file)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.reporter.bundle import load_bundle
from agents.reporter.client import Unsent
from agents.reporter.config import Config
from agents.reporter.files import write_atomically
from agents.reporter.log import log
from agents.reporter.report import local_fingerprint
from agents.reporter.spool import deliver

ACTIONS = ("full", "filtered", "skip")


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str
    dump_level: int | None
    decided_by: str  # registry | bundle | fallback
    event_id: str | None = None
    duplicate: bool = False  # the registry had this report already: its first answer, again
    # the registry's signature (id, fingerprint, title): its name for the bug, which a
    # reporter's own fingerprint, read before the registry's symbols, may not be
    signature: dict[str, Any] | None = None


SIGNATURE_NAMES = ("id", "fingerprint", "title")


def registry_decision(answer: dict[str, Any]) -> Decision:
    capture = answer.get("capture") or {}
    action = capture.get("action")
    if action not in ACTIONS:
        raise Unsent(f"unreadable capture answer {capture!r}")
    signature = answer.get("signature")
    named = {key: signature.get(key) for key in SIGNATURE_NAMES} if isinstance(signature, dict) else None
    return Decision(action, capture.get("reason", ""), capture.get("dump_level"), "registry",
                    answer.get("event_id"), answer.get("duplicate") is True, named)


def bundle_decision(config: Config, fingerprint: str | None) -> Decision:
    """The offline answer: the bundle's entry for this fingerprint, else its `unknown` rule; a
    report the engine finds no crash in (no fingerprint) takes its `no_signature` rule (the
    budget of reports without a signature; a bundle from before it has none: `unknown`)."""
    bundle = load_bundle(config.bundle_json)
    if bundle is None:
        return Decision(config.fallback_action, "no answer from the registry and no policy bundle", None,
                        "fallback")
    entries = {entry["fingerprint"]: entry for entry in bundle.get("entries", [])}
    entry = entries.get(fingerprint or "")
    if entry is not None:
        reason = f"offline: policy bundle {bundle.get('version')} entry for {fingerprint}"
        return Decision(entry["action"], reason, entry.get("dump_level"), "bundle")
    rule = ((bundle.get("no_signature") if fingerprint is None else None) or bundle.get("unknown")
            or {"action": "full", "reason": "a new bug"})
    return Decision(rule["action"], f"offline: {rule.get('reason', '')}", rule.get("dump_level"), "bundle")


def filtered_level(config: Config, decision: Decision) -> int:
    """The dump level a filtered dump is taken at: the answer's, else the config's."""
    return decision.dump_level if decision.dump_level is not None else config.filtered_level


def makedumpfile_args(config: Config, decision: Decision) -> list[str]:
    """full: every page (-d 0); filtered: the answer's dump level; skip: no dump at all."""
    levels = {"full": 0, "filtered": filtered_level(config, decision)}
    if decision.action not in levels:
        return []
    return [*shlex.split(config.compression), "-d", str(levels[decision.action])]


def write_decision(config: Config, decision: Decision, report_id: str) -> str:
    """The sourced env file kdump hooks read (same keys as the sh reporter); returns the args."""
    args = shlex.join(makedumpfile_args(config, decision))
    level = filtered_level(config, decision) if decision.action == "filtered" else decision.dump_level
    values = {
        "CRASHREG_ACTION": decision.action,
        "CRASHREG_DUMP_LEVEL": "" if level is None else str(level),
        "CRASHREG_REASON": decision.reason,
        "CRASHREG_DECIDED_BY": decision.decided_by,
        "CRASHREG_EVENT_ID": decision.event_id or "",
        "CRASHREG_REPORT_ID": report_id,
        "CRASHREG_MAKEDUMPFILE_ARGS": args,
        "MAKEDUMP_ARGS": args,
    }
    try:
        write_atomically(Path(config.decision_file),
                         "".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items()))
    except OSError as error:
        log(f"could not write {config.decision_file}: {error}")
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


def decide_or_fall_back(config: Config, report: dict[str, Any]) -> Decision:
    """A decision whatever breaks, as for a crash kernel."""
    try:
        return decide(config, report)
    except Exception as error:
        return fall_back(config, error)


def fall_back(config: Config, error: Exception) -> Decision:
    """What the reporter answers when it broke: CRASHREG_FALLBACK_ACTION, said so."""
    log(f"reporter failed ({type(error).__name__}: {error}): fallback decision")
    return Decision(config.fallback_action, "reporter failed", None, "fallback")
