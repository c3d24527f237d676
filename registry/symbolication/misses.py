"""The build-ids a report lacked symbols for: in its signature's explanation, and noted by
report (SymbolMiss) for the re-run when they arrive."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, String, and_, cast, delete, exists, func, literal, or_, select

from registry.core.events import Report
from registry.db import Database, utcnow
from registry.upsert import DIALECTS, insert_ignore_statement

from .models import NAMED_BUILD_IDS, USERSPACE, SymbolMiss

UNSYMBOLICATED = "unsymbolicated"  # the explanation's list of build-ids that lacked symbols
UNSTORED_AFTER = timedelta(days=1)  # a report's own transaction ends within seconds of its note
# The process's Symbolicator of each database: what to tell once a report that missed symbols is
# committed (service.Symbolicator.recheck).
RECHECKS: weakref.WeakKeyDictionary[Database, Callable[[list[str]], None]] = weakref.WeakKeyDictionary()


def unsymbolicated(crash: Any) -> list[str]:
    """The build-ids a crash signature's stack lacked symbols for."""
    explanation = getattr(crash, "explanation", None) or {}
    missing = explanation.get(UNSYMBOLICATED) if isinstance(explanation, dict) else None
    return [b for b in missing if isinstance(b, str)] if isinstance(missing, list) else []


def note_misses(database: Database, report_id: str, build_ids: list[str]) -> None:
    """Note, in a transaction and a statement of its own, the build-ids a report lacked symbols
    for (a report naming a vendor's library that never has symbols notes it every time). Part
    of the report's request: its lock waits are bounded as ingest's are."""
    if not build_ids:
        return
    now = utcnow()
    rows = [{"build_id": build_id, "report_id": report_id, "noted_at": now}
            for build_id in dict.fromkeys(build_ids)]
    with database.session(bounded=True) as session:
        statement = insert_ignore_statement(session.get_bind().dialect.name, SymbolMiss.__table__, (), None)
        session.connection().execute(statement, rows)  # one INSERT of every row (insertmanyvalues)


def note_reports_naming(database: Database, build_id: str) -> None:
    """Note every stored userspace report whose stack names the build-id, as if each had
    missed it: after DWARF replaced the build's symbol table, they are symbolicated again by
    the notes' indexed path. In one statement (reports_naming)."""
    naming = reports_naming(database.engine.dialect.name, build_id)
    with database.session() as session:
        insert = DIALECTS[session.get_bind().dialect.name].insert(SymbolMiss.__table__)
        session.execute(insert.from_select(["build_id", "report_id", "noted_at"], naming)
                        .on_conflict_do_nothing())


def reports_naming(dialect: str, build_id: str) -> Select[Any]:
    """(build_id, report_id, now) of each userspace report whose stack names the build-id: on
    PostgreSQL read from ix_reports_build_ids (the build-id as sent, in either case), on SQLite
    by one search of the userspace payloads."""
    if dialect == "postgresql":
        spellings = sorted({build_id, build_id.lower(), build_id.upper()})
        named = [NAMED_BUILD_IDS.op("@>")(func.jsonb_build_array(spelling)) for spelling in spellings]
        # the index's own predicate, as written (a parameter for the source would not prove it)
        names = and_(USERSPACE, or_(*named))
    else:
        names = and_(Report.source == "userspace",
                     cast(Report.payload, String).icontains(build_id, autoescape=True))
    return select(literal(build_id), Report.report_id, literal(utcnow())).where(names)


def committed(database: Database, build_ids: list[str]) -> None:
    """A report that missed these build-ids is committed: the Symbolicator runs again those
    whose symbols arrived while it was in flight."""
    recheck = RECHECKS.get(database)
    if recheck is not None:
        recheck(build_ids)


def forget_unstored(database: Database, now: datetime) -> int:
    """Drop the notes of reports that were never stored (refused, or failed after the note was
    written) once UNSTORED_AFTER has passed: they match nothing and would be kept for good. How many."""
    stored = exists().where(Report.report_id == SymbolMiss.report_id)
    with database.session() as session:
        gone = session.execute(delete(SymbolMiss).where(SymbolMiss.noted_at < now - UNSTORED_AFTER, ~stored))
        return int(gone.rowcount or 0)
