"""Names and text shared by the kernel and userspace paths: frame names, skip rules, hashing."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NotRequired, TypedDict

from .demangle import function_name
from .patterns import SYSCALL_PREFIXES, VOLATILE_TEXT

_VOLATILE = tuple((re.compile(pattern), replacement) for pattern, replacement in VOLATILE_TEXT)
_SPACES = re.compile(r"\s++")
MAX_TEXT_FIELD = 160


def skip_matcher(*groups: Iterable[str]) -> re.Pattern[str]:
    """Compile skip entries (prefixes after leading underscores; ".*x" = anywhere) into one regex."""
    entries = [entry.lstrip("_") for group in groups for entry in group if entry]
    return re.compile(r"^_*(?:" + "|".join(entries) + ")")


@lru_cache(maxsize=8192)
def canonical_function(name: str, kernel: bool = True) -> str:
    """One function, one name, whoever reads the frame: the console parser, userspace stacks,
    the event page (through the stored explanation) and the kdump sh fallback (held to this by
    tests/agents/test_kdump_sh.py on the golden logs).

    - A userspace name is demangle.function_name's: the qualified name, from a raw symbol or
      any demangled spelling of it, without parameters or compiler clone suffixes.
    - A kernel symbol ends at its first "." (kernel C identifiers have none); an Itanium-mangled
      one (Rust in the kernel) is read by `kernel_symbol`, as the kdump sh's awk port reads it.
    - A kernel syscall is named without its per-architecture wrapper prefix (the shortest name
      one prefix removal gives): __x64_sys_ioctl is sys_ioctl, __do_sys_bpf is bpf.

    Cached: a crash storm names the same few dozen functions in every report."""
    if not kernel:
        return function_name(name)
    name = name.split(".", 1)[0]
    if name[:2] == "_Z":
        name = kernel_symbol(name)
    best = name
    for prefix in SYSCALL_PREFIXES:
        if name.startswith(prefix) and len(name) - len(prefix) < len(best):
            best = name[len(prefix):]
    return best or name


_MANGLED_PART = re.compile(r"(\d++)")
_RUST_HASH = re.compile(r"h[0-9a-f]{16}")


def kernel_symbol(name: str) -> str:
    """The path of an Itanium-mangled kernel symbol (legacy Rust in the kernel): its length-
    prefixed parts joined by "::", without Rust's hash part, read leniently as the kdump sh's
    awk port does (a console line may cut a symbol short): "_ZN4core3ptr5write17h0123456789abcdefE"
    is core::ptr::write. Userspace names go through demangle.function_name."""
    nested = name.startswith("_ZN")
    at, parts = 3 if nested else 2, []
    while at < len(name):
        length = _MANGLED_PART.match(name, at)
        if length is None:
            break
        start = length.end()
        parts.append(name[start:start + int(length.group(1))])
        at = start + int(length.group(1))
        if not nested:
            break
    if parts and _RUST_HASH.fullmatch(parts[-1]):
        parts.pop()
    return "::".join(parts) if parts and all(parts) else name


def search_matcher(entries: Iterable[str]) -> re.Pattern[str]:
    """One regex from skip entries that are searched anywhere in a name (anchor with ^ or $)."""
    return re.compile("|".join(f"(?:{entry})" for entry in entries if entry) or "(?!)")


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


class ExplainedFrame(TypedDict):
    """One frame of an explanation record and what became of it."""

    function: str
    module: str | None
    decision: str  # guilty | used | skipped
    rule: str | None  # the skip class that skipped it
    file: NotRequired[str]  # where the debug info puts it (a symbolicated userspace frame)
    line: NotRequired[int]
    offset: NotRequired[str]  # the module offset of the stack frame it was read from (userspace)
    inlined: NotRequired[bool]  # a call the debug info found inlined at that offset


def frame_decisions(frames: Sequence[tuple[str, str | None]], index: int | None,
                    rules: Sequence[Rule], passed: str | None,
                    named: frozenset[int] = frozenset()) -> tuple[list[ExplainedFrame], int | None]:
    """Each frame read with what became of it: `guilty`, `skipped` (naming the skip class that
    matched, or `passed`: the strategy's reason for passing real code over) or `used`.

    A compact window: at most MAX_EXPLAINED_FRAMES frames, ending a few frames past the guilty
    one when that lies deep; the returned index is the guilty frame's position in the window."""
    first = 0 if index is None or index < GUILTY_CONTEXT else index - GUILTY_CONTEXT
    decisions: list[ExplainedFrame] = []
    for at, (function, module) in enumerate(frames[first:first + MAX_EXPLAINED_FRAMES], first):
        rule = None if at in named else next(
            (name for name, pattern in rules if pattern.search(function)), None)
        if at == index:
            decision, rule = "guilty", None
        elif rule is None and index is not None and at < index and passed:
            decision, rule = "skipped", passed
        else:
            decision = "used" if rule is None else "skipped"
        decisions.append({"function": function, "module": module, "decision": decision,
                          "rule": rule})
    return decisions, None if index is None else index - first
