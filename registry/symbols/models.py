"""Symbol files the registry keeps by build-id, and uploads of them still open."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

SYMBOL_KINDS = ("debuginfo", "executable")
# upload: sent by a build pipeline or `crashreg symbols upload`; debuginfod: fetched from a
# server in CRASHREG_DEBUGINFOD_URLS (`origin` names it) and kept.
SYMBOL_SOURCES = ("upload", "debuginfod")


class SymbolFile(Base):
    """One build-id's file of one kind, in the dump store's backend. A row exists only once its
    object is stored and its ELF build-id note checked; its id grows with each arrival, so a
    reader that remembers the last id it saw finds the files that arrived since. A debuginfo
file without source lines (a symbol table) gives way to one with them: its row becomes the new
file's, naming the table's in `replaced_sha256`."""

    __tablename__ = "symbol_files"

    id: Mapped[int] = mapped_column(primary_key=True)
    build_id: Mapped[str] = mapped_column(String(128), doc="lower-case hex, as the ELF note has it")
    kind: Mapped[str] = mapped_column(String(16), doc="debuginfo | executable")
    store: Mapped[str] = mapped_column(Text, doc="the store location, as a URI")
    key: Mapped[str] = mapped_column(Text, doc="the object's key in the store (one may serve both kinds)")
    bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(16), doc="upload | debuginfod")
    origin: Mapped[str] = mapped_column(Text, doc="the token's name, the command's user, or the server's URL")
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    stored_at: Mapped[datetime] = mapped_column(default=utcnow)
    lines: Mapped[bool | None] = mapped_column(
        Boolean, doc="the file has DWARF (source lines), not a symbol table alone; NULL: recorded before 0042"
    )
    replaced_sha256: Mapped[str | None] = mapped_column(
        String(64), doc="the file this one replaced for its kind: a symbol table gave way to DWARF"
    )
    resymbolicated_at: Mapped[datetime | None] = mapped_column(
        doc="a replacement's: when the build's events were symbolicated again with it (NULL: still to do)"
    )
    # Deferred, and alt_read the database's default: keeping a file (a debuginfod answer fetched
    # for ingest, an upload) works on a database an upgrade has not brought to 0045 yet.
    alt_build_id: Mapped[str | None] = mapped_column(
        String(128), deferred=True,
        doc="the supplementary debug file this one links to (dwz -m: .gnu_debugaltlink), kept with it")
    alt_read: Mapped[bool] = mapped_column(
        server_default=false(), deferred=True,
        doc="alt_build_id was read from the file; false: stored before 0045, the gc reads it once")

    __table_args__ = (
        UniqueConstraint("build_id", "kind"),
        CheckConstraint(f"kind IN {SYMBOL_KINDS}", name="kind"),
        CheckConstraint(f"source IN {SYMBOL_SOURCES}", name="source"),
        Index("ix_symbol_files_stored_at", "stored_at"),
        Index("ix_symbol_files_alt_build_id", "alt_build_id"),  # the files linking to one (retention)
    )


class SymbolUpload(Base):
    """A multipart upload of a symbol file, open until its parts are checked and its ELF note
    read: one per file (build-id and SHA-256), so a pipeline that retries rejoins it."""

    __tablename__ = "symbol_uploads"

    id: Mapped[int] = mapped_column(primary_key=True)
    build_id: Mapped[str] = mapped_column(String(128), doc="as the uploader declared it")
    key: Mapped[str] = mapped_column(Text)
    upload_id: Mapped[str] = mapped_column(Text, doc="the store's multipart upload id")
    bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64), doc="as the uploader declared it, checked at completion")
    part_size: Mapped[int] = mapped_column(BigInteger)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    origin: Mapped[str] = mapped_column(Text, doc="the token's name")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("build_id", "sha256"),)
