"""The link between a signature and its Jira issue, with per-link sync state.

A core record: the contract's signature object carries its issue key, so signatures, ingest,
the pages and the bundles read it; the jira domain (and sync.jira) write it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

# The status category of a link whose issue Jira answers 404 for (deleted, or no longer visible
# to the sync user): the sync stops updating it; an issue labelled for the signature is adopted.
ISSUE_GONE = "gone"


class JiraLink(Base):
    __tablename__ = "jira_links"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("signatures.id", ondelete="CASCADE"), primary_key=True
    )
    issue_key: Mapped[str] = mapped_column(String(64), unique=True)
    issue_id: Mapped[str | None] = mapped_column(String(64))
    url: Mapped[str | None] = mapped_column(String(512))
    status_category: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_synced_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    facts_digest: Mapped[str | None] = mapped_column(
        String(64), doc="digest of the facts block last written to the issue description"
    )
    facts_pushed_at: Mapped[datetime | None] = mapped_column(
        doc="when the facts were last written: updates are throttled from here"
    )
    jira_updated_at: Mapped[datetime | None] = mapped_column(
        doc="the issue's `updated` when it was last read back and applied"
    )
    failures: Mapped[int] = mapped_column(Integer, default=0, doc="consecutive failed attempts")
    comments: Mapped[list[Any]] = mapped_column(
        default=list, doc="the issue's latest comments as last read back (for triage bundles)"
    )
