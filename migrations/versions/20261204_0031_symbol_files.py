"""symbol_files, symbol_uploads: the registry's symbol store, by build-id

Debug info and executables kept by build-id in the dump store's backend (uploaded by build
pipelines or fetched from debuginfod servers), checked against their ELF build-id note;
`symbol_uploads` holds the multipart uploads still open.

Revision ID: 0031_symbol_files
Revises: 0028_capture_removed
Create Date: 2026-12-04 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031_symbol_files"
down_revision: str | Sequence[str] | None = "0028_capture_removed"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "symbol_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("build_id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("store", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("stored_at", WHEN, nullable=False),
        sa.CheckConstraint("kind IN ('debuginfo', 'executable')", name=op.f("ck_symbol_files_kind")),
        sa.CheckConstraint("source IN ('upload', 'debuginfod')", name=op.f("ck_symbol_files_source")),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_tokens.id"], name=op.f("fk_symbol_files_token_id_api_tokens"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_symbol_files")),
        sa.UniqueConstraint("build_id", "kind", name=op.f("uq_symbol_files_build_id_kind")),
    )
    op.create_index("ix_symbol_files_stored_at", "symbol_files", ["stored_at"])
    op.create_table(
        "symbol_uploads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("build_id", sa.String(length=128), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("upload_id", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("part_size", sa.BigInteger(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_tokens.id"], name=op.f("fk_symbol_uploads_token_id_api_tokens"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_symbol_uploads")),
        sa.UniqueConstraint("build_id", "sha256", name=op.f("uq_symbol_uploads_build_id_sha256")),
    )


def downgrade() -> None:
    op.drop_table("symbol_uploads")
    op.drop_index("ix_symbol_files_stored_at", table_name="symbol_files")
    op.drop_table("symbol_files")
