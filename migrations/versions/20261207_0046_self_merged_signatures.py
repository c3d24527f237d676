"""signatures merged into themselves stand alone again

The Jira sync merged a signature into itself when two issues were closed as duplicates of each
other (X a duplicate of Y, then Y of X): `merged_into_id` pointed at the signature's own id, so it
vanished from the signature list and the reporting views while its events stayed, and new
crashes kept landing on it. The sync no longer makes such a cycle; this repairs the rows it made.
The repaired signature is a survivor again (what the first merge made it); nothing else changes.

Revision ID: 0046_self_merged_signatures
Revises: 0045_symbol_file_links
Create Date: 2026-12-07 16:10:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0046_self_merged_signatures"
down_revision: str | Sequence[str] | None = "0045_symbol_file_links"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("UPDATE signatures SET merged_into_id = NULL WHERE merged_into_id = id")


def downgrade() -> None:
    pass  # a repair: the broken rows are not made again
