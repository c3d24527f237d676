"""A rebuild's fingerprints, kept in the database until it applies them.

Re-fingerprinting years of history takes hours: each event's new fingerprint is written here as
it is made, in the same short transactions, so the rebuild holds no per-event state in memory
(only one entry per distinct fingerprint) and a rebuild that was stopped continues after the
last event it wrote here. The applying transaction reads its plan from these rows joined with
the events and deletes them when it commits.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base

WHOLE_HISTORY = "all"  # a rebuild of every event: the one that continues where a stopped one ended
CRASH, NO_CRASH, ENGINE_FAILED = "crash", "none", "failed"


class RebuildFingerprint(Base):
    """One event's outcome under the rebuilding engine: its fingerprint (a crash), no crash, or
    the engine failed on it."""

    __tablename__ = "rebuild_fingerprints"

    scope: Mapped[str] = mapped_column(
        String(64), primary_key=True,
        doc="WHOLE_HISTORY, or the run's own name for a rebuild of some events (symbols arrived)",
    )
    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    outcome: Mapped[str] = mapped_column(String(8))
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    algorithm_version: Mapped[int] = mapped_column(
        Integer, doc="the engine's: a stopped run's rows count for a rebuild by the same engine only")

    # the applying step reads each new fingerprint's events in order
    __table_args__ = (Index("ix_rebuild_fingerprints_fingerprint", "scope", "fingerprint", "event_id"),)
