"""bench/wrk_storm.py's pooling of a storm given in turns: each route's wrk runs added up, their
latencies pooled into one distribution (wrk reports percentiles per run only)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def wrk_storm():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("wrk_storm", BENCH / "wrk_storm.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def run(latency_us: list[tuple[int, int]], seconds: float, **errors: int) -> dict:  # type: ignore[type-arg]
    """A wrk run's figures as storm.lua's done() writes them."""
    requests = sum(count for _, count in latency_us)
    counts = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0} | errors
    return {
        "requests": requests, "duration_us": int(seconds * 1e6), "latency_us": latency_us, "errors": counts,
    }


def test_turns_pool_into_one_distribution(wrk_storm) -> None:  # type: ignore[no-untyped-def]
    # 99 fast answers in one turn, one slow one in the other: the slow one is the pooled max and
    # above the pooled p99, although it is the p99 of its own turn.
    fast = run([(10_000, 60), (20_000, 39)], seconds=1.0)
    slow = run([(300_000, 1)], seconds=0.5, status=1)
    cpu = wrk_storm.storm.PhaseCpu(workers=0.2, postgres=0.1, client=0.0)
    pooled = wrk_storm.pooled([(fast, cpu), (slow, cpu)])
    assert pooled["requests"] == 100
    assert pooled["rps"] == pytest.approx(100 / 1.5, rel=1e-3)
    assert pooled["p50_ms"] == 10.0
    assert pooled["p99_ms"] == 20.0
    assert pooled["max_ms"] == 300.0
    assert pooled["errors"]["status"] == 1
    assert pooled["cpu_ms_per_request"] == pytest.approx(6.0)  # 0.6 s over 100 requests


def test_percentiles_are_nearest_rank(wrk_storm) -> None:  # type: ignore[no-untyped-def]
    latencies = wrk_storm.collections.Counter({1_000: 50, 2_000: 49, 9_000: 1})
    assert wrk_storm.percentile_ms(latencies, 0.50) == 1.0
    assert wrk_storm.percentile_ms(latencies, 0.51) == 2.0
    assert wrk_storm.percentile_ms(latencies, 0.99) == 2.0
    assert wrk_storm.percentile_ms(latencies, 1.0) == 9.0
