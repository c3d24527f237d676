"""Charts drawn on the server as inline SVG: plain data in, shapes out (no JavaScript, no build).

The functions here only compute geometry; the templates turn it into <svg> elements, so a chart
is readable without scripts, printable, and testable as data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from math import ceil

from registry.bounds import EARLIEST_CRASH

MAX_BARS = 120  # more days than this are drawn in buckets of several days
# The SVG holds shapes only; its axis labels are HTML beside it, so they stay readable when the
# chart stretches to a phone's width (SVG text would stretch with it).
CHART_WIDTH, CHART_HEIGHT = 720, 150
PLOT_LEFT, PLOT_RIGHT, PLOT_TOP, PLOT_BOTTOM = 0, 0, 8, 0
SPARK_WIDTH, SPARK_HEIGHT, SPARK_DAYS = 120, 24, 30
X_TICKS = 5
# What each kind of mark on the time axis is called, in the legend and in the SVG's tooltips.
MARK_NAMES = {
    "first-seen": "first sighting",
    "regression": "regression",
    "kernel-rollout": "kernel rollout",
}


@dataclass(frozen=True)
class Mark:
    """A moment worth a vertical line: a first sighting, a regression, a kernel rollout."""

    day: date
    kind: str
    text: str


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    start: date
    days: int
    events: int


@dataclass(frozen=True)
class PlacedMark:
    x: float
    day: date
    kind: str
    name: str
    text: str


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class EventsChart:
    width: int
    height: int
    plot: tuple[float, float, float, float]  # left, top, right, bottom
    bars: list[Bar]
    marks: list[PlacedMark]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    bucket_days: int
    start: date
    end: date
    total: int
    peak: Bar | None

    @property
    def unit(self) -> str:
        return (
            "day"
            if self.bucket_days == 1
            else ("week" if self.bucket_days == 7 else f"{self.bucket_days} days")
        )

    @property
    def summary(self) -> str:
        """What the chart shows, in words (the SVG's description, for screen readers)."""
        if not self.total:
            return f"No events between {self.start} and {self.end}."
        peak = self.peak
        assert peak is not None
        when = str(peak.start) if peak.days == 1 else f"the {peak.days} days from {peak.start}"
        return (
            f"{self.total} events between {self.start} and {self.end}; "
            f"the most, {peak.events}, on {when}."
        )


def chart_start(first: date, marks: Sequence[Mark], lead_days: int = 7, max_lead_days: int = 60) -> date:
    """Where a signature's chart begins: a week before its first event (so the onset reads as
    one), earlier still for a mark such as the kernel rollout that preceded it, within limits.
    A crash time no crash can have (stored before ingest refused such times) stretches nothing."""
    first = max(first, EARLIEST_CRASH.date())
    limit = first - timedelta(days=max_lead_days)
    return min([first - timedelta(days=lead_days), *(m.day for m in marks if m.day >= limit)])


def bucket_size(days: int, max_bars: int = MAX_BARS) -> int:
    """Days per bar: 1 up to `max_bars` days, then a week, then as many days as keep the bars
    at most `max_bars`."""
    if days <= max_bars:
        return 1
    return max(7, ceil(days / max_bars))


def events_chart(daily: Mapping[date, int], start: date, end: date, marks: Sequence[Mark]) -> EventsChart:
    """Bars of events per day (or per bucket of days) from `start` to `end`, both included, with
    the marks that fall in that range."""
    end = max(end, start)
    days = (end - start).days + 1
    size = bucket_size(days)
    buckets = ceil(days / size)
    counts = [0] * buckets
    for day, n in daily.items():
        if start <= day <= end:
            counts[(day - start).days // size] += n
    left, top = PLOT_LEFT, PLOT_TOP
    right, bottom = CHART_WIDTH - PLOT_RIGHT, CHART_HEIGHT - PLOT_BOTTOM
    slot = (right - left) / buckets
    scale = max(counts) or 1
    bars = []
    for i, n in enumerate(counts):
        height = (bottom - top) * n / scale
        bars.append(
            Bar(
                x=round(left + i * slot, 2),
                y=round(bottom - height, 2),
                width=round(max(slot - (1 if slot > 3 else 0), 0.5), 2),
                height=round(height, 2),
                start=start + timedelta(days=i * size),
                days=min(size, days - i * size),
                events=n,
            )
        )

    def x_of(day: date) -> float:
        return round(left + ((day - start).days + 0.5) / days * (right - left), 2)

    placed = [
        PlacedMark(x_of(m.day), m.day, m.kind, MARK_NAMES.get(m.kind, m.kind), m.text)
        for m in sorted(marks, key=lambda m: (m.day, m.kind))
        if start <= m.day <= end
    ]
    tick_days = sorted(
        {start + timedelta(days=round(i * (days - 1) / (X_TICKS - 1))) for i in range(X_TICKS)}
    )
    x_ticks = (
        [Tick(x_of(d), d.isoformat()) for d in tick_days] if days > 1 else [Tick(x_of(start), str(start))]
    )
    y_ticks = [Tick(round(bottom - (bottom - top) * v / scale, 2), str(v)) for v in sorted({0, scale})]
    busiest = max(bars, key=lambda b: b.events) if any(counts) else None
    return EventsChart(
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        plot=(left, top, right, bottom),
        bars=bars,
        marks=placed,
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        bucket_days=size,
        start=start,
        end=end,
        total=sum(counts),
        peak=busiest,
    )


@dataclass(frozen=True)
class Sparkline:
    width: int
    height: int
    points: str  # an SVG polyline's points
    total: int
    peak: int
    days: int


def sparkline(daily: Mapping[date, int], today: date, days: int = SPARK_DAYS) -> Sparkline:
    """Events per day over the last `days` days (today included) as a polyline."""
    first = today - timedelta(days=days - 1)
    counts = [daily.get(first + timedelta(days=i), 0) for i in range(days)]
    peak = max(counts)
    scale = peak or 1
    step = (SPARK_WIDTH - 2) / max(days - 1, 1)
    points = " ".join(
        f"{1 + i * step:.1f},{SPARK_HEIGHT - 2 - (SPARK_HEIGHT - 4) * n / scale:.1f}"
        for i, n in enumerate(counts)
    )
    return Sparkline(SPARK_WIDTH, SPARK_HEIGHT, points, sum(counts), peak, days)
