"""The offline policy bundle: every known fingerprint and what a crash kernel should do now.

Hosts fetch it periodically (ETag / If-None-Match) and bake it into the kdump initramfs, so
a crash kernel with no network still decides: a known bug by its entry, a new one by `unknown`,
a report it finds no crash in by `no_signature` (the budget of reports without a signature, the
fleet's and, for a bundle fetched with `?host=`, that host's). The format is documented in docs/capture.md
("Offline policy bundle"); `version` hashes the answers only, so it changes iff an answer does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.capture.decide import facts_of, limits_of, read_all_slots
from registry.capture.no_signature import offline_answer
from registry.capture.policy import CaptureAnswer, claimable_slots, offline_action, window_start
from registry.config import Settings
from registry.core.signatures import Signature, SignatureAlias
from registry.db import utcnow

FORMAT = "crashreg-policy-bundle"
FORMAT_VERSION = 1
UNKNOWN: CaptureAnswer = {
    "action": "full", "reason": "fingerprint not in the bundle: a new bug", "dump_level": None
}
# The text form's line for a report with no recognisable crash: a comment to older reporters.
NO_SIGNATURE_LINE = "#no_signature"


@dataclass(frozen=True)
class BundleEntry:
    fingerprint: str
    signature_id: str
    action: str
    dump_level: int | None
    function: str | None
    title: str


class BundleJson(TypedDict):
    """GET /api/v1/policy-bundle as JSON."""

    format: str
    format_version: int
    version: str
    generated_at: str
    unknown: CaptureAnswer  # the answer for a fingerprint not in the bundle
    no_signature: CaptureAnswer  # the answer for a report with no recognisable crash
    entries: list[dict[str, Any]]  # BundleEntry's fields


@dataclass(frozen=True)
class Bundle:
    version: str
    generated_at: datetime
    entries: list[BundleEntry]
    no_signature: CaptureAnswer

    def as_json(self) -> BundleJson:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "version": self.version,
            "generated_at": self.generated_at.isoformat(),
            "unknown": UNKNOWN,
            "no_signature": self.no_signature,
            "entries": [asdict(entry) for entry in self.entries],
        }

    def as_text(self) -> str:
        """One header line, the no-signature line, then TAB-separated lines a POSIX shell can
        `read`."""
        header = "\t".join(["#" + FORMAT, str(FORMAT_VERSION), self.version, self.generated_at.isoformat()])
        answer = self.no_signature
        level = "-" if answer["dump_level"] is None else str(answer["dump_level"])
        no_signature = [NO_SIGNATURE_LINE, answer["action"], level, "-", _one_line(answer["reason"])]
        lines = [header, "\t".join(no_signature)]
        for entry in self.entries:
            fields = [
                entry.fingerprint,
                entry.action,
                "-" if entry.dump_level is None else str(entry.dump_level),
                entry.function or "-",
                entry.title,
            ]
            lines.append("\t".join(_one_line(field) for field in fields))
        return "\n".join(lines) + "\n"


def _one_line(value: str) -> str:
    return " ".join(value.split()) or "-"


def content_version(entries: list[BundleEntry], no_signature: CaptureAnswer) -> str:
    answers = [no_signature, [asdict(e) for e in entries]]
    canonical = json.dumps(answers, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{FORMAT_VERSION}|{canonical}".encode()).hexdigest()[:20]


def build_bundle(session: Session, settings: Settings, hostname: str | None = None) -> Bundle:
    """The current offline answer for every fingerprint that routes to a live signature, and
    for a report with no recognisable crash (for this host, when named)."""
    limits = limits_of(settings)
    now = utcnow()
    signatures = {s.id: s for s in session.scalars(select(Signature))}
    slots = read_all_slots(session)
    actions: dict[int, tuple[str, int | None]] = {}
    for signature in signatures.values():
        if signature.merged_into_id is not None:
            continue
        facts = facts_of(signature)
        free = claimable_slots(slots.get(signature.id, []), limits, now, window_start(now, limits, facts))
        decision = offline_action(facts, limits, len(free))
        actions[signature.id] = (decision.action, decision.dump_level)
    routes = {s.fingerprint: s.id for s in signatures.values()}
    aliases = session.execute(select(SignatureAlias.fingerprint, SignatureAlias.signature_id))
    routes.update(dict(aliases.all()))
    entries = []
    for fingerprint, signature_id in sorted(routes.items()):
        canonical = _canonical(signatures, signature_id)
        if canonical is None:
            continue
        action, dump_level = actions[canonical.id]
        entries.append(
            BundleEntry(
                fingerprint, str(canonical.id), action, dump_level, canonical.function, canonical.title
            )
        )
    no_signature = offline_answer(session, settings, hostname).as_dict()
    return Bundle(content_version(entries, no_signature), now, entries, no_signature)


def _canonical(signatures: dict[int, Signature], signature_id: int) -> Signature | None:
    """Follow merges within the loaded rows (cycles and dangling ids give None)."""
    seen: set[int] = set()
    signature = signatures.get(signature_id)
    while signature is not None and signature.merged_into_id is not None:
        if signature.id in seen:
            return None
        seen.add(signature.id)
        signature = signatures.get(signature.merged_into_id)
    return signature
