"""Exact tests, corrections, explanation by a parent, onset and uptime on small known data."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

import pytest

from registry.epidemiology.analysis import CrashRecord, SignatureSample
from registry.epidemiology.exact import (
    benjamini_hochberg_log10,
    binomial_upper_log10,
    holm_log10,
    hypergeometric_upper_log10,
    poisson_upper_log10,
)
from registry.epidemiology.findings import Baseline, analyse_attributes, joint_from_units
from registry.epidemiology.narrative import start_finding
from registry.epidemiology.onset import InventoryChange, onset
from registry.epidemiology.uptime import DAY_S, histogram_outside_counts, outside_counts, uptime_profile
from registry.epidemiology.verdict import decide


def _brute_binomial(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _brute_hypergeometric(k: int, n: int, successes: int, population: int) -> float:
    total = math.comb(population, n)
    return (
        sum(
            math.comb(successes, i) * math.comb(population - successes, n - i)
            for i in range(k, min(n, successes) + 1)
        )
        / total
    )


@pytest.mark.parametrize(("k", "n", "p"), [(1, 1, 0.3), (3, 10, 0.5), (7, 20, 0.1), (20, 20, 0.9)])
def test_binomial_tail_matches_direct_sum(k: int, n: int, p: float) -> None:
    assert binomial_upper_log10(k, n, p) == pytest.approx(math.log10(_brute_binomial(k, n, p)))


@pytest.mark.parametrize(
    ("k", "n", "successes", "population"), [(3, 5, 10, 100), (1, 10, 1, 50), (8, 12, 30, 60)]
)
def test_fisher_tail_matches_direct_sum(k: int, n: int, successes: int, population: int) -> None:
    expected = math.log10(_brute_hypergeometric(k, n, successes, population))
    assert hypergeometric_upper_log10(k, n, successes, population) == pytest.approx(expected)


@pytest.mark.parametrize(("k", "n", "p"), [(40, 5000, Fraction(1, 500)), (900, 3000, Fraction(1, 4)),
                                           (3, 2000, Fraction(1, 1000))])
def test_binomial_tail_of_many_terms_matches_exact_fractions(k: int, n: int, p: Fraction) -> None:
    """Terms taken one from the last (a ratio a term) stay as exact as terms each computed
    afresh, over the hundreds of terms a large signature's tails sum (those past k + 300 are
    below 1e-100 of the first here)."""
    top = min(n, k + 300)
    exact = Fraction(sum(math.comb(n, i) * p.numerator**i * (p.denominator - p.numerator) ** (n - i)
                         for i in range(k, top + 1)), p.denominator**n)
    assert binomial_upper_log10(k, n, float(p)) == pytest.approx(_log10_fraction(exact), rel=1e-9)


@pytest.mark.parametrize(
    ("k", "n", "successes", "population"), [(30, 400, 500, 20_000), (60, 200, 2000, 5000)]
)
def test_fisher_tail_of_many_terms_matches_exact_fractions(
    k: int, n: int, successes: int, population: int
) -> None:
    exact = Fraction(sum(math.comb(successes, i) * math.comb(population - successes, n - i)
                         for i in range(k, min(n, successes) + 1)), math.comb(population, n))
    assert hypergeometric_upper_log10(k, n, successes, population) == pytest.approx(
        _log10_fraction(exact), rel=1e-9)


def _log10_fraction(value: Fraction) -> float:
    return math.log10(value.numerator) - math.log10(value.denominator)


def test_poisson_tail_matches_direct_sum() -> None:
    direct = 1 - sum(math.exp(-2.5) * 2.5**i / math.factorial(i) for i in range(6))
    assert poisson_upper_log10(6, 2.5) == pytest.approx(math.log10(direct))


def test_tails_far_below_double_precision_stay_finite() -> None:
    # forty crashes on a host that is 1/20000 of the fleet: ~1e-170, beyond float p-values
    log10_p = binomial_upper_log10(40, 42, 1 / 20_000)
    assert -180 < log10_p < -160
    assert binomial_upper_log10(0, 10, 0.5) == 0.0


def test_holm_and_benjamini_hochberg_against_hand_computed_values() -> None:
    ps = [0.001, 0.1, 0.01]
    holm = [10**v for v in holm_log10([math.log10(p) for p in ps])]
    bh = [10**v for v in benjamini_hochberg_log10([math.log10(p) for p in ps])]
    assert holm == pytest.approx([0.003, 0.1, 0.02])
    assert bh == pytest.approx([0.003, 0.1, 0.015])


def _fleet(units: list[tuple[float, frozenset]]) -> Baseline:
    counts: dict = {}
    for weight, values in units:
        for key in values:
            counts[key] = counts.get(key, 0.0) + weight
    return Baseline("fleet", "binomial", sum(w for w, _ in units), counts, joint_from_units(units))


def _hosts(n: int, **values: str) -> list[tuple[float, frozenset]]:
    return [
        (1.0, frozenset({("hostname", f"{values['sku']}-{values.get('bios_version')}-{i}"), *values.items()}))
        for i in range(n)
    ]


def test_bios_on_one_sku_explains_the_sku_not_the_reverse() -> None:
    fleet = _fleet(
        _hosts(100, sku="gpu", bios_version="2.1")
        + _hosts(300, sku="gpu", bios_version="2.3")
        + _hosts(1600, sku="cpu", bios_version="1.0")
    )
    events = [frozenset({("sku", "gpu"), ("bios_version", "2.1")})] * 30
    counts = {("sku", "gpu"): 30, ("bios_version", "2.1"): 30}
    scored = analyse_attributes(counts, 30, fleet, joint_from_units([(1.0, e) for e in events]))
    assert [f.key for f in scored.findings] == [("bios_version", "2.1")]
    assert [(f.key, f.explained_by) for f in scored.explained] == [(("sku", "gpu"), ("bios_version", "2.1"))]


def test_sku_wide_problem_is_not_blamed_on_one_of_its_bios_versions() -> None:
    fleet = _fleet(
        _hosts(100, sku="gpu", bios_version="2.1")
        + _hosts(300, sku="gpu", bios_version="2.3")
        + _hosts(1600, sku="cpu", bios_version="1.0")
    )
    events = [frozenset({("sku", "gpu"), ("bios_version", "2.1")})] * 10 + [
        frozenset({("sku", "gpu"), ("bios_version", "2.3")})
    ] * 30
    counts = {("sku", "gpu"): 40, ("bios_version", "2.1"): 10, ("bios_version", "2.3"): 30}
    scored = analyse_attributes(counts, 40, fleet, joint_from_units([(1.0, e) for e in events]))
    assert scored.findings[0].key == ("sku", "gpu")
    assert all(f.explained_by == ("sku", "gpu") for f in scored.explained)
    # both BIOS versions crash in proportion to their hosts: the SKU explains them (2.1's ten
    # crashes are not even significant against the fleet's 2,000 values they could have been)
    assert {f.key for f in scored.explained} == {("bios_version", "2.3")}
    assert [f.key for f in scored.findings] == [("sku", "gpu")]


def test_below_minimum_support_is_never_a_finding() -> None:
    fleet = _fleet(_hosts(1000, sku="cpu", bios_version="1.0") + _hosts(1, sku="x", bios_version="9"))
    counts = {("sku", "x"): 2, ("bios_version", "9"): 2}
    scored = analyse_attributes(counts, 2, fleet, joint_from_units([]))
    assert scored.findings == ()
    assert scored.candidates[0].key in counts  # still a candidate for "more events needed"


# Four hundred bare-metal hosts: the first hundred of one SKU, the first twenty of them with a
# microcode of their own; ten clusters.
FLEET_HOSTS = {
    f"h{i:03d}": frozenset({
        ("hostname", f"h{i:03d}"), ("physical_host", f"h{i:03d}"), ("cluster", f"c{i % 10}"),
        ("sku", "gpu-h100" if i < 100 else "gpu-a100"), ("microcode", "0xbad1" if i < 20 else "0x10"),
    })
    for i in range(400)
}


def _verdict_on(crashes: dict[str, int]) -> tuple[str, list[tuple[str, str]]]:
    """The verdict and kept findings of a signature with `crashes` (hostname -> how many)."""
    records = [CrashRecord(datetime(2026, 11, 1, tzinfo=UTC), FLEET_HOSTS[name])
               for name, n in crashes.items() for _ in range(n)]
    sample = SignatureSample.from_records(records)
    fleet = _fleet([(1.0, values) for values in FLEET_HOSTS.values()])
    scored = analyse_attributes(sample.counts, sample.events, fleet, sample.joint, hosts=sample.hostnames)
    verdict = decide(scored, sample.events, sample.hosts, sample.top_host_share)
    return verdict.verdict, [f.key for f in scored.findings]


def test_a_bug_recurring_on_the_few_hosts_it_hit_is_not_their_hardware() -> None:
    """Twenty crashes on four hosts that happen to share a SKU (a chance of 1 in 256) are four
    hosts' worth of evidence: no hardware verdict, and no host a finding of its own."""
    verdict, findings = _verdict_on({"h003": 5, "h017": 5, "h042": 5, "h077": 5})
    assert verdict == "inconclusive" and findings == []


