"""Alembic is the only schema path: round trips work and models agree with migrations."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from registry.db import make_engine
from registry.migrate import downgrade, for_dialect, upgrade
from registry.models import Base


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    downgrade(db_url, "base")
    engine = make_engine(db_url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
    upgrade(db_url)
    engine = make_engine(db_url)
    assert {"events", "reports", "signatures", "hosts", "api_tokens"} <= set(
        inspect(engine).get_table_names()
    )
    engine.dispose()


def test_models_and_migrations_agree(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={"compare_type": True, "include_object": for_dialect(connection.dialect.name)},
        )
        differences = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert differences == []
