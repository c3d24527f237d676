"""Retention's gc over a local store of the test's own, on both databases."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from registry.config import DumpStoreSettings, Settings
from registry.storage.store import DumpStore, open_store


@pytest.fixture
def store(tmp_path: Path, settings: Settings) -> DumpStore:
    return open_store(DumpStoreSettings(url=str(tmp_path / "dumps")), settings.public_url)


@pytest.fixture
def gc_settings(settings: Settings, tmp_path: Path) -> Settings:
    return replace(settings, dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")))
