"""Engineers' pins on dumps (kept with their history) and the console logs retention trimmed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

ACTIVE = "unpinned_at IS NULL"


class DumpPin(Base):
    """A pin keeps a capture's dump from retention until it is unpinned. Rows are never
    deleted: who pinned, when and why, and who unpinned when, is the audit trail."""

    __tablename__ = "dump_pins"

    id: Mapped[int] = mapped_column(primary_key=True)
    capture_id: Mapped[int] = mapped_column(ForeignKey("captures.id", ondelete="CASCADE"))
    note: Mapped[str | None] = mapped_column(String(500))
    pinned_by: Mapped[str] = mapped_column(String(128), doc="the pinning token's name")
    pinned_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    pinned_at: Mapped[datetime] = mapped_column(default=utcnow)
    unpinned_by: Mapped[str | None] = mapped_column(String(128))
    unpinned_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    unpinned_at: Mapped[datetime | None]

    __table_args__ = (
        Index("ix_dump_pins_capture", "capture_id", "pinned_at"),
        # One standing pin per capture, on both databases.
        Index(
            "uq_dump_pins_active",
            "capture_id",
            unique=True,
            postgresql_where=text(ACTIVE),
            sqlite_where=text(ACTIVE),
        ),
    )


class ConsoleTrim(Base):
    """A report whose console log retention cut down to its crash report (registry.retention.trim)."""

    __tablename__ = "console_trims"

    report_id: Mapped[int] = mapped_column(ForeignKey("reports.id", ondelete="CASCADE"), primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    trimmed_at: Mapped[datetime] = mapped_column(default=utcnow)
    first_line: Mapped[int] = mapped_column(Integer, doc="the kept text's first line in the whole log")
    total_lines: Mapped[int] = mapped_column(Integer, doc="lines in the whole log")
    whole_bytes: Mapped[int] = mapped_column(BigInteger)
    kept_bytes: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_console_trims_event", "event_id"),)


class ArchivedDumps(Base):
    """The deleted dumps whose rows the archive took (registry.retention.archive.TALLIES), by
    the time retention deleted them: the dump store's history figures add them."""

    __tablename__ = "archived_dumps"

    deleted_at: Mapped[datetime] = mapped_column(primary_key=True, doc="the gc run that deleted them")
    dumps: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)


class ArchivedConsoleTrims(Base):
    """The console trims that freed bytes whose rows the archive took, by the time retention
    trimmed them: the trimmed console logs' figures add them."""

    __tablename__ = "archived_console_trims"

    trimmed_at: Mapped[datetime] = mapped_column(primary_key=True, doc="the gc run that trimmed them")
    logs: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)


class NamedBuildId(Base):
    """A build-id some stored report names (its stack's, a frame's, a mapping's, a module's):
    its symbols are needed for good. Filled by retention's scan of the reports
    (registry.retention.symbols), so that keeping a symbol file never searches every payload."""

    __tablename__ = "named_build_ids"

    build_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    first_report_id: Mapped[int] = mapped_column(
        BigInteger, doc="the first report that named it (not a key: reports may be archived)")


class ScanMark(Base):
    """Where a resumable scan of an append-only table stopped: the next run starts after it."""

    __tablename__ = "scan_marks"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
