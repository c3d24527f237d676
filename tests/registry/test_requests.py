"""The string guard every JSON body passes (registry.requests.text_problem), on plain data."""

from __future__ import annotations

import pytest

from registry.requests import NUL_MESSAGE, SURROGATE_MESSAGE, text_problem

LOG = "[    1.000000] BUG: unable to handle page fault for address: 0000000000000008\n" * 64


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (LOG, None),
        (LOG + "Grüße, ünïcödé and 😀", None),  # non-ASCII, astral included: valid
        (LOG + "\x00", NUL_MESSAGE),
        ("ascii then a lone high surrogate \ud800", SURROGATE_MESSAGE),
        ("Grüße, then a lone low surrogate \udfff", SURROGATE_MESSAGE),
        ("\ud83d", SURROGATE_MESSAGE),  # half of a pair
    ],
    ids=["ascii-log", "non-ascii", "nul", "high-surrogate", "low-surrogate-after-non-ascii", "half-pair"],
)
def test_text_problem(value: str, problem: str | None) -> None:
    assert text_problem(value) == problem