def test_a_bad_microcode_crashing_its_hosts_again_and_again_is_found() -> None:
    crashes = {f"h{i:03d}": 2 for i in range(20)} | {"h150": 1, "h200": 1, "h250": 1, "h300": 1}
    verdict, findings = _verdict_on(crashes)
    assert verdict == "hardware-config" and findings[0] == ("microcode", "0xbad1")


def test_three_crashes_of_a_rare_value_are_weighed_against_every_value_they_could_have_been() -> None:
    """Three crashes on three hosts of a microcode 5% of the fleet runs: 1 in 8,000 for that one
    value, but one of the fleet's ~900 values would do as well."""
    verdict, findings = _verdict_on({"h001": 1, "h005": 1, "h009": 1})
    assert verdict == "inconclusive" and findings == []


def test_one_host_crashing_far_more_than_the_others_stays_a_single_host_finding() -> None:
    verdict, findings = _verdict_on({"h123": 12, "h150": 1, "h200": 1, "h250": 1})
    assert verdict == "single-host" and findings[0] == ("physical_host", "h123")


def test_a_start_date_is_weighed_against_every_day_it_could_have_been() -> None:
    """Nine of twelve crashes in the last 30 days of 91 (a third of the host-days): 1 in 260 for
    that one day, but the change point was picked from these crashes among 91 days."""
    start = date(2026, 9, 1)
    daily = {start + timedelta(days=d): 1 for d in (5, 20, 40)} | {
        start + timedelta(days=61 + 3 * i): 1 for i in range(9)}
    onset_found = {"change_point": (start + timedelta(days=61)).isoformat(), "shape": "clear start"}
    assert start_finding(daily, onset_found, start, start + timedelta(days=90), None) is None
    strong = daily | {start + timedelta(days=62 + 3 * i): 2 for i in range(9)}  # 27 of 30 since
    assert start_finding(strong, onset_found, start, start + timedelta(days=90), None) is not None


