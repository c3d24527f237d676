"""Where a signature's events came from, as the pages say it: "42 on live hosts (printed 9,310
times), 3 panics, 1 from pstore", and whether the bug ever took a host down.

An event's origin is its first source (the report that opened it; a pstore record or a DPU
that joins a crash kernel's event adds nothing here). Live reports (`live_kernel`) are oopses
and warnings a running host printed and survived; a signature with only those has never
panicked, which is what tells a warning that only warns from one that panics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# (origin, the first sources it counts, how one / several are told), in the order told.
ORIGINS = (
    ("live", ("live_kernel",), "on a live host", "on live hosts"),
    ("panic", ("crash_kernel", "dpu", "post_boot"), "panic", "panics"),
    ("pstore", ("pstore",), "panic from pstore", "panics from pstore"),
    ("userspace", ("userspace",), "userspace crash", "userspace crashes"),
)
PANICKED = ("panic", "pstore")


@dataclass(frozen=True)
class Origins:
    phrases: list[str]
    never_panicked: bool  # live reports only: it warned or oopsed, no host went down with it


def origins(counts: Mapping[str, tuple[int, int]]) -> Origins:
    """From (events, repeats) per first source."""
    phrases, told = [], {}
    for origin, sources, one, several in ORIGINS:
        events = sum(counts.get(source, (0, 0))[0] for source in sources)
        repeats = sum(counts.get(source, (0, 0))[1] for source in sources)
        told[origin] = events
        if events:
            printed = f" (printed {events + repeats:,} times)" if repeats else ""
            phrases.append(f"{events:,} {one if events == 1 else several}{printed}")
    never_panicked = told["live"] > 0 and not any(told[origin] for origin in PANICKED)
    return Origins(phrases, never_panicked)
