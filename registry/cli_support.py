"""What every CLI command shares: settings and the database from the environment."""

from __future__ import annotations

from functools import cache

from registry.config import Settings
from registry.db import Database


@cache
def cli_settings() -> Settings:
    return Settings.from_env()


@cache
def cli_database() -> Database:
    return Database(cli_settings().database_url)
