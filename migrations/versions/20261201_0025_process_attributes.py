"""a userspace crash's process as event attributes

`events.program_version` (the report's `stack.process.version`, else the executable's
`stack.build_id`), `events.process_started_at` and `events.process_uptime_s`: the population
analysis of a userspace signature compares them with the program's other crashes.

Revision ID: 0025_process_attributes
Revises: 0024_unfingerprinted_events
Create Date: 2026-12-01 23:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025_process_attributes"
down_revision: str | Sequence[str] | None = "0024_unfingerprinted_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("events", sa.Column("program_version", sa.String(length=128), nullable=True))
    op.add_column("events", sa.Column("process_started_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("events", sa.Column("process_uptime_s", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_column("process_uptime_s")
        batch.drop_column("process_started_at")
        batch.drop_column("program_version")
