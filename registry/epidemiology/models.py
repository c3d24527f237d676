"""Stored epidemiology (refreshed by the scheduler): what Grafana's dashboard reads.

- `epidemiology_verdicts`: one row per signature, the verdict and its headline numbers.
- `epidemiology_findings`: the over-represented attribute values, per signature and baseline.
- `epidemiology_suspect_hosts`: fleet-wide suspects (physical hosts spraying signatures).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base


class EpidemiologyVerdict(Base):
    __tablename__ = "epidemiology_verdicts"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("signatures.id", ondelete="CASCADE"), primary_key=True
    )
    verdict: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    baseline: Mapped[str] = mapped_column(String(16), doc="fleet | crashes: what decided")
    events: Mapped[int] = mapped_column(Integer)
    hosts: Mapped[int] = mapped_column(Integer)
    top_attribute: Mapped[str | None] = mapped_column(String(64))
    top_value: Mapped[str | None] = mapped_column(String(255))
    top_in_signature: Mapped[float | None] = mapped_column(Float)
    top_overall: Mapped[float | None] = mapped_column(Float)
    top_lift: Mapped[float | None] = mapped_column(Float)
    top_p_value: Mapped[float | None] = mapped_column(Float)
    more_events_needed: Mapped[int | None] = mapped_column(Integer)
    first_seen: Mapped[datetime | None]
    change_point: Mapped[datetime | None]
    onset_shape: Mapped[str | None] = mapped_column(String(32))
    uptime_statement: Mapped[str | None] = mapped_column(Text)
    analysis: Mapped[dict[str, Any]] = mapped_column(doc="the full endpoint body")
    computed_at: Mapped[datetime]

    __table_args__ = (Index("ix_epidemiology_verdicts_verdict", "verdict"),)


class EpidemiologyFinding(Base):
    __tablename__ = "epidemiology_findings"

    id: Mapped[int] = mapped_column(primary_key=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("signatures.id", ondelete="CASCADE"))
    baseline: Mapped[str] = mapped_column(String(16))
    rank: Mapped[int] = mapped_column(Integer, doc="1 = strongest")
    attribute: Mapped[str] = mapped_column(String(64))
    value: Mapped[str] = mapped_column(String(255))
    in_signature: Mapped[float] = mapped_column(Float)
    overall: Mapped[float] = mapped_column(Float)
    lift: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    log10_p: Mapped[float] = mapped_column(Float)
    events: Mapped[int] = mapped_column(Integer)
    explained_by: Mapped[str | None] = mapped_column(String(320))
    computed_at: Mapped[datetime]

    __table_args__ = (Index("ix_epidemiology_findings_signature", "signature_id", "baseline"),)


class EpidemiologySuspectHost(Base):
    __tablename__ = "epidemiology_suspect_hosts"

    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    physical_host: Mapped[str] = mapped_column(String(255))
    crashes: Mapped[int] = mapped_column(Integer)
    signatures: Mapped[int] = mapped_column(Integer)
    expected_signatures: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    log10_p: Mapped[float] = mapped_column(Float)
    evidence: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column()
    computed_at: Mapped[datetime]
