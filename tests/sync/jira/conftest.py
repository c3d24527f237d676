"""Jira sync tests: the registry on both databases, Jira emulated in both flavours."""

from __future__ import annotations

import pytest

from registry.config import JiraSettings, Settings
from registry.db import utcnow
from tests.emulators.fixtures import JIRA_FLAVOURS, ManualClock, jira_emulator, jira_flavour
from tests.support.jira import WEBHOOK_SECRET

__all__ = ["JIRA_FLAVOURS", "clock", "jira_emulator", "jira_flavour", "settings"]


@pytest.fixture
def clock() -> ManualClock:
    """Starts at the real present: rows stamped by the database defaults line up with it."""
    return ManualClock(utcnow().replace(microsecond=0))


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, public_url="http://crashreg.test",
                    jira=JiraSettings(webhook_secret=WEBHOOK_SECRET))


@pytest.fixture
def harness(database, settings, jira_emulator, clock):
    from tests.support.jira import Harness, jira_options

    return Harness(database, settings, jira_emulator, clock, jira_options(jira_emulator))
