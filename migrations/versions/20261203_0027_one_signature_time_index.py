"""PostgreSQL: one index on events (signature_id, crashed_at), not two

`ix_events_signature_crashed_report` (migration 0011) has the same keys as
`ix_events_signature_crashed` plus the columns Grafana's panels read, so it serves every
query the plain one did. Every event insert paid for both; a crash storm's inserts are the
registry's hottest path (issue 29). SQLite keeps the plain one: it has no covering index.

Revision ID: 0027_one_sig_time_index
Revises: 0026_rpt_dumps
Create Date: 2026-12-03 19:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027_one_sig_time_index"
down_revision: str | Sequence[str] | None = "0026_rpt_dumps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_events_signature_crashed", table_name="events")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ix_events_signature_crashed", "events", ["signature_id", "crashed_at"])
