"""Secrets the registry makes for itself on first use and keeps in its database: the web
session's signing key (every gunicorn worker signs cookies alike), the Grafana role's password.
Read by no reporting role."""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from registry.db import Base, utcnow
from registry.upsert import insert_ignore


class AppSecret(Base):
    """A secret generated on first use, by name."""

    __tablename__ = "app_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


def shared_secret(session: Session, name: str) -> str:
    """The secret stored as `name`, made (random) on first use; concurrent first uses agree."""
    insert_ignore(session, AppSecret, {"name": name, "value": secrets.token_hex(32)}, ["name"])
    return session.scalar(select(AppSecret.value).where(AppSecret.name == name)) or ""
