"""Uptime at crash against the fleet's uptime distribution, as the other crashes sample it.

If a fraction q of the fleet's host-time is spent at uptimes above the signature's largest
uptime, n crashes independent of uptime would all stay below it with probability (1-q)^n.
q is estimated from the other crashes' uptimes: crashes independent of uptime happen at
uptimes distributed as the fleet's host-time is. The inventory knows only each host's last
boot, and a snapshot of current uptimes describes the fleet only if it is steady (after a
rollout reboots half of it, it is not), while the crashes cover the whole window.
When that is improbable the signature is "never on nodes up more than N days" (hardware
that fails early after boot, a bad CPU that keeps its VMs from ever running long); the
mirror image catches leaks ("never on nodes up less than N days").
"""

from __future__ import annotations

import array
import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from .exact import to_p_value
from .findings import LOG10_ALPHA
from .shapes import UptimeProfile

DAY_S = 86_400.0
MIN_EVENTS = 5
# Only worth saying when a good part of the fleet's time lies beyond the signature's range.
MIN_EXCLUDED_SHARE = 0.25


def _log10_all_inside(n: int, outside_share: float) -> float:
    if outside_share <= 0.0:
        return 0.0
    if outside_share >= 1.0:
        return -math.inf
    return n * math.log10(1.0 - outside_share)


# (lowest, highest) -> (baseline uptimes below lowest, above highest, all baseline uptimes)
OutsideCounts = Callable[[float, float], tuple[int, int, int]]


def outside_counts(baseline_s: Sequence[float]) -> OutsideCounts:
    """OutsideCounts over a plain list of baseline uptimes."""
    ordered = sorted(u for u in baseline_s if u is not None and u >= 0)

    def count(lowest: float, highest: float) -> tuple[int, int, int]:
        below = bisect.bisect_left(ordered, lowest)
        above = len(ordered) - bisect.bisect_right(ordered, highest)
        return below, above, len(ordered)

    return count


HOUR_S = 3600


class Ascending(array.array):
    """Uptimes already in ascending order, as doubles: a large signature's million of them are
    neither sorted nor copied again by each step that reads them (`ascending`)."""

    def __new__(cls, values: Iterable[float] = ()) -> Ascending:
        return super().__new__(cls, "d", values)


def with_added(ordered: Ascending, more: Iterable[float]) -> Ascending:
    """`ordered` with `more` (a few) inserted in place; `ordered` itself when there are none."""
    added = sorted(more)
    if not added:
        return ordered
    if len(added) > len(ordered) // 64:
        return Ascending(sorted([*ordered, *added]))
    merged = Ascending(ordered)
    for value in added:
        bisect.insort(merged, value)
    return merged


def ascending(values: Sequence[float | None]) -> Sequence[float]:
    """The non-negative values in ascending order (no sort and no copy for an Ascending)."""
    if isinstance(values, Ascending):
        start = bisect.bisect_left(values, 0)
        return values[start:] if start else values
    ordered = sorted(values if None not in values else (u for u in values if u is not None))
    return ordered[bisect.bisect_left(ordered, 0) :]


def median(ordered: Sequence[float]) -> float:
    """statistics.median of values already in ascending order (without sorting them again)."""
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def histogram_outside_counts(hours: Mapping[int, int], minus: Sequence[float] = ()) -> OutsideCounts:
    """OutsideCounts over an hourly histogram of uptimes (what the database aggregates),
    less the uptimes in `minus` (the signature's own crashes). Counts are exact except in
    the hour holding the signature's lowest or highest uptime, which counts as inside."""
    # `minus` sorted once and cut per hour of the histogram: a few thousand bisections, not a
    # Python step per uptime (100,000 of them in a large signature)
    own = ascending(minus)
    ordered = []
    for hour, n in sorted(hours.items()):
        n -= bisect.bisect_left(own, (hour + 1) * HOUR_S) - bisect.bisect_left(own, hour * HOUR_S)
        if n > 0:
            ordered.append((hour, n))
    keys = [hour for hour, _ in ordered]
    running = [0]
    for _, n in ordered:
        running.append(running[-1] + n)

    def count(lowest: float, highest: float) -> tuple[int, int, int]:
        below = running[bisect.bisect_left(keys, int(lowest // HOUR_S))]
        above = running[-1] - running[bisect.bisect_right(keys, int(highest // HOUR_S))]
        return below, above, running[-1]

    return count


def uptime_profile(signature_s: Sequence[float], baseline: OutsideCounts) -> UptimeProfile:
    """`baseline`: how the uptimes of the other crashes fall outside the signature's range."""
    crashes = ascending(signature_s)
    result: UptimeProfile = {
        "events": len(crashes),
        "median_days": round(median(crashes) / DAY_S, 3) if crashes else None,
        "max_days": round(crashes[-1] / DAY_S, 3) if crashes else None,
        "min_days": round(crashes[0] / DAY_S, 3) if crashes else None,
        "statement": None,
        "p_value": None,
        "bound": None,  # "at most" | "at least": the signature's uptimes never go past `bound_days`
        "bound_days": None,
        "outside_share": None,  # share of the other crashes beyond the bound
    }
    if len(crashes) < MIN_EVENTS:
        return result
    below_count, above_count, total = baseline(crashes[0], crashes[-1])
    if not total:
        return result
    n = len(crashes)
    above = above_count / total
    below = below_count / total
    never_long = _log10_all_inside(n, above) if above >= MIN_EXCLUDED_SHARE else 0.0
    never_short = _log10_all_inside(n, below) if below >= MIN_EXCLUDED_SHARE else 0.0
    if min(never_long, never_short) >= LOG10_ALPHA:
        return result
    if never_long <= never_short:
        days = max(1, math.ceil(crashes[-1] / DAY_S))
        statement = (
            f"never on nodes up more than {days} days "
            f"({above:.0%} of the other crashes came after more than {crashes[-1] / DAY_S:.1f} days up)"
        )
        log10_p, bound, share = never_long, "at most", above
    else:
        days = max(0, math.floor(crashes[0] / DAY_S))
        statement = (
            f"never on nodes up less than {days} days "
            f"({below:.0%} of the other crashes came after less than {crashes[0] / DAY_S:.1f} days up)"
        )
        log10_p, bound, share = never_short, "at least", below
    result.update(
        statement=statement,
        p_value=to_p_value(log10_p),
        bound=bound,
        bound_days=days,
        outside_share=round(share, 6),
        log10_p=round(max(log10_p, -10_000.0), 3),
    )
    return result
