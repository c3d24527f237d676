"""Per-signature counts read from the rollups, with the queued changes not yet folded added, so
a page shows every event the moment its report is acknowledged without scanning the
signature's events (the queue holds the last seconds' changes; docs/rollups.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from .dialect import DAY


def _date(value: Any) -> date:
    """A Date column's value: a date (PostgreSQL) or 'YYYY-MM-DD' (SQLite)."""
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _rows(session: Session, sql: str, signature_ids: Sequence[int], **params: Any) -> Any:
    statement = text(sql).bindparams(bindparam("ids", expanding=True))
    return session.execute(statement, {"ids": list(signature_ids), **params})


def signature_daily(
    session: Session, signature_ids: Sequence[int], since: date | None = None
) -> dict[int, dict[date, int]]:
    """Events per signature and UTC day (from the day `since` on)."""
    day = DAY[session.get_bind().dialect.name]("crashed_at")
    after = "" if since is None else " AND day >= :since"
    sql = (
        f"SELECT signature_id, day, SUM(events) FROM ("
        f"SELECT signature_id, day, events FROM rollup_signature_daily WHERE signature_id IN :ids{after} "
        f"UNION ALL SELECT signature_id, {day} AS day, delta FROM rollup_changes "
        f"WHERE signature_id IN :ids) AS counted WHERE 1 = 1{after} GROUP BY signature_id, day"
    )
    counts: dict[int, dict[date, int]] = {sid: {} for sid in signature_ids}
    for signature_id, day_value, events in _rows(session, sql, signature_ids, since=since):
        if events:
            counts[signature_id][_date(day_value)] = int(events)
    return counts


def signature_sources(
    session: Session, signature_ids: Sequence[int]
) -> dict[int, dict[str, tuple[int, int]]]:
    """Per signature and first source: (events, their repeats)."""
    if not signature_ids:
        return {}
    sql = (
        "SELECT signature_id, source, SUM(events), SUM(repeats) FROM ("
        "SELECT signature_id, source, events, repeats FROM rollup_signature_sources "
        "WHERE signature_id IN :ids UNION ALL "
        "SELECT signature_id, first_source, delta, delta * repeats FROM rollup_changes "
        "WHERE signature_id IN :ids) AS counted GROUP BY signature_id, source"
    )
    counts: dict[int, dict[str, tuple[int, int]]] = {}
    for signature_id, source, events, repeats in _rows(session, sql, signature_ids):
        if events:
            counts.setdefault(signature_id, {})[source] = (int(events), int(repeats))
    return counts
