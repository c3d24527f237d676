"""When did a signature start, and did it start at once or creep up?

The daily crash count is modelled as Poisson with a rate per host of the fleet at that
time; binary segmentation finds where the rate changes (a split is kept when it gains more
log-likelihood than a BIC-style penalty). The strongest change point is the onset; it is
lined up with the inventory changes of that day (a kernel that started rolling out then).
A clear start and a slow rise are told apart by likelihood: a step (rate r0, then r1) against
a ramp from zero (rate growing linearly from some day on), the step paying for its extra
parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from .shapes import LinedUpChange, OnsetView

MIN_EVENTS_FOR_SHAPE = 5
CLEAR_START_MAX_RATIO = 0.2  # rate before the onset at most this fraction of the rate after
STEP_EXTRA_PARAMETER = 1.0  # log-likelihood a step must gain over a ramp per extra parameter
LINE_UP_DAYS = 1


@dataclass(frozen=True)
class InventoryChange:
    """On `day`, `hosts` hosts took `value` for `attribute` (a rollout step)."""

    day: date
    attribute: str
    value: str
    hosts: int

    def as_json(self) -> LinedUpChange:
        return {
            "day": self.day.isoformat(),
            "attribute": self.attribute,
            "value": self.value,
            "hosts": self.hosts,
        }


def _segment_log_likelihood(count: float, exposure: float) -> float:
    return count * math.log(count / exposure) - count if count > 0 and exposure > 0 else 0.0


def _best_split(counts: Sequence[float], exposure: Sequence[float], lo: int, hi: int) -> tuple[float, int]:
    total_c = sum(counts[lo:hi])
    total_e = sum(exposure[lo:hi])
    whole = _segment_log_likelihood(total_c, total_e)
    best_gain, best_at = 0.0, -1
    left_c = left_e = 0.0
    for at in range(lo + 1, hi):
        left_c += counts[at - 1]
        left_e += exposure[at - 1]
        gain = (
            _segment_log_likelihood(left_c, left_e)
            + _segment_log_likelihood(total_c - left_c, total_e - left_e)
            - whole
        )
        if gain > best_gain:
            best_gain, best_at = gain, at
    return best_gain, best_at


def change_points(counts: Sequence[float], exposure: Sequence[float]) -> list[tuple[int, float]]:
    """Binary segmentation: (index where a new rate starts, log-likelihood gain), by gain."""
    penalty = 1.5 * math.log(max(len(counts), 2)) + 2.0
    found: list[tuple[int, float]] = []
    pending = [(0, len(counts))]
    while pending:
        lo, hi = pending.pop()
        if hi - lo < 2:
            continue
        gain, at = _best_split(counts, exposure, lo, hi)
        if at < 0 or gain <= penalty:
            continue
        found.append((at, gain))
        pending += [(lo, at), (at, hi)]
    return sorted(found, key=lambda item: -item[1])


def _rate(counts: Sequence[float], exposure: Sequence[float]) -> float:
    total_e = sum(exposure)
    return sum(counts) / total_e if total_e else 0.0


def _ramp_log_likelihood(counts: Sequence[float], exposure: Sequence[float]) -> float:
    """Best rate 0 until some day t0, then b * (t - t0 + 1/2): a slow rise."""
    best = -math.inf
    before = 0.0
    for t0 in range(len(counts)):
        if before > 0:
            break  # crashes before t0: a ramp from zero cannot start later
        after = sum(counts[t0:])
        spread = sum(e * (t - t0 + 0.5) for t, e in enumerate(exposure[t0:], start=t0))
        if after > 0 and spread > 0:
            slope = after / spread
            fit = sum(c * math.log(slope * (t - t0 + 0.5)) for t, c in enumerate(counts[t0:], start=t0) if c)
            best = max(best, fit - after)
        before += counts[t0]
    return best


def _shape(counts: Sequence[float], exposure: Sequence[float], at: int, before: float, after: float) -> str:
    step = _segment_log_likelihood(sum(counts[:at]), sum(exposure[:at])) + (
        _segment_log_likelihood(sum(counts[at:]), sum(exposure[at:]))
    )
    if after < before:
        return "decline"
    if _ramp_log_likelihood(counts, exposure) >= step - STEP_EXTRA_PARAMETER:
        return "slow rise"
    if before <= CLEAR_START_MAX_RATIO * after:
        return "clear start"
    return "step up"


def onset(
    daily: Mapping[date, int],
    start: date,
    end: date,
    exposure: Mapping[date, float] | None = None,
    changes: Sequence[InventoryChange] = (),
) -> OnsetView:
    """Onset of a signature observed over [start, end] (the registry's observation window).

    `exposure`: hosts in the fleet per day (rates are per 1000 hosts per day); `changes`:
    inventory changes to line up with the change point.
    """
    first_seen = min((d for d, c in daily.items() if c), default=None)
    days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    counts = [float(daily.get(d, 0)) for d in days]
    hosts = [float((exposure or {}).get(d, 0.0)) for d in days]
    if not exposure or any(h <= 0 for h in hosts):
        hosts = [1000.0] * len(days)
    result: OnsetView = {
        "first_seen": first_seen.isoformat() if first_seen else None,
        "change_point": None,
        "shape": "too few events",
        "rate_before": None,
        "rate_after": None,
        "lined_up": [],
    }
    if sum(counts) < MIN_EVENTS_FOR_SHAPE:
        return result
    points = change_points(counts, hosts)
    if not points:
        result.update(shape="steady", rate_after=round(1000 * _rate(counts, hosts), 4))
        return result
    at = points[0][0]
    before = _rate(counts[:at], hosts[:at])
    after = _rate(counts[at:], hosts[at:])
    day = days[at]
    nearby = [c for c in changes if abs((c.day - day).days) <= LINE_UP_DAYS]
    result.update(
        change_point=day.isoformat(),
        shape=_shape(counts, hosts, at, before, after),
        rate_before=round(1000 * before, 4),
        rate_after=round(1000 * after, 4),
        lined_up=[c.as_json() for c in sorted(nearby, key=lambda c: -c.hosts)[:5]],
    )
    return result
