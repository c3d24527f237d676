"""Dumps in the store (one per capture) and the audit of their download links."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow
from registry.dump_encodings import ENCODINGS

# uploading: a multipart upload is open (upload_id); stored: completed and verified;
# deleting: retention marked it (the object may still exist); deleted: removed from the
# store, the row stays as history. Only stored dumps are handed out.
DUMP_STATES = ("uploading", "stored", "deleting", "deleted")
DOWNLOAD_VIAS = ("api", "page", "bundle")


class Dump(Base):
    """A capture's dump file as an object in the dump store."""

    __tablename__ = "dumps"

    id: Mapped[int] = mapped_column(primary_key=True)
    capture_id: Mapped[int] = mapped_column(ForeignKey("captures.id", ondelete="CASCADE"), unique=True)
    store: Mapped[str] = mapped_column(
        Text, doc="the store location it went to, as a URI (s3://bucket/prefix, file:///dir)"
    )
    key: Mapped[str] = mapped_column(Text, doc="the object's key, relative to the store location")
    state: Mapped[str] = mapped_column(String(16))
    upload_id: Mapped[str | None] = mapped_column(Text, doc="the open multipart upload; None once stored")
    encoding: Mapped[str] = mapped_column(String(16))
    bytes: Mapped[int] = mapped_column(BigInteger, doc="the object's size (after the reporter's compression)")
    raw_bytes: Mapped[int | None] = mapped_column(BigInteger, doc="the dump file's size before it")
    part_size: Mapped[int] = mapped_column(BigInteger)
    etag: Mapped[str | None] = mapped_column(String(128), doc="the store's ETag, verified at completion")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    stored_at: Mapped[datetime | None]
    deleted_at: Mapped[datetime | None]

    __table_args__ = (
        CheckConstraint(f"state IN {DUMP_STATES}", name="state"),
        CheckConstraint(f"encoding IN {tuple(ENCODINGS)}", name="encoding"),
        Index("ix_dumps_state", "state", "stored_at"),
    )


class DumpDownload(Base):
    """One download link handed out: who, when, which object, through what, until when."""

    __tablename__ = "dump_downloads"

    id: Mapped[int] = mapped_column(primary_key=True)
    dump_id: Mapped[int] = mapped_column(ForeignKey("dumps.id", ondelete="CASCADE"))
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    actor: Mapped[str] = mapped_column(String(128), doc="the token's name, or who ran the command")
    via: Mapped[str] = mapped_column(String(16), doc="api | page | bundle")
    object_uri: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]

    __table_args__ = (Index("ix_dump_downloads_dump", "dump_id", "created_at"),)
