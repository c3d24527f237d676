"""Web login sessions and the application secret shared by every worker."""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from registry.db import Base, utcnow
from registry.upsert import insert_ignore


class WebSession(Base):
    """A browser login: the cookie carries a random id, only its SHA-256 is stored."""

    __tablename__ = "web_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]

    __table_args__ = (Index("ix_web_sessions_expires", "expires_at"),)


class AppSecret(Base):
    """Secrets generated on first use, so every gunicorn worker signs cookies alike."""

    __tablename__ = "app_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


def shared_secret(session: Session, name: str) -> str:
    """The secret stored as `name`, made (random) on first use; concurrent first uses agree."""
    insert_ignore(session, AppSecret, {"name": name, "value": secrets.token_hex(32)}, ["name"])
    return session.scalar(select(AppSecret.value).where(AppSecret.name == name)) or ""
