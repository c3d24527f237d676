"""Fixtures for the Grafana tests: the emulator, and settings pointing at it (and at a
throwaway read-only role on PostgreSQL)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from registry.config import Settings
from tests.emulators.grafana import RunningGrafana, serve_grafana
from tests.grafana.roles import drop_role


@pytest.fixture
def grafana() -> Iterator[RunningGrafana]:
    with serve_grafana() as running:
        yield running


@pytest.fixture
def grafana_settings(settings: Settings, grafana: RunningGrafana) -> Iterator[Settings]:
    """Settings pointing at the emulator; on PostgreSQL, a uniquely named read-only role."""
    role = f"crashreg_grafana_{secrets.token_hex(4)}"
    grafana_db_url = None
    if settings.database_url.startswith("postgresql"):
        url = make_url(settings.database_url)
        grafana_db_url = url.set(username=role, password=secrets.token_hex(12)).render_as_string(
            hide_password=False
        )
    yield dataclasses.replace(
        settings, grafana_url=grafana.url, grafana_token=grafana.token, grafana_db_url=grafana_db_url
    )
    if grafana_db_url:
        drop_role(settings.database_url, role)
