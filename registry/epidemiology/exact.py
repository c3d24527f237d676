"""Exact tail probabilities in log space, and multiple-testing corrections.

Crash populations produce p-values far below 1e-308 (forty crashes on one host out of
twenty thousand), so everything here works with natural logs and reports log10 values;
a float p-value is derived only at the edge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

LN10 = math.log(10.0)
_NEGLIGIBLE = 40.0  # stop summing once terms are e^-40 below the largest one


def _log_choose(n: float, k: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _log_sum_upper(first: int, last: int, first_term: float, log_ratio: Callable[[int], float]) -> float:
    """log(sum of exp(term_i) for i in first..last), stopping when terms vanish: term_first
    given, term_(i+1) = term_i + log_ratio(i) (one log a term where each term afresh took three
    lgamma: a large signature's analysis sums some 80,000 terms). The sum is kept scaled by its
    largest term so far (one exp a term, nothing kept)."""
    if first_term == -math.inf:
        return -math.inf
    best = previous = term = first_term
    scaled = 1.0  # sum of exp(term - best)
    for i in range(first + 1, last + 1):
        term += log_ratio(i - 1)
        if term > best:
            scaled = scaled * math.exp(best - term) + 1.0
            best = term
        else:
            scaled += math.exp(term - best)
            if term < previous and term < best - _NEGLIGIBLE:
                break
        previous = term
    return best + math.log(scaled)


def binomial_upper_log10(k: int, n: int, p: float) -> float:
    """log10 P(X >= k) for X ~ Binomial(n, p): k of n crashes carry a value of share p."""
    if k <= 0:
        return 0.0
    if k > n or p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    odds = log_p - log_q
    tail = _log_sum_upper(k, n, _log_choose(n, k) + k * log_p + (n - k) * log_q,
                          lambda i: math.log((n - i) / (i + 1)) + odds)
    return min(0.0, tail / LN10)


def hypergeometric_upper_log10(k: int, n: int, successes: int, population: int) -> float:
    """log10 P(X >= k), X hypergeometric: one-sided Fisher exact test of a 2x2 table.

    `population` items of which `successes` carry the value; `n` drawn (the signature's
    events); `k` of them carry it.
    """
    if k <= 0:
        return 0.0
    top = min(n, successes)
    if k > top:
        return -math.inf
    first = max(k, n - (population - successes))
    if first > top:
        return -math.inf
    log_total = _log_choose(population, n)
    failures = population - successes
    tail = _log_sum_upper(
        first,
        top,
        _log_choose(successes, first) + _log_choose(failures, n - first) - log_total,
        lambda i: math.log((successes - i) * (n - i) / ((i + 1) * (failures - n + i + 1))),
    )
    return min(0.0, tail / LN10)


def poisson_upper_log10(k: int, mean: float) -> float:
    """log10 P(X >= k) for X ~ Poisson(mean)."""
    if k <= 0:
        return 0.0
    if mean <= 0.0:
        return -math.inf
    log_mean = math.log(mean)
    last = max(k, int(mean)) + 10_000
    tail = _log_sum_upper(k, last, -mean + k * log_mean - math.lgamma(k + 1),
                          lambda i: log_mean - math.log(i + 1))
    return min(0.0, tail / LN10)


def holm_log10(log10_ps: Sequence[float]) -> list[float]:
    """Holm step-down adjusted log10 p-values (family-wise error), in input order."""
    m = len(log10_ps)
    order = sorted(range(m), key=lambda i: log10_ps[i])
    adjusted = [0.0] * m
    running = -math.inf
    for rank, i in enumerate(order):
        value = min(0.0, log10_ps[i] + math.log10(m - rank))
        running = max(running, value)
        adjusted[i] = running
    return adjusted


def benjamini_hochberg_log10(log10_ps: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted log10 p-values (false discovery rate), in input order."""
    m = len(log10_ps)
    order = sorted(range(m), key=lambda i: log10_ps[i], reverse=True)
    adjusted = [0.0] * m
    running = 0.0
    for position, i in enumerate(order):
        rank = m - position
        running = min(running, log10_ps[i] + math.log10(m / rank))
        adjusted[i] = min(0.0, running)
    return adjusted


CORRECTIONS: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "holm": holm_log10,
    "benjamini-hochberg": benjamini_hochberg_log10,
}


def to_p_value(log10_p: float) -> float:
    """A float p-value for JSON (0.0 below the smallest positive double)."""
    return 0.0 if log10_p == -math.inf else 10.0**log10_p
