"""signatures.title_by_hand: a title set through the API survives a rebuild

`crashreg signatures rebuild` (and the re-symbolication that moves events to a named signature)
writes the engine's names over a signature it moves: a title a triager set by hand went back to
the engine's. A signature now says whether its title was set by hand (PATCH /signatures/{id});
such a title is kept. Not known for the titles set before: false, as if the engine's (a title
set by hand before this release is written over once more by a rebuild, as it was).

On PostgreSQL adding a column with a constant default is a catalogue change.

Revision ID: 0044_signature_title_by_hand
Revises: 0043_reports_build_ids
Create Date: 2026-12-07 13:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0044_signature_title_by_hand"
down_revision: str | Sequence[str] | None = "0043_reports_build_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("signatures", sa.Column("title_by_hand", sa.Boolean(), nullable=False,
                                          server_default=sa.false()))


def downgrade() -> None:
    # In place on both (SQLite 3.35+): a batch copy of `signatures` would drop the table the
    # foreign keys of events, links and RCAs point at.
    op.execute("ALTER TABLE signatures DROP COLUMN title_by_hand")
