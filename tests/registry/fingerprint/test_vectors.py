"""The shared vectors pin the algorithm (the built reporter is checked against them in tests/agents)."""

from __future__ import annotations

import json

import pytest

from registry.fingerprint import ALGORITHM_VERSION, analyse_report
from tests.support.vectors import VECTORS, inputs

DATA = json.loads(VECTORS.read_text())


def test_vectors_are_for_this_algorithm_version_and_cover_every_input() -> None:
    assert DATA["algorithm_version"] == ALGORITHM_VERSION, "regenerate: make_vectors"
    assert [v["name"] for v in DATA["vectors"]] == [c["name"] for c in inputs()]


@pytest.mark.parametrize("vector", DATA["vectors"], ids=lambda v: v["name"])
def test_the_engine_reproduces_each_vector(vector: dict) -> None:
    signature = analyse_report(vector["console_log"], vector["stack"])
    assert (signature.fingerprint if signature else None) == vector["fingerprint"]
    assert (signature.title if signature else None) == vector["title"]
