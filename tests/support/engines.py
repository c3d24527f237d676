"""A signature engine with a bug, on the app's wiring: the seam ingest calls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from registry.app import create_app
from registry.config import Settings
from registry.db import Database
from registry.domains import wiring
from registry.signatures.identify import identify


def engine_with_a_bug(console_log: str | None, stack: dict[str, Any] | None) -> Any:
    """The real engine, then a bug of the kind an engine change brings: it reads one frame past
    the explanation's frames (IndexError)."""
    crash = identify(console_log, stack)
    frames = crash.explanation["frames"] if crash else []
    return frames[len(frames)]


def app_with_a_failing_engine(settings: Settings, database: Database) -> Any:
    app = create_app(settings, database, replace(wiring(), engine=f"{__name__}:engine_with_a_bug"))
    app.config["TESTING"] = True
    return app
