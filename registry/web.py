"""Flask-side access to the app's database and settings, for the domain blueprints."""

from __future__ import annotations

from flask import current_app

from registry.config import Settings
from registry.db import Database


def current_db() -> Database:
    return current_app.extensions["crashreg.db"]


def current_settings() -> Settings:
    return current_app.extensions["crashreg.settings"]
