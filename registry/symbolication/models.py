"""Which reports lacked symbols, by build-id: what to symbolicate again when they arrive."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

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
