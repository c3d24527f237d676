"""Jira -> registry status mapping, by status category (never status name). Rules as data."""

from __future__ import annotations

from dataclasses import dataclass

# Resolutions (lower case) that mean "we will not fix this" rather than "fixed".
IGNORE_RESOLUTIONS = frozenset({"won't fix", "won't do", "wont fix", "wontfix", "won't do it"})
DUPLICATE_RESOLUTIONS = frozenset({"duplicate"})

# (Jira status category, current registry status) -> new registry status, when not done.
# Absent pairs leave the status alone (e.g. "regressed" stays until Jira resolves again).
OPEN_RULES: dict[tuple[str, str], str] = {
    ("new", "resolved"): "triaged",
    ("new", "ignored"): "triaged",
    ("indeterminate", "resolved"): "triaged",
    ("indeterminate", "ignored"): "triaged",
    ("indeterminate", "new"): "triaged",
}


@dataclass(frozen=True)
class Outcome:
    status: str
    resolved: bool = False  # record resolution, fix versions and resolved time
    merge: bool = False  # a duplicate: merge into the issue it duplicates, if that is ours


def decide(category: str, resolution: str | None, current: str) -> Outcome:
    """What a Jira issue in `category` with `resolution` means for a signature in `current`."""
    if category == "done":
        name = (resolution or "").strip().lower()
        if name in IGNORE_RESOLUTIONS:
            return Outcome("ignored", resolved=True)
        if name in DUPLICATE_RESOLUTIONS:
            return Outcome("resolved", resolved=True, merge=True)
        return Outcome("resolved", resolved=True)
    return Outcome(OPEN_RULES.get((category, current), current))
