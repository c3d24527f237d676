"""Transactional outbox: state changes integrations must hear about, written with the change."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, Session, mapped_column

from registry.db import Base, utcnow


class OutboxMessage(Base):
    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(String(64))
    signature_id: Mapped[int | None] = mapped_column(ForeignKey("signatures.id", ondelete="CASCADE"))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    processed_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_outbox_pending", "processed_at", "next_attempt_at"),)


def publish(session: Session, topic: str, signature_id: int | None, **payload: Any) -> None:
    """Record a change in the caller's transaction, so it commits or rolls back with it."""
    session.add(OutboxMessage(topic=topic, signature_id=signature_id, payload=payload))
