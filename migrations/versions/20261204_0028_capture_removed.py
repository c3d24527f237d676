"""captures: when and why the captured file was removed from its target

A core handler whose directory has a cap deletes its oldest cores to keep the newest; their
captures said `completed` with a target that no longer existed. The handler now says so
(`POST /api/v1/captures/removed`), and the capture keeps its record with `removed_at` and
`removed_reason`. The notice names captures by key alone: `ix_captures_key`.

Revision ID: 0028_capture_removed
Revises: 0027_one_sig_time_index
Create Date: 2026-12-04 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028_capture_removed"
down_revision: str | Sequence[str] | None = "0027_one_sig_time_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("captures", sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("captures", sa.Column("removed_reason", sa.String(length=255), nullable=True))
    op.create_index("ix_captures_key", "captures", ["capture_key"])


def downgrade() -> None:
    op.drop_index("ix_captures_key", table_name="captures")
    with op.batch_alter_table("captures") as table:
        table.drop_column("removed_reason")
        table.drop_column("removed_at")
