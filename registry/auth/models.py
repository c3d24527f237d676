"""API tokens: only a hash is stored; the token itself is shown once at creation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    scope: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16), default="human")
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


@dataclass(frozen=True)
class TokenHolder:
    """Who a live token belongs to, as a request knows its caller (`g.token`): a plain record
    made from the token's row, not an ORM entity per request (a report's hot path)."""

    id: int
    name: str
    scope: str
    kind: str
    last_used_at: datetime | None

    @staticmethod
    def of(row: Mapping[str, Any]) -> TokenHolder:
        return TokenHolder(**{name: row[name] for name in HOLDER_FIELDS})


HOLDER_FIELDS = tuple(field.name for field in fields(TokenHolder))
