"""Choosing which events and which other signatures an agent should look at. Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The event attributes a diverse sample spreads over: a bug seen on many hosts, kernels and
# regions shows an agent what varies and what does not.
DIVERSITY_KEYS: tuple[str, ...] = ("hostname", "kernel_version", "region", "sku", "cpu_model")


def diverse_sample(
    events: Sequence[Mapping[str, Any]], size: int, keys: Sequence[str] = DIVERSITY_KEYS
) -> list[Mapping[str, Any]]:
    """Up to `size` events: the first and the latest, then greedily those adding unseen values.

    `events` are ordered newest first; ties go to the newer event. Each is a mapping with
    `keys` (missing or None values count as no value).
    """
    if size <= 0 or not events:
        return []
    chosen: list[int] = [0] if len(events) == 1 or size == 1 else [len(events) - 1, 0]
    seen = {(k, events[i].get(k)) for i in chosen for k in keys if events[i].get(k) is not None}
    while len(chosen) < min(size, len(events)):
        best, best_gain = None, -1
        for index, event in enumerate(events):
            if index in chosen:
                continue
            gain = sum(1 for k in keys if event.get(k) is not None and (k, event.get(k)) not in seen)
            if gain > best_gain:
                best, best_gain = index, gain
        assert best is not None
        chosen.append(best)
        seen |= {(k, events[best].get(k)) for k in keys if events[best].get(k) is not None}
    return [events[i] for i in sorted(chosen)]


def frame_overlap(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard overlap of two signatures' frame functions (0 when either has none)."""
    left, right = set(a), set(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


MIN_FRAME_OVERLAP = 0.3


def similarity(
    function: str | None, frames: Iterable[str], other_function: str | None, other_frames: Iterable[str]
) -> tuple[float, list[str]] | None:
    """How alike two signatures are and why; None when they are not alike."""
    reasons = []
    overlap = frame_overlap(frames, other_frames)
    if function and function == other_function:
        reasons.append(f"same guilty function {function}")
    if overlap >= MIN_FRAME_OVERLAP:
        reasons.append(f"{overlap:.0%} of frames shared")
    if not reasons:
        return None
    return max(overlap, 1.0 if function and function == other_function else 0.0), reasons
