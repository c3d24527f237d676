"""rebuild_fingerprints: a signatures rebuild's per-event fingerprints until it applies them

`crashreg signatures rebuild` held every event's new fingerprint in memory (hundreds of bytes an
event: gigabytes over ten million) and started again from the first event when stopped. Its
fingerprints now go to this table as they are made: a stopped rebuild continues after the last
event it wrote, and the applying step reads its plan from here.

Revision ID: 0035_rebuild_fingerprints
Revises: 0034_partitions
Create Date: 2026-12-05 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035_rebuild_fingerprints"
down_revision: str | Sequence[str] | None = "0034_partitions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rebuild_fingerprints",
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("outcome", sa.String(length=8), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("algorithm_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "event_id", name=op.f("pk_rebuild_fingerprints")),
    )
    op.create_index("ix_rebuild_fingerprints_fingerprint", "rebuild_fingerprints",
                    ["scope", "fingerprint", "event_id"])


def downgrade() -> None:
    op.drop_index("ix_rebuild_fingerprints_fingerprint", table_name="rebuild_fingerprints")
    op.drop_table("rebuild_fingerprints")
