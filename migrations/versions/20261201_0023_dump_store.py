"""The dump store: one row per capture's dump object, and the audit of its download links

Revision ID: 0023_dump_store
Revises: 0022_epidemiology_settings
Create Date: 2026-12-01 23:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_dump_store"
down_revision: str | Sequence[str] | None = "0022_epidemiology_settings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "dumps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("capture_id", sa.Integer(), nullable=False),
        sa.Column("store", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("upload_id", sa.Text(), nullable=True),
        sa.Column("encoding", sa.String(length=16), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("raw_bytes", sa.BigInteger(), nullable=True),
        sa.Column("part_size", sa.BigInteger(), nullable=False),
        sa.Column("etag", sa.String(length=128), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("stored_at", WHEN, nullable=True),
        sa.Column("deleted_at", WHEN, nullable=True),
        sa.CheckConstraint("state IN ('uploading', 'stored', 'deleting', 'deleted')", name=op.f("ck_dumps_state")),
        sa.CheckConstraint("encoding IN ('identity', 'gzip')", name=op.f("ck_dumps_encoding")),
        sa.ForeignKeyConstraint(
            ["capture_id"], ["captures.id"], name=op.f("fk_dumps_capture_id_captures"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dumps")),
        sa.UniqueConstraint("capture_id", name=op.f("uq_dumps_capture_id")),
    )
    op.create_index("ix_dumps_state", "dumps", ["state", "stored_at"])
    op.create_table(
        "dump_downloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dump_id", sa.Integer(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("via", sa.String(length=16), nullable=False),
        sa.Column("object_uri", sa.Text(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("expires_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["dump_id"], ["dumps.id"], name=op.f("fk_dump_downloads_dump_id_dumps"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name=op.f("fk_dump_downloads_token_id_api_tokens"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dump_downloads")),
    )
    op.create_index("ix_dump_downloads_dump", "dump_downloads", ["dump_id", "created_at"])


def downgrade() -> None:
    op.drop_table("dump_downloads")
    op.drop_table("dumps")
