"""What dedup saved: dumps skipped, and the bytes and downtime those dumps would have cost.

The estimate for a signature is its skipped events times its median completed full capture
(the median, not the mean: one stalled 6-hour dump must not dominate). A signature with
skips but no completed full capture yet has no estimate; it is counted as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import median
from typing import TypedDict

SECONDS_PER_HOUR = 3600.0
# The API's bounds on a capture's figures, so every sum and median stays finite and exact (no
# Infinity in JSON or +Inf in /metrics): 2^53 bytes (8 PiB) is exact in a double, and a year
# is a long capture. Rows stored before the bounds that lie outside them are left out here.
MAX_CAPTURE_BYTES = 2**53
MAX_CAPTURE_SECONDS = 366 * 86400.0


def _plausible(value: float | None, bound: float) -> bool:
    return value is not None and 0 <= value <= bound


@dataclass(frozen=True)
class FullCapture:
    signature_id: int
    bytes: int | None
    downtime_s: float | None


class SignatureSavingsView(TypedDict):
    signature_id: str
    dumps_skipped: int
    full_captures: int
    median_full_capture_bytes: float | None
    median_full_capture_downtime_s: float | None
    bytes_avoided: int
    downtime_hours_avoided: float
    estimated: bool


class SavingsTotals(TypedDict):
    dumps_skipped: int
    full_captures: int
    bytes_avoided: int
    downtime_hours_avoided: float
    skipped_without_estimate: int


@dataclass(frozen=True)
class SignatureSavings:
    signature_id: int
    dumps_skipped: int
    full_captures: int
    median_bytes: float | None
    median_downtime_s: float | None

    @property
    def bytes_avoided(self) -> int:
        return round(self.dumps_skipped * self.median_bytes) if self.median_bytes is not None else 0

    @property
    def downtime_hours_avoided(self) -> float:
        if self.median_downtime_s is None:
            return 0.0
        return self.dumps_skipped * self.median_downtime_s / SECONDS_PER_HOUR

    @property
    def estimated(self) -> bool:
        return self.median_bytes is not None or self.median_downtime_s is not None

    def as_dict(self) -> SignatureSavingsView:
        return {
            "signature_id": str(self.signature_id),
            "dumps_skipped": self.dumps_skipped,
            "full_captures": self.full_captures,
            "median_full_capture_bytes": self.median_bytes,
            "median_full_capture_downtime_s": self.median_downtime_s,
            "bytes_avoided": self.bytes_avoided,
            "downtime_hours_avoided": round(self.downtime_hours_avoided, 3),
            "estimated": self.estimated,
        }


def _median(values: list[float]) -> float | None:
    return float(median(values)) if values else None


def per_signature(skipped: Mapping[int, int], captures: Iterable[FullCapture]) -> list[SignatureSavings]:
    """Savings of every signature that skipped or fully captured something, most downtime first."""
    sizes: dict[int, list[float]] = {}
    downtimes: dict[int, list[float]] = {}
    counts: dict[int, int] = {}
    for capture in captures:
        counts[capture.signature_id] = counts.get(capture.signature_id, 0) + 1
        if _plausible(capture.bytes, MAX_CAPTURE_BYTES):
            sizes.setdefault(capture.signature_id, []).append(capture.bytes)  # type: ignore[arg-type]
        if _plausible(capture.downtime_s, MAX_CAPTURE_SECONDS):
            downtimes.setdefault(capture.signature_id, []).append(capture.downtime_s)
    savings = [
        SignatureSavings(
            signature_id,
            skipped.get(signature_id, 0),
            counts.get(signature_id, 0),
            _median(sizes.get(signature_id, [])),
            _median(downtimes.get(signature_id, [])),
        )
        for signature_id in set(skipped) | set(counts)
    ]
    return sorted(
        savings, key=lambda s: (-s.downtime_hours_avoided, -s.bytes_avoided, -s.dumps_skipped, s.signature_id)
    )


def totals(savings: Iterable[SignatureSavings]) -> SavingsTotals:
    items = list(savings)
    return {
        "dumps_skipped": sum(s.dumps_skipped for s in items),
        "full_captures": sum(s.full_captures for s in items),
        "bytes_avoided": sum(s.bytes_avoided for s in items),
        "downtime_hours_avoided": round(sum(s.downtime_hours_avoided for s in items), 3),
        "skipped_without_estimate": sum(s.dumps_skipped for s in items if not s.estimated),
    }
