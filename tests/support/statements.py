"""The statements and pool checkouts a piece of work costs a database, as SQLAlchemy sends them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import event

from registry.core.events import SCHEMA_FACTS
from registry.db import PLAN_GENERICALLY


@dataclass
class Counted:
    statements: list[str] = field(default_factory=list)
    checkouts: int = 0
    # what a connection ingest uses asks or sets once in its life (its plan cache mode, whether
    # reports are keyed): not the work's own
    setups: int = 0


@contextmanager
def counted(database) -> Iterator[Counted]:  # type: ignore[no-untyped-def]
    seen = Counted()

    def statement(_conn, _cursor, sql, _parameters, _context, _many) -> None:  # type: ignore[no-untyped-def]
        if sql in (PLAN_GENERICALLY, SCHEMA_FACTS):
            seen.setups += 1
        else:
            seen.statements.append(sql)

    def checkout(*_args) -> None:  # type: ignore[no-untyped-def]
        seen.checkouts += 1

    event.listen(database.engine, "before_cursor_execute", statement)
    event.listen(database.engine, "checkout", checkout)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", statement)
        event.remove(database.engine, "checkout", checkout)
