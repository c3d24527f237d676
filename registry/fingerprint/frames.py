"""Names and text shared by the kernel and userspace paths: frame names, skip rules, hashing."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from .patterns import CLONE_SUFFIX, SYSCALL_PREFIXES, VOLATILE_TEXT

_VOLATILE = tuple((re.compile(pattern), replacement) for pattern, replacement in VOLATILE_TEXT)
_SPACES = re.compile(r"\s++")
MAX_TEXT_FIELD = 160


def clean_function(name: str) -> str:
    """One function, one name: drop compiler clone suffixes (.isra.N, .constprop.N, .cold)."""
    return CLONE_SUFFIX.sub("", name)


def skip_matcher(*groups: Iterable[str]) -> re.Pattern[str]:
    """Compile skip entries (prefixes after leading underscores; ".*x" = anywhere) into one regex."""
    entries = [entry.lstrip("_") for group in groups for entry in group if entry]
    return re.compile(r"_*(?:" + "|".join(entries) + ")")


def canonical_function(name: str) -> str:
    """One function, one name: drop clone suffixes and per-architecture syscall wrappers."""
    return SYSCALL_PREFIXES.sub("", CLONE_SUFFIX.sub("", name))


def normalise_text(text: str) -> str:
    """Replace what differs between two crashes of one bug (numbers, addresses, names)."""
    text = text[:MAX_TEXT_FIELD * 2]
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return _SPACES.sub(" ", text).strip()[:MAX_TEXT_FIELD]


def make_fingerprint(*parts: object) -> str:
    """Stable hash of the identity parts; the algorithm version is always the first part."""
    joined = "\x1f".join("" if part is None else str(part) for part in parts)
    return hashlib.sha256(joined.encode("utf-8", "replace")).hexdigest()[:32]


def frame_label(function: str, module: str | None) -> str:
    """A frame as it appears in signatures: `name [module]`."""
    return f"{function} [{module}]" if module else function


MAX_EXPLAINED_FRAMES = 16  # frames kept in an explanation record (a window around the guilty one)
GUILTY_CONTEXT = 12  # frames before the guilty one kept when it is deep in the stack

Rule = tuple[str, re.Pattern[str]]


def frame_decisions(frames: Sequence[tuple[str, str | None]], index: int | None,
                    rules: Sequence[Rule], passed: str | None) -> tuple[list[dict], int | None]:
    """Each frame read with what became of it: `guilty`, `skipped` (naming the skip class that
    matched, or `passed`: the strategy's reason for passing real code over) or `used`.

    A compact window: at most MAX_EXPLAINED_FRAMES frames, ending a few frames past the guilty
    one when that lies deep; the returned index is the guilty frame's position in the window."""
    first = 0 if index is None or index < GUILTY_CONTEXT else index - GUILTY_CONTEXT
    decisions = []
    for at, (function, module) in enumerate(frames[first:first + MAX_EXPLAINED_FRAMES], first):
        rule = next((name for name, pattern in rules if pattern.match(function)), None)
        if at == index:
            decision, rule = "guilty", None
        elif rule is None and index is not None and at < index and passed:
            decision, rule = "skipped", passed
        else:
            decision = "used" if rule is None else "skipped"
        decisions.append({"function": function, "module": module, "decision": decision,
                          "rule": rule})
    return decisions, None if index is None else index - first
