"""retention: engineers' pins on dumps (with their history) and the console logs it trimmed

Revision ID: 0021_retention
Revises: 0020_live_kernel_sources
Create Date: 2026-12-01 23:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_retention"
down_revision: str | Sequence[str] | None = "0020_live_kernel_sources"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIVE = sa.text("unpinned_at IS NULL")


def upgrade() -> None:
    op.create_table(
        "dump_pins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("capture_id", sa.Integer(), nullable=False),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.Column("pinned_by", sa.String(length=128), nullable=False),
        sa.Column("pinned_token_id", sa.Integer(), nullable=True),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("unpinned_by", sa.String(length=128), nullable=True),
        sa.Column("unpinned_token_id", sa.Integer(), nullable=True),
        sa.Column("unpinned_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["capture_id"], ["captures.id"], name=op.f("fk_dump_pins_capture_id_captures"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["pinned_token_id"],
            ["api_tokens.id"],
            name=op.f("fk_dump_pins_pinned_token_id_api_tokens"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["unpinned_token_id"],
            ["api_tokens.id"],
            name=op.f("fk_dump_pins_unpinned_token_id_api_tokens"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dump_pins")),
    )
    op.create_index("ix_dump_pins_capture", "dump_pins", ["capture_id", "pinned_at"])
    op.create_index(
        "uq_dump_pins_active",
        "dump_pins",
        ["capture_id"],
        unique=True,
        postgresql_where=ACTIVE,
        sqlite_where=ACTIVE,
    )
    op.create_table(
        "console_trims",
        sa.Column("report_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("trimmed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_line", sa.Integer(), nullable=False),
        sa.Column("total_lines", sa.Integer(), nullable=False),
        sa.Column("whole_bytes", sa.BigInteger(), nullable=False),
        sa.Column("kept_bytes", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["report_id"], ["reports.id"], name=op.f("fk_console_trims_report_id_reports"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_console_trims_event_id_events"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("report_id", name=op.f("pk_console_trims")),
    )
    op.create_index("ix_console_trims_event", "console_trims", ["event_id"])


def downgrade() -> None:
    op.drop_table("console_trims")
    op.drop_table("dump_pins")
