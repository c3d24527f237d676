"""Alembic, driven from code: the only way the schema is created or changed."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from registry.partitions import is_partitioning_table

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def for_dialect(dialect_name: str) -> Callable[..., bool]:
    """Alembic's include_object: leave out indexes and unique keys the models declare for
    another dialect only (`Index(...).ddl_if(dialect=...)`), and PostgreSQL's partitions and
    key tables (registry.partitions: made by the migrations, no model's), so comparing models
    with a database stays exact."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        if type_ == "table" and reflected and compare_to is None and is_partitioning_table(name or ""):
            return False
        if type_ == "foreign_key_constraint" and reflected and is_partitioning_table(obj.referred_table.name):
            return False  # PostgreSQL's per-partition part of a key into a partitioned table
        condition = getattr(obj, "_ddl_if", None)
        return not (
            type_ in ("index", "unique_constraint")
            and condition is not None
            and condition.dialect not in (None, dialect_name)
        )

    return include


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


@cache
def _scripts() -> ScriptDirectory:
    """The code's migrations (read once per process: they change only with the code)."""
    return ScriptDirectory.from_config(alembic_config("sqlite://"))


@cache
def head_revisions() -> frozenset[str]:
    return frozenset(_scripts().get_heads())


@cache
def known_revisions() -> frozenset[str]:
    """Every migration this code has: a database at another is a later release's."""
    return frozenset(script.revision for script in _scripts().walk_revisions())


def current_revisions(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())
