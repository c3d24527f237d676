"""What crashreg writes into Jira: labels, link ids, the facts block, comments. Pure text.

The description's facts live between two marker lines the registry owns; everything an
engineer writes outside them survives every update.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime

from registry.rca.service import RcaMessage

CRASHREG_LABEL = "crashreg"
SIGNATURE_LABEL_PREFIX = "crashreg-sig-"
# Plain-text markers: they survive Cloud's wiki-markup <-> ADF round trip, where macros
# such as {panel} or {anchor} may not come back as written.
BLOCK_BEGIN = "crashreg facts (begin): maintained by crashreg, edits up to the end marker are replaced"
BLOCK_END = "crashreg facts (end)"
SUMMARY_LIMIT = 254


@dataclass(frozen=True)
class Facts:
    """The fleet's view of one signature, as shown in its Jira issue."""

    title: str
    fingerprint: str
    status: str
    first_seen: str
    last_seen: str
    events: int
    hosts: int
    registry_url: str
    kernels: list[tuple[str, int]] = field(default_factory=list)
    regions: list[tuple[str, int]] = field(default_factory=list)
    skus: list[tuple[str, int]] = field(default_factory=list)
    captures: list[tuple[str, int]] = field(default_factory=list)
    verdict: str | None = None


def parse_jira_time(text: str | None) -> datetime | None:
    """Jira's timestamps: 2026-11-29T12:00:00.000+0000."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z") if text else None


def signature_label(fingerprint: str) -> str:
    return f"{SIGNATURE_LABEL_PREFIX}{fingerprint}"


def fingerprint_from_labels(labels: list[str]) -> str | None:
    """The signature an issue belongs to, read from Jira alone (for recovering lost links)."""
    for label in labels:
        if label.startswith(SIGNATURE_LABEL_PREFIX):
            return label[len(SIGNATURE_LABEL_PREFIX):]
    return None


def global_id(fingerprint: str) -> str:
    """Stable per signature: re-posting the remote link updates it instead of adding one."""
    return f"crashreg:signature:{fingerprint}"


def summary_line(title: str) -> str:
    """Jira summaries are one line of at most 255 characters."""
    flat = " ".join(title.split())
    return flat if len(flat) <= SUMMARY_LIMIT else flat[: SUMMARY_LIMIT - 1] + "…"


def _counts(rows: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ({count})" for name, count in rows) or "none recorded"


def render_facts(facts: Facts) -> str:
    rows = [
        ("Status in crashreg", facts.status),
        ("Fingerprint", f"{{{{{facts.fingerprint}}}}}"),
        ("First seen", facts.first_seen),
        ("Last seen", facts.last_seen),
        ("Events", str(facts.events)),
        ("Hosts", str(facts.hosts)),
        ("Top kernel versions", _counts(facts.kernels)),
        ("Regions", _counts(facts.regions)),
        ("SKUs", _counts(facts.skus)),
        ("Captures", _counts(facts.captures)),
        ("Epidemiology", facts.verdict or "not analysed yet"),
        ("Registry", f"[{facts.registry_url}]"),
    ]
    table = "\n".join(f"||{name}|{value.replace('|', '/')}|" for name, value in rows)
    return f"{BLOCK_BEGIN}\n{table}\n{BLOCK_END}"


def facts_digest(block: str) -> str:
    return hashlib.sha256(block.encode()).hexdigest()


def merge_description(current: str | None, block: str) -> str:
    """Replace our block in `current`, keeping every other line; put it first if absent."""
    text = current or ""
    start = text.find(BLOCK_BEGIN)
    end = text.find(BLOCK_END, start) if start >= 0 else -1
    if start < 0 or end < 0:
        return f"{block}\n\n{text.strip()}\n" if text.strip() else block
    return text[:start] + block + text[end + len(BLOCK_END):]


def marker(kind: str, ident: str | int) -> str:
    """A tag ending every comment crashreg posts, so a retried post can see it already landed."""
    return f"[crashreg:{kind}:{ident}]"


# How every marker opens. Text a comment quotes has it as "(crashreg:" instead.
MARKER_OPENING = re.compile(r"\[(\s*crashreg\s*:)", re.IGNORECASE)


def quoted(value: object) -> str:
    """Text from people, agents or hosts (an RCA's summary, a hostname) as a comment quotes it:
    it cannot carry a marker, which would make the comment it names look posted already."""
    return MARKER_OPENING.sub(r"(\1", str(value))


def ends_with_marker(comment: str, tag: str) -> bool:
    """Whether `comment` carries `tag` where crashreg writes it: alone on its last line."""
    lines = comment.strip().splitlines()
    return bool(lines) and lines[-1].strip() == tag


REOPEN_SENTENCES = {
    "reopened": "crashreg reopened this issue.",
    "already-open": "The issue was already open.",
    "not-reopened": "crashreg did not reopen it (no transition out of done is configured or "
    "available to it).",
}


def regression_comment(
    hostname: str, kernel: str | None, crashed_at: str, fixed_in: str | None, reopen: str,
    event_id: int,
) -> str:
    fix = f"the fix (kernel {quoted(fixed_in)})" if fixed_in else "the resolution"
    return (
        f"*Regression*: crashreg saw this crash again on {quoted(hostname)} "
        f"(kernel {quoted(kernel or 'unknown')}) at {crashed_at}, after {fix}. "
        f"{REOPEN_SENTENCES[reopen]}\n{marker('regression', event_id)}"
    )


def rca_comment(rca: RcaMessage) -> str:
    """The `rca.confirmed` outbox payload as a comment."""
    lines = [f"*Confirmed root cause*: {quoted(rca.get('summary') or '(no summary)')}"]
    details = [
        ("Author", rca.get("author") and f"{rca['author']} ({rca.get('author_kind') or 'human'})"),
        ("Confirmed by", rca.get("reviewer")),
        ("Review note", rca.get("note")),
        ("Fix commit", rca.get("fix_commit")),
        ("Fixed in kernel", rca.get("fixed_in_kernel")),
        ("Details", rca.get("url")),
    ]
    lines += [f"* {name}: {quoted(value)}" for name, value in details if value]
    lines.append(marker("rca", str(rca.get("rca_id"))))
    return "\n".join(lines)


def flagged_rca_comment(rca: RcaMessage) -> str:
    """The `rca.flagged` outbox payload: an RCA whose cited evidence the registry could not verify."""
    lines = [
        f"*RCA flagged by crashreg's evidence checks*: {quoted(rca.get('summary') or '(no summary)')}",
        f"* Author: {quoted(rca.get('author'))} ({quoted(rca.get('author_kind') or 'human')})",
    ]
    failed = rca.get("failed_checks") or []
    lines += [f"* Failed check {quoted(check.get('name'))}: {quoted(check.get('message'))}"
              for check in failed]
    lines.append("Treat its claims as unverified until a human reviews the evidence.")
    if rca.get("url"):
        lines.append(f"* Details: {quoted(rca['url'])}")
    lines.append(marker("rca-flagged", str(rca.get("rca_id"))))
    return "\n".join(lines)


def merged_marker(other_id: int, survivor_id: int) -> str:
    return marker("merged", f"{other_id}-{survivor_id}")


def merged_comment(survivor_id: int, survivor_url: str, survivor_key: str | None, other_id: int) -> str:
    """On the issue of a signature merged into another (POST /signatures/{id}/merge): where its
    crashes are counted from now on; its own facts stay as they were last written."""
    where = f"{survivor_key} ({survivor_url})" if survivor_key else survivor_url
    return (
        f"*Merged*: crashreg merged this signature into signature {survivor_id}; its crashes are "
        f"counted there from now on: {where}. The facts above are no longer updated.\n"
        f"{merged_marker(other_id, survivor_id)}"
    )
