"""Which reports lacked symbols, by build-id: what to symbolicate again when they arrive."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, func, literal_column, text, true
from sqlalchemy.orm import Mapped, mapped_column

from registry.core.events import Report
from registry.db import Base, utcnow


class SymbolMiss(Base):
    """A report whose stack had frames of this build-id when the registry had no symbols for
    it. Keyed by report_id (known before the report is stored: the note is written before the
    report's own transaction, so an acknowledged report never lacks its note); a report that
    was never stored leaves a note that matches nothing."""

    __tablename__ = "symbol_misses"

    build_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    report_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    noted_at: Mapped[datetime] = mapped_column(default=utcnow)


# The build-ids a userspace report's stack names, every thread's frames and the executable's
# (PostgreSQL): when DWARF replaces a build's symbol table, the reports to symbolicate again
# are found by the index below, not by a search of every payload (misses.note_reports_naming).
NAMED_BUILD_IDS = func.jsonb_path_query_array(
    Report.__table__.c.payload, literal_column("'strict $.stack.**.build_id'"), literal_column("'{}'"),
    true())
USERSPACE = text("source = 'userspace'")
Index("ix_reports_build_ids", NAMED_BUILD_IDS, postgresql_using="gin", postgresql_where=USERSPACE) \
    .ddl_if(dialect="postgresql")
