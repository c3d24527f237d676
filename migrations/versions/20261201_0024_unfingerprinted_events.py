"""events the signature engine failed on: stored with the error, found by an index

- `events.fingerprint_error`: the exception the engine raised on the event's report (ingest
  stores the report with no signature and answers as for an unknown bug); `crashreg signatures
  rebuild` clears it when it fingerprints the event.
- `ix_events_unfingerprinted`: a partial index over those events only, for the page that lists
  them and the /metrics gauge that counts them.

Revision ID: 0024_unfingerprinted_events
Revises: 0023_dump_store
Create Date: 2026-12-01 23:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_unfingerprinted_events"
down_revision: str | Sequence[str] | None = "0023_dump_store"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FAILED = sa.text("fingerprint_error IS NOT NULL")


def upgrade() -> None:
    op.add_column("events", sa.Column("fingerprint_error", sa.String(512), nullable=True))
    op.create_index("ix_events_unfingerprinted", "events", ["id"], postgresql_where=FAILED, sqlite_where=FAILED)


def downgrade() -> None:
    op.drop_index("ix_events_unfingerprinted", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("fingerprint_error")
