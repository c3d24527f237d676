"""Race-safe INSERT ... ON CONFLICT for both databases."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Executable, Select, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from registry.db import Base

DIALECTS = {"postgresql": postgresql, "sqlite": sqlite}


def insert_ignore(
    session: Session,
    model: type[Base],
    values: dict[str, Any],
    conflict: list[str],
    returning: tuple[str, ...] | None = None,
) -> Any | None:
    """Insert unless a row with the same `conflict` key (empty: any key) exists; return the new
    primary key (or the `returning` columns' row) or None.

    Under concurrency the loser waits for the winner's transaction and then does nothing,
    so callers re-read the winner's row instead of failing.
    """
    statement = insert_ignore_statement(
        session.get_bind().dialect.name, model.__table__, tuple(conflict), returning
    )
    result = session.connection().execute(statement, values)
    return result.scalar_one_or_none() if returning is None else result.one_or_none()


@cache
def insert_ignore_statement(
    dialect: str, table: Table, conflict: tuple[str, ...], returning: tuple[str, ...] | None
) -> Executable:
    # One Core statement object per table and shape, reused: SQLAlchemy's compiled cache then
    # hits on its first lookup, and the values travel as execution parameters.
    # No `conflict` columns: any conflict (a key kept by a trigger, as events' is on PostgreSQL).
    statement = DIALECTS[dialect].insert(table).on_conflict_do_nothing(index_elements=list(conflict) or None)
    if returning is None:
        return statement.returning(next(iter(table.primary_key.columns)))
    return statement.returning(*(table.c[name] for name in returning))


Increments = dict[str, Callable[[Any], ColumnElement[Any]]]


def insert_or_increment_statement(
    dialect: str,
    table: Table,
    conflict: list[str],
    increments: Increments,
    rows: tuple[list[str], Select[Any]] | None = None,
) -> Executable:
    """Insert, or apply `increments` (column -> SQL expression of `excluded`) to the existing row.

    Build it once per dialect and execute it with the values as parameters; `rows`: insert these
    columns from this SELECT instead (inside a bigger statement)."""
    statement = DIALECTS[dialect].insert(table)
    if rows is not None:
        statement = statement.from_select(*rows, include_defaults=False)
    return statement.on_conflict_do_update(
        index_elements=conflict,
        set_={column: make(statement.excluded) for column, make in increments.items()},
    )
