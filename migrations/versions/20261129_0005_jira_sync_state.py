"""jira sync state: per-link facts/throttle/read-back columns, webhook receipts, cursors

Revision ID: 0005_jira
Revises: see down_revision
Create Date: 2026-11-29 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_jira"
down_revision: str | Sequence[str] | None = "0004_capture"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jira_links", schema=None) as batch_op:
        batch_op.add_column(sa.Column("facts_digest", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("facts_pushed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("jira_updated_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("failures", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "jira_webhook_receipts",
        sa.Column("identifier", sa.String(length=128), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=True),
        sa.Column("issue_key", sa.String(length=64), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("identifier", name=op.f("pk_jira_webhook_receipts")),
    )
    op.create_table(
        "jira_sync_cursors",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("position", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_jira_sync_cursors")),
    )


def downgrade() -> None:
    op.drop_table("jira_sync_cursors")
    op.drop_table("jira_webhook_receipts")
    with op.batch_alter_table("jira_links", schema=None) as batch_op:
        batch_op.drop_column("failures")
        batch_op.drop_column("jira_updated_at")
        batch_op.drop_column("facts_pushed_at")
        batch_op.drop_column("facts_digest")
