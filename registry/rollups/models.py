"""Rollups: counts of events kept current by folding a queue of changes, never by scanning events.

Every change to an event that a rollup counts (insert, update of a counted column, delete) adds
a row to `rollup_changes` from a trigger on `events`, inside the changing transaction: an append,
no row shared by two reports, so a storm of one signature does not serialise on a rollup row.
The rollups job folds the queue into the tables below (docs/rollups.md). Detaching an events
partition (an archive) fires no trigger: the rollups stay the record of what was counted.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, Date, Integer, SmallInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

QueueId = BigInteger().with_variant(Integer, "sqlite")  # SQLite: the rowid, given in order


class RollupChange(Base):
    """One event counted in (+1) or out (-1) of the rollups, as the event was then."""

    __tablename__ = "rollup_changes"

    id: Mapped[int] = mapped_column(QueueId, primary_key=True)
    delta: Mapped[int] = mapped_column(SmallInteger)
    signature_id: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str | None] = mapped_column(String(64), doc="the signature's kind")
    host_id: Mapped[int] = mapped_column(Integer)
    crashed_at: Mapped[datetime]
    region: Mapped[str | None] = mapped_column(String(128))
    kernel_version: Mapped[str | None] = mapped_column(String(128))
    capture_action: Mapped[str | None] = mapped_column(String(16))
    regression: Mapped[str | None] = mapped_column(String(32))
    bios_version: Mapped[str | None] = mapped_column(String(128))
    sku: Mapped[str | None] = mapped_column(String(128))
    first_source: Mapped[str | None] = mapped_column(String(16))
    memory_gb: Mapped[int | None] = mapped_column(Integer)
    repeats: Mapped[int] = mapped_column(BigInteger)


class RollupBackfill(Base):
    """Present while the rollups must be built from events once (after the migration that made
    them, on a registry that had events): the next fold builds them first."""

    __tablename__ = "rollup_backfills"

    requested_at: Mapped[datetime] = mapped_column(primary_key=True, default=utcnow)


class BreakdownDaily(Base):
    """Events per UTC day and value of one dimension (what `rpt_daily_breakdown` shows)."""

    __tablename__ = "rollup_breakdown_daily"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    dimension: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[str] = mapped_column(String(255), primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    memory_gb: Mapped[int] = mapped_column(BigInteger, doc="summed over the events whose memory is known")
    memory_known: Mapped[int] = mapped_column(BigInteger, doc="how many events' memory is known")
    repeats: Mapped[int] = mapped_column(BigInteger)


class SignatureHostDaily(Base):
    """Events per signature, UTC day and host: what makes the daily host counts exact."""

    __tablename__ = "rollup_signature_host_daily"

    signature_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    host_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)


class SignatureDaily(Base):
    """Events and distinct hosts per signature and UTC day (`rpt_signature_daily`)."""

    __tablename__ = "rollup_signature_daily"

    signature_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    hosts: Mapped[int] = mapped_column(BigInteger)


class SignatureSources(Base):
    """Events and their repeats per signature and first source (the list's "from where")."""

    __tablename__ = "rollup_signature_sources"

    signature_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(16), primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    repeats: Mapped[int] = mapped_column(BigInteger)
