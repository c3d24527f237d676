"""events keep the engine's explanation of their fingerprint (kind rule, section, frames used or
skipped and why, guilty frame, headline, flags), so an engineer can see why two crashes merged

Nullable, no default: adding it is a catalogue change on PostgreSQL and an ALTER TABLE ADD
COLUMN on SQLite (no table rebuild under the reporting views). Events stored before it get
theirs from `crashreg signatures rebuild`; ingest writes it in the event's own INSERT.

A record is 1-2 KB, which takes an event row past PostgreSQL's TOAST threshold (about 2 KB), so
the record is compressed on insert: with lz4 where the server has it (PostgreSQL 14+ built with
lz4), cheaper on the ingest path than the default pglz.

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


LZ4_AVAILABLE = (
    "SELECT count(*) FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def upgrade() -> None:
    op.add_column(
        "events",
        sa.Column("explanation", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                  nullable=True),
    )
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and bind.execute(sa.text(LZ4_AVAILABLE)).scalar():
        op.execute("ALTER TABLE events ALTER COLUMN explanation SET COMPRESSION lz4")


def downgrade() -> None:
    op.drop_column("events", "explanation")  # SQLite 3.35+: in place, the views stay
