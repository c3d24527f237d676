"""RCAs (root-cause analyses) of signatures, their evidence-check results and their reviews."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, Float, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

RCA_STATUSES = ("proposed", "confirmed", "rejected", "superseded")
AUTHOR_KINDS = ("human", "ai")
REVIEW_VERDICTS = ("confirmed", "rejected")
CONFIRMED = "status = 'confirmed'"


class Rca(Base):
    __tablename__ = "rcas"

    id: Mapped[int] = mapped_column(primary_key=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("signatures.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default="proposed")
    summary: Mapped[str] = mapped_column(String(500))
    body: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(String(255))
    author_kind: Mapped[str] = mapped_column(String(8))
    agent_name: Mapped[str | None] = mapped_column(String(255))
    agent_model: Mapped[str | None] = mapped_column(String(255))
    confidence: Mapped[float | None] = mapped_column(Float)
    evidence: Mapped[list[Any]] = mapped_column(default=list)
    fix_commit: Mapped[str | None] = mapped_column(String(64))
    fix_url: Mapped[str | None] = mapped_column(String(1000))
    fixed_in_kernel: Mapped[str | None] = mapped_column(String(128))
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    token_name: Mapped[str] = mapped_column(String(128), doc="name of the token that posted it")
    checks: Mapped[list[Any]] = mapped_column(default=list, doc="evidence check results")
    checks_passed: Mapped[bool] = mapped_column(Boolean, doc="false = flagged: a check failed")
    checked_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    reviewed_at: Mapped[datetime | None]
    reviewed_by: Mapped[str | None] = mapped_column(String(128))
    review_note: Mapped[str | None] = mapped_column(Text)
    superseded_by_id: Mapped[int | None] = mapped_column(ForeignKey("rcas.id"))
    superseded_at: Mapped[datetime | None]

    __table_args__ = (
        CheckConstraint(f"status IN {RCA_STATUSES}", name="status"),
        CheckConstraint(f"author_kind IN {AUTHOR_KINDS}", name="author_kind"),
        CheckConstraint("confidence IS NULL OR (confidence >= 0 AND confidence <= 1)", name="confidence"),
        Index("ix_rcas_signature_created", "signature_id", "created_at"),
        # One confirmed RCA per signature, enforced by the database on both backends.
        Index(
            "uq_rcas_one_confirmed_per_signature",
            "signature_id",
            unique=True,
            postgresql_where=text(CONFIRMED),
            sqlite_where=text(CONFIRMED),
        ),
    )


class RcaReview(Base):
    """Every review verdict, in order: the history behind an RCA's current status."""

    __tablename__ = "rca_reviews"

    id: Mapped[int] = mapped_column(primary_key=True)
    rca_id: Mapped[int] = mapped_column(ForeignKey("rcas.id", ondelete="CASCADE"))
    verdict: Mapped[str] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(Text)
    reviewer: Mapped[str] = mapped_column(String(128))
    reviewer_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    checks_passed: Mapped[bool] = mapped_column(Boolean, doc="the checks' outcome when reviewed")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        CheckConstraint(f"verdict IN {REVIEW_VERDICTS}", name="verdict"),
        Index("ix_rca_reviews_rca", "rca_id"),
    )
