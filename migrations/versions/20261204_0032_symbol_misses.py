"""symbol_misses: the reports whose stacks lacked symbols, by build-id

Ingest symbolicates a userspace stack from the symbols the registry has cached and answers;
a build-id it had none for is noted here with the report, so that when its symbols arrive
(uploaded or fetched from a debuginfod server) those reports' events are symbolicated again
and moved to their named signature.

Revision ID: 0032_symbol_misses
Revises: 0031_symbol_files
Create Date: 2026-12-04 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032_symbol_misses"
down_revision: str | Sequence[str] | None = "0031_symbol_files"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "symbol_misses",
        sa.Column("build_id", sa.String(length=128), nullable=False),
        sa.Column("report_id", sa.String(length=128), nullable=False),
        sa.Column("noted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("build_id", "report_id", name=op.f("pk_symbol_misses")),
    )


def downgrade() -> None:
    op.drop_table("symbol_misses")
