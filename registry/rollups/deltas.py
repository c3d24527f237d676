"""Adding a batch's deltas to a rollup table: the one write every rollup's fold makes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection


def add_deltas(connection: Connection, statement: Any, emptied: Any, rows: list[dict[str, Any]],
               shrunk: Sequence[str]) -> None:
    """Add `rows` (`statement`: an upsert that sums them in); those whose `shrunk` deltas took
    something away may have emptied their row, which `emptied` deletes."""
    if rows:
        connection.execute(statement, rows)
    taken = [row for row in rows if any(row[c] < 0 for c in shrunk)]
    if taken:
        connection.execute(emptied, taken)
