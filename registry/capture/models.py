"""Captures: what was dumped (or deliberately not) for an event."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

CAPTURE_METHODS = ("makedumpfile", "drgn", "dpu_rdma", "raw")
CAPTURE_STATUSES = ("started", "completed", "failed", "skipped")


class Capture(Base):
    __tablename__ = "captures"

    id: Mapped[int] = mapped_column(primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    signature_id: Mapped[int | None] = mapped_column(ForeignKey("signatures.id"))
    method: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    dump_level: Mapped[int | None] = mapped_column(Integer)
    bytes: Mapped[int | None] = mapped_column(BigInteger)
    duration_s: Mapped[float | None] = mapped_column(Float)
    downtime_s: Mapped[float | None] = mapped_column(Float)
    target: Mapped[str | None] = mapped_column(String(512))
    uri: Mapped[str | None] = mapped_column(Text)
    processing_state: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ix_captures_event", "event_id"),
        Index("ix_captures_signature_status", "signature_id", "status", "created_at"),
    )
