"""Jira links keep the issue's latest comments (read back by the sync, shown in triage bundles)

Revision ID: 0013_jira_comments
Revises: 0012_rpt_capture_daily
Create Date: 2026-11-29 19:25:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013_jira_comments"
down_revision: str | Sequence[str] | None = "0012_rpt_capture_daily"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jira_links", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "comments",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=False,
                server_default=sa.text("'[]'"),
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("jira_links", schema=None) as batch_op:
        batch_op.drop_column("comments")