def _days(start: date, counts: list[int]) -> dict[date, int]:
    return {start + timedelta(days=i): c for i, c in enumerate(counts) if c}


def test_onset_finds_a_clear_start_and_lines_up_the_rollout() -> None:
    start = date(2026, 8, 1)
    daily = _days(start, [0] * 30 + [3, 4, 2, 3, 5, 3, 4, 2, 3, 4] * 3)
    rollout = InventoryChange(start + timedelta(days=30), "kernel_version", "6.1.90", 400)
    unrelated = InventoryChange(start + timedelta(days=10), "bios_version", "2.3", 40)
    result = onset(daily, start, start + timedelta(days=59), None, [unrelated, rollout])
    assert result["change_point"] == "2026-08-31"
    assert result["shape"] == "clear start"
    assert [c["value"] for c in result["lined_up"]] == ["6.1.90"]


def test_onset_tells_a_slow_rise_from_a_clear_start() -> None:
    start = date(2026, 8, 1)
    daily = _days(start, [i // 8 for i in range(80)])
    result = onset(daily, start, start + timedelta(days=79))
    assert result["shape"] == "slow rise"


def test_onset_of_a_flat_rate_has_no_change_point() -> None:
    start = date(2026, 8, 1)
    daily = _days(start, [2, 3, 1, 2, 2, 3, 2, 1, 2, 3] * 6)
    result = onset(daily, start, start + timedelta(days=59))
    assert result["change_point"] is None and result["shape"] == "steady"


def test_uptime_never_on_long_running_nodes() -> None:
    fleet = [d * DAY_S for d in range(1, 200)]
    crashes = [0.5 * DAY_S, 1.2 * DAY_S, 2.0 * DAY_S, 2.4 * DAY_S, 0.3 * DAY_S] * 4
    profile = uptime_profile(crashes, outside_counts(fleet))
    assert profile["statement"].startswith("never on nodes up more than 3 days")
    assert profile["p_value"] < 1e-10


def test_uptime_spread_like_the_fleet_says_nothing() -> None:
    fleet = [d * DAY_S for d in range(1, 200)]
    crashes = [d * DAY_S + 0.5 for d in range(3, 200, 7)]
    assert uptime_profile(crashes, outside_counts(fleet))["statement"] is None


def test_hourly_histogram_counts_match_the_plain_list_outside_the_boundary_hours() -> None:
    uptimes = [h * 3600.0 + 10 for h in range(0, 500, 3)]
    own = [100 * 3600.0 + 20, 250 * 3600.0 + 30]
    hours: dict[int, int] = {}
    for u in [*uptimes, *own]:
        hours[int(u // 3600)] = hours.get(int(u // 3600), 0) + 1
    approx = histogram_outside_counts(hours, minus=own)
    exact = outside_counts(uptimes)
    assert approx(100 * 3600.0 + 20, 250 * 3600.0 + 30) == exact(100 * 3600.0, 251 * 3600.0)
    assert approx(0, 10**9)[2] == len(uptimes)
