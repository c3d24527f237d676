"""A userspace signature's processes against the program's other crashes.

A userspace crash carries its process (event attributes from the report's stack): the
program's release, when the process started and how long it had run. One signature can be
two bugs whose processes differ: a race at start-up crashes young processes, a bad host
crashes them at any age. Each attribute's values (the release, the process's age in bands,
the week it started) are compared with the program's other crashes of the same window:
one-sided Fisher exact test, Holm-corrected over every value tested (those carrying at least
half of the signature's crashes), shaped like the other findings and said in words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .exact import holm_log10, hypergeometric_upper_log10, to_p_value
from .findings import LOG10_ALPHA, MIN_LIFT, MIN_SUPPORT
from .narrative import BASELINE_WORDS, finding_view
from .shapes import TimeFinding

# Process age at the crash, in bands an engineer reads (upper bound in seconds, words).
AGE_BANDS: tuple[tuple[float, str], ...] = (
    (15 * 60, "under 15 minutes"),
    (3_600, "15 minutes to 1 hour"),
    (86_400, "1 hour to 1 day"),
    (7 * 86_400, "1 to 7 days"),
    (float("inf"), "over 7 days"),
)
# The reference is the program's other crashes: a program has few signatures, so a large one
# skews it (beside a start-up race, an ordinary bug's processes look old). A value is said
# only when it carries at least half of the signature's crashes, as a verdict's finding must.
MIN_SHARE = 0.5
WORDS: dict[str, str] = {
    "program_version": "program version",
    "process_uptime": "process up",
    "process_start_week": "process started in the week of",
}


@dataclass(frozen=True)
class ProcessCrash:
    """What a userspace event says of its process (None: the report did not say)."""

    version: str | None
    started_at: datetime | None
    uptime_s: float | None

    def values(self) -> Iterable[tuple[str, str]]:
        if self.version:
            yield "program_version", self.version
        if self.uptime_s is not None:
            yield "process_uptime", next(words for bound, words in AGE_BANDS if self.uptime_s < bound)
        if self.started_at is not None:
            monday = self.started_at.date() - timedelta(days=self.started_at.weekday())
            yield "process_start_week", monday.isoformat()


def process_findings(signature: Sequence[ProcessCrash], others: Sequence[ProcessCrash]) -> list[TimeFinding]:
    """The process values over-represented in the signature, strongest first."""
    own = Counter(value for crash in signature for value in crash.values())
    rest = Counter(value for crash in others for value in crash.values())
    known = Counter(attribute for attribute, _ in own.elements())
    known_rest = Counter(attribute for attribute, _ in rest.elements())
    tested = [
        (key, k) for key, k in own.items()
        if k >= MIN_SUPPORT and known_rest[key[0]] and k / known[key[0]] >= MIN_SHARE
    ]
    log10_ps = [
        hypergeometric_upper_log10(k, known[a], k + rest[(a, v)], known[a] + known_rest[a])
        for (a, v), k in tested
    ]
    found: list[TimeFinding] = []
    for ((attribute, value), k), log10_p in zip(tested, holm_log10(log10_ps), strict=True):
        n = known[attribute]
        share = rest[(attribute, value)] / known_rest[attribute]
        if log10_p >= LOG10_ALPHA or (share > 0 and (k / n) / share < MIN_LIFT):
            continue
        view = finding_view(attribute, value, k, n, share, log10_p, "program")
        statement = (
            f"{WORDS[attribute]} {value}: {k} of {n} crashes, where {share:.0%} {BASELINE_WORDS['program']} "
            f"predicts {share * n:.0f} (p {to_p_value(log10_p):.1e})"
        )
        found.append({**view, "statement": statement})
    return sorted(found, key=lambda f: f["log10_p"])
