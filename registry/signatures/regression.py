"""Does a new crash on a resolved signature mean the bug is back? Plain functions, plain data.

Kernel versions are compared as versions (6.8.0-52 < 6.8.0-60), never as strings. When the
fix's kernel is known, an event from a kernel older than the fix is a host that has not
been upgraded yet ("old-kernel"), not a regression. When it is not known (or the two
kernels are of different flavours, e.g. -azure against -generic, whose ABI numbers are
separate series), the fallback is time: only a crash after the resolution regresses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

REGRESSED = "regressed"
OLD_KERNEL = "old-kernel"
BEFORE_FIX = "before-fix"

_NUMERIC_PREFIX = re.compile(r"^v?(\d+(?:[.-]\d+)*)(.*)$")


@dataclass(frozen=True, order=True)
class KernelVersion:
    numbers: tuple[int, ...]
    flavour: str

    def __str__(self) -> str:
        return ".".join(map(str, self.numbers)) + (f"-{self.flavour}" if self.flavour else "")


def parse_kernel_version(text: str | None) -> KernelVersion | None:
    """`6.8.0-52-generic` -> (6, 8, 0, 52) flavour `generic`; None when not a version."""
    if not text:
        return None
    match = _NUMERIC_PREFIX.match(text.strip())
    if match is None:
        return None
    numbers = tuple(int(part) for part in re.split(r"[.-]", match.group(1)))
    # Debian/Ubuntu packaging suffixes (".53~22.04.1", "+deb12u1") are not part of the flavour.
    flavour = re.split(r"[~+]", match.group(2), maxsplit=1)[0].strip("-._").lower()
    return KernelVersion(numbers, flavour)


def compare_kernel_versions(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1 as a < b, a == b, a > b; None when either is unknown or they are not comparable."""
    left, right = parse_kernel_version(a), parse_kernel_version(b)
    if left is None or right is None:
        return None
    if left.flavour and right.flavour and left.flavour != right.flavour:
        return None
    width = max(len(left.numbers), len(right.numbers))
    x = left.numbers + (0,) * (width - len(left.numbers))
    y = right.numbers + (0,) * (width - len(right.numbers))
    return (x > y) - (x < y)


def regression_verdict(
    event_kernel: str | None,
    crashed_at: datetime,
    fixed_in_kernel: str | None,
    resolved_at: datetime | None,
) -> str:
    """REGRESSED, OLD_KERNEL (a host still on a kernel older than the fix) or BEFORE_FIX."""
    order = compare_kernel_versions(event_kernel, fixed_in_kernel)
    if order is not None:
        return OLD_KERNEL if order < 0 else REGRESSED
    if resolved_at is not None and crashed_at <= resolved_at:
        return BEFORE_FIX
    return REGRESSED


def fixed_kernel_from_versions(names: list[str]) -> str | None:
    """The highest kernel-looking name among Jira fix versions (e.g. "6.8.0-60"), if any."""
    parsed = [(v.numbers, name) for name in names if (v := parse_kernel_version(name))]
    parsed = [p for p in parsed if len(p[0]) >= 2]
    return max(parsed)[1] if parsed else None
