"""Race-safe INSERT ... ON CONFLICT for both databases."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from registry.db import Base


def insert_ignore(
    session: Session, model: type[Base], values: dict[str, Any], conflict: list[str]
) -> Any | None:
    """Insert unless a row with the same `conflict` key exists; return the new primary key or None.

    Under concurrency the loser waits for the winner's transaction and then does nothing,
    so callers re-read the winner's row instead of failing.
    """
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    pk = next(iter(model.__table__.primary_key.columns))
    # A Core insert on the table (not the ORM entity, which takes the ORM's bulk-persistence
    # path) with values as execution parameters: the cheapest statement SQLAlchemy can make.
    statement = dialect.insert(model.__table__).on_conflict_do_nothing(index_elements=conflict)
    statement = statement.returning(pk)
    return session.execute(statement, values).scalar_one_or_none()


def insert_or_increment(
    session: Session,
    model: type[Base],
    values: dict[str, Any],
    conflict: list[str],
    increments: dict[str, Any],
) -> None:
    """Insert, or apply `increments` (column -> SQL expression of `excluded`) to the existing row."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(model.__table__)
    statement = statement.on_conflict_do_update(
        index_elements=conflict,
        set_={column: make(statement.excluded) for column, make in increments.items()},
    )
    session.execute(statement, values)
