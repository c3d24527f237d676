"""Symbols uploaded through the API by a build pipeline after the crashes: the registry that
received them (no debuginfod server configured) moves the events that needed them to the
named signature by itself (the symbols domain tells it of the arrival), without a rebuild;
both databases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from flask import Flask

from registry.db import Database
from tests.support.releases import LANGUAGES, Release, releases  # noqa: F401 (fixture)
from tests.support.reported_releases import (
    reported_without_symbols,
    settle,
    signatures_of,
)
from tests.support.symbols import Pipeline


@pytest.mark.parametrize("language", ["c++"])
def test_an_upload_after_the_crashes_moves_their_events_to_the_named_signature(
    language: str, app: Flask, live_server: str, database: Database, make_token: Callable[..., str],
    tmp_path: Path, releases: dict[str, tuple[Release, Release]],  # noqa: F811
) -> None:
    first, second = releases[language]
    function = LANGUAGES[language][2]
    reported_without_symbols(app, database, make_token("report"), (first, second))

    pipeline = Pipeline(live_server, make_token("symbols", name="ci-release"), tmp_path)
    for release in (first, second):
        answer = pipeline.upload(release.debug.read_bytes(), release.build_id)
        assert answer.status_code == 200, answer.text
    settle(app)

    assert list(signatures_of(database).values()) == [(function, 2)]
