"""The one seam between ingest and fingerprinting: a report in, a crash signature (or None) out."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

PROVISIONAL_ALGORITHM_VERSION = 0
_FIRST_CRASH_LINE = re.compile(
    r"(BUG: [^\n]{0,200}|general protection fault|Kernel panic - not syncing: [^\n]{0,200}"
    r"|WARNING: [^\n]{0,200}|Oops[^\n]{0,100})"
)
_VOLATILE = re.compile(r"0x[0-9a-f]+|\b[0-9a-f]{8,}\b|\d+")


@dataclass(frozen=True)
class CrashSignature:
    fingerprint: str
    title: str
    kind: str
    function: str | None = None
    module: str | None = None
    frames: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    algorithm_version: int = PROVISIONAL_ALGORITHM_VERSION


def identify(console_log: str | None, stack: dict[str, Any] | None) -> CrashSignature | None:
    """Provisional: the first crash-looking line, numbers stripped. The engine replaces this."""
    if console_log:
        match = _FIRST_CRASH_LINE.search(console_log[:1_000_000])
        if match:
            title = _VOLATILE.sub("N", match.group(1)).strip()
            digest = hashlib.sha256(f"0|{title}".encode()).hexdigest()[:24]
            return CrashSignature(fingerprint=digest, title=title, kind="kernel")
    if stack and stack.get("frames"):
        functions = [f.get("function") or "?" for f in stack["frames"][:5]]
        digest = hashlib.sha256(("0|" + "|".join(functions)).encode()).hexdigest()[:24]
        return CrashSignature(fingerprint=digest, title=f"crash in {functions[0]}", kind="userspace")
    return None
