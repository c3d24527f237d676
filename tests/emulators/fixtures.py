"""Pytest fixtures for the Jira emulator: a served site per flavour and a hand-moved clock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from .jira import JiraEmulator

JIRA_FLAVOURS = ("datacenter", "cloud")


class ManualClock:
    """A clock tests move by hand: an hour of outage passes without sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, **delta: float) -> datetime:
        with self._lock:
            self._now += timedelta(**delta)
            return self._now


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=JIRA_FLAVOURS)
def jira_flavour(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def jira_emulator(jira_flavour: str, clock: ManualClock) -> Iterator[JiraEmulator]:
    emulator = JiraEmulator(jira_flavour, clock=clock).start()
    try:
        yield emulator
    finally:
        emulator.stop()
