"""Signatures (one per bug), their fingerprint aliases and their sharded event counters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

SIGNATURE_STATUSES = ("new", "triaged", "resolved", "regressed", "ignored")
CAPTURE_POLICIES = ("auto", "full", "filtered", "skip")
COUNTER_SHARDS = 16
# The counter row of a signature's archived events (docs/partitioning.md, "Archive"): kept by
# recounts, which rebuild the other shards from the events still stored.
ARCHIVED_SHARD = -1


class Signature(Base):
    __tablename__ = "signatures"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    algorithm_version: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(512))
    # The database's default and deferred: ingest neither writes nor reads it, so it runs on a
    # database an upgrade has not brought to 0044 yet (migrations run beside live ingest).
    title_by_hand: Mapped[bool] = mapped_column(
        server_default=false(), deferred=True,
        doc="the title was set through the API: a rebuild keeps it (the engine's names it writes over)")
    kind: Mapped[str] = mapped_column(String(64))
    function: Mapped[str | None] = mapped_column(String(255))
    module: Mapped[str | None] = mapped_column(String(128))
    frames: Mapped[list[Any]] = mapped_column(default=list)
    labels: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="new")
    owner: Mapped[str | None] = mapped_column(String(255))
    first_seen: Mapped[datetime]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    resolved_at: Mapped[datetime | None]
    resolution: Mapped[str | None] = mapped_column(String(128))
    fix_versions: Mapped[list[Any]] = mapped_column(default=list)
    fixed_in_kernel: Mapped[str | None] = mapped_column(String(128))
    capture_policy: Mapped[str] = mapped_column(String(16), default="auto")
    capture_dump_level: Mapped[int | None] = mapped_column(Integer)
    extra_full_captures: Mapped[int] = mapped_column(Integer, default=0)
    merged_into_id: Mapped[int | None] = mapped_column(ForeignKey("signatures.id"))
    notes: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(f"status IN {SIGNATURE_STATUSES}", name="status"),
        CheckConstraint(f"capture_policy IN {CAPTURE_POLICIES}", name="capture_policy"),
        Index("ix_signatures_status", "status"),
        Index("ix_signatures_first_seen", "first_seen"),
        Index("ix_signatures_function", "function"),
    )


class SignatureAlias(Base):
    """Routes a fingerprint to a signature: manual merges and algorithm-version rebuilds."""

    __tablename__ = "signature_aliases"

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("signatures.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (Index("ix_signature_aliases_signature", "signature_id"),)


class SignatureCounter(Base):
    """Event count and last sighting, spread over shards so a crash storm has no hot row."""

    __tablename__ = "signature_counters"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("signatures.id", ondelete="CASCADE"), primary_key=True
    )
    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    events: Mapped[int] = mapped_column(Integer, default=0)
    last_seen: Mapped[datetime]
