"""Captures (what was dumped, or deliberately not, for an event) and the capture slots."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

CAPTURE_METHODS = ("makedumpfile", "drgn", "dpu_rdma", "raw", "core", "core_filtered")
CAPTURE_STATUSES = ("started", "completed", "failed", "skipped")
PROCESSING_STATES = ("pending", "processing", "done", "failed")
SLOT_STATES = ("granted", "completed", "released")


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
    capture_key: Mapped[str | None] = mapped_column(
        String(128), doc="the reporter's idempotency key: a resent capture is stored once"
    )
    # The captured file is gone from its target (a core handler's directory cap deleted it).
    removed_at: Mapped[datetime | None] = mapped_column()
    removed_reason: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ix_captures_event", "event_id"),
        Index("ix_captures_signature_status", "signature_id", "status", "created_at"),
        Index("ix_captures_status_event", "status", "event_id").ddl_if(dialect="postgresql"),
        Index("ix_captures_event_key", "event_id", "capture_key", unique=True),
        Index("ix_captures_key", "capture_key"),  # removal notices name captures by key alone
    )


class SlotColumns:
    """A full-capture slot's columns beside its key: the slot number (1..K), the event holding
    it, and whether it still counts (see registry.capture.decide for the protocol). Rows are
    reused: a slot is (re)claimed by one event at a time."""

    slot: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(16))
    since: Mapped[datetime] = mapped_column(doc="when granted, or when completed/released")


def slot_table_args(table: str) -> tuple[Any, ...]:
    return (CheckConstraint(f"state IN {SLOT_STATES}", name="state"), Index(f"ix_{table}_event", "event_id"))


class CaptureSlot(SlotColumns, Base):
    """One of a signature's K full-capture slots; its state says whether it still counts
    against K (granted recently, or completed inside the window)."""

    __tablename__ = "capture_slots"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("signatures.id", ondelete="CASCADE"), primary_key=True
    )

    __table_args__ = slot_table_args(__tablename__)


class NoSignatureSlot(SlotColumns, Base):
    """One of the full-capture slots of reports without a signature: K per host (budget
    `host:<id>`) and K per fleet (budget `fleet`), used as a signature's capture slots are
    (registry.capture.no_signature)."""

    __tablename__ = "no_signature_slots"

    budget: Mapped[str] = mapped_column(String(32), primary_key=True)

    __table_args__ = slot_table_args(__tablename__)
