"""Alembic environment wired to the registry's models (the whole schema in registry.models)."""

from __future__ import annotations

from typing import Any

from alembic import context

from registry.config import Settings
from registry.db import UTCDateTime, make_engine
from registry.migrate import for_dialect
from registry.models import Base

config = context.config
target_metadata = Base.metadata


def database_url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings.from_env().database_url


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """Render the UTC type as what it is in the database, so migrations don't import app code."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        render_item=render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(database_url())
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # Batch migrations rebuild a table and rename it into place; without this, SQLite
            # refuses the rename while the reporting views name the table.
            connection.exec_driver_sql("PRAGMA legacy_alter_table=ON")
            connection.commit()
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            render_item=render_item,
            compare_type=True,
            include_object=for_dialect(connection.dialect.name),
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
