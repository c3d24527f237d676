"""What the Jira sync keeps for itself: webhook receipts (deduplication by Jira's delivery
identifier) and reconciliation cursors (how far the `updated` scan has got). The link between
a signature and its issue is a core record (registry/core/jira_links.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow


class JiraWebhookReceipt(Base):
    """One row per webhook delivery accepted: Jira retries reuse the identifier."""

    __tablename__ = "jira_webhook_receipts"

    identifier: Mapped[str] = mapped_column(String(128), primary_key=True)
    event: Mapped[str | None] = mapped_column(String(64))
    issue_key: Mapped[str | None] = mapped_column(String(64))
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class JiraSyncCursor(Base):
    """A named high-water mark, e.g. the `updated` time reconciliation has read up to."""

    __tablename__ = "jira_sync_cursors"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[datetime]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
