"""events keep the engine's explanation of their fingerprint (kind rule, section, frames used or
skipped and why, guilty frame, headline, flags), so an engineer can see why two crashes merged

Nullable, no default: adding it is a catalogue change on PostgreSQL and an ALTER TABLE ADD
COLUMN on SQLite (no table rebuild under the reporting views). Events stored before it get
theirs from `crashreg signatures rebuild`; ingest writes it in the event's own INSERT.

Revision ID: 0015_event_explanation
Revises: 0014_epi_read_index
Create Date: 2026-12-01 07:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015_event_explanation"
down_revision: str | Sequence[str] | None = "0014_epi_read_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "events",
        sa.Column("explanation", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                  nullable=True),
    )


def downgrade() -> None:
    op.drop_column("events", "explanation")  # SQLite 3.35+: in place, the views stay
