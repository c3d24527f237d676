"""named_build_ids and scan_marks: which build-ids reports name, kept by a resumable scan

Symbol retention asked, for each build-id it might delete, whether any report's payload
mentions it: a search of every payload per build-id, hours at ten million reports. The
build-ids reports name are now noted by a scan of the reports that resumes at its mark
(scan_marks); the scan fills the table on the first gc run that needs it, so this migration
only creates two empty tables.

Revision ID: 0036_named_build_ids
Revises: 0035_rebuild_fingerprints
Create Date: 2026-12-05 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036_named_build_ids"
down_revision: str | Sequence[str] | None = "0035_rebuild_fingerprints"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "named_build_ids",
        sa.Column("build_id", sa.String(length=128), nullable=False),
        sa.Column("first_report_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("build_id", name=op.f("pk_named_build_ids")),
    )
    op.create_table(
        "scan_marks",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scan_marks")),
    )


def downgrade() -> None:
    op.drop_table("scan_marks")
    op.drop_table("named_build_ids")
