"""capture slots (exact K full captures per window) and capture idempotency keys

Revision ID: 0004_capture
Revises: see down_revision
Create Date: 2026-11-29 17:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_capture"
down_revision: str | Sequence[str] | None = "0002_reporting_views"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "capture_slots",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('granted', 'completed', 'released')", name=op.f("ck_capture_slots_state")
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_capture_slots_event_id_events"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["signatures.id"],
            name=op.f("fk_capture_slots_signature_id_signatures"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("signature_id", "slot", name=op.f("pk_capture_slots")),
    )
    with op.batch_alter_table("capture_slots", schema=None) as batch_op:
        batch_op.create_index("ix_capture_slots_event", ["event_id"], unique=False)
    # A plain ADD COLUMN and a unique index: no table rebuild on SQLite.
    op.add_column("captures", sa.Column("capture_key", sa.String(length=128), nullable=True))
    op.create_index("ix_captures_event_key", "captures", ["event_id", "capture_key"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_captures_event_key", table_name="captures")
    with op.batch_alter_table("captures", schema=None) as batch_op:
        batch_op.drop_column("capture_key")
    with op.batch_alter_table("capture_slots", schema=None) as batch_op:
        batch_op.drop_index("ix_capture_slots_event")
    op.drop_table("capture_slots")
