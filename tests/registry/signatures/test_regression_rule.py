"""The regression rule: kernel versions compared as versions, time as the fallback."""

from datetime import UTC, datetime, timedelta

import pytest

from registry.signatures.regression import (
    BEFORE_FIX,
    OLD_KERNEL,
    REGRESSED,
    compare_kernel_versions,
    fixed_kernel_from_versions,
    regression_verdict,
)

RESOLVED = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        ("6.8.0-52-generic", "6.8.0-60-generic", -1),  # as strings "52" > "6": wrong order
        ("6.8.0-60", "6.8.0-60-generic", 0),
        ("6.10.1", "6.9.12", 1),
        ("5.15.0-1034-azure", "5.15.0-91-generic", None),  # separate ABI series
        ("6.8.0-52.53~22.04.1-generic", "6.8.0-52", 1),
        ("6.8", "6.8.0", 0),
        ("not-a-version", "6.8.0", None),
        (None, "6.8.0", None),
    ],
)
def test_kernel_versions_compare_as_versions(a, b, order):
    assert compare_kernel_versions(a, b) == order


def test_a_newer_kernel_than_the_fix_regresses_an_older_one_does_not():
    after = RESOLVED + timedelta(days=3)
    assert regression_verdict("6.8.0-60-generic", after, "6.8.0-60", RESOLVED) == REGRESSED
    assert regression_verdict("6.8.0-52-generic", after, "6.8.0-60", RESOLVED) == OLD_KERNEL


def test_without_a_comparable_fix_kernel_time_decides():
    assert regression_verdict("6.8.0-52", RESOLVED + timedelta(hours=1), None, RESOLVED) == REGRESSED
    assert regression_verdict("6.8.0-52", RESOLVED - timedelta(hours=1), None, RESOLVED) == BEFORE_FIX
    assert regression_verdict(None, RESOLVED - timedelta(hours=1), "6.8.0-60", None) == REGRESSED


def test_fixed_kernel_is_the_highest_kernel_looking_fix_version():
    assert fixed_kernel_from_versions(["backlog", "6.8.0-60", "6.8.0-7"]) == "6.8.0-60"
    assert fixed_kernel_from_versions(["Sprint 12", "v2"]) is None
