"""symbol_files.alt_build_id, .alt_read: a kept debug file keeps the file it links to

A debug file `dwz -m` made (Debian's and Fedora's debug packages) links to a supplementary
file, the DWARF several builds share, by that file's build-id in its `.gnu_debugaltlink`
section. No report names that build-id, so symbol retention deleted the supplementary file of
a crashed build's debug file, which then had neither types nor source lines. A row now records
the build-id its file links to, read when the file is kept; retention keeps a file some stored
file links to (registry/retention/symbols.py).

Not known for the files stored before: `alt_read` is false for them, and the next gc reads
each such file once (a local store's in place, an S3 store's fetched) and records its link
before it deletes anything. Keeping a file writes the columns only once they exist, so it works
beside this migration. A nullable column and one with a constant default: catalogue changes;
the index the gc finds a file's linkers by is built on `symbol_files` (a file per build, not
per crash: a brief lock).

Revision ID: 0045_symbol_file_links
Revises: 0044_signature_title_by_hand
Create Date: 2026-12-07 16:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0045_symbol_file_links"
down_revision: str | Sequence[str] | None = "0044_signature_title_by_hand"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("symbol_files", sa.Column("alt_build_id", sa.String(128), nullable=True))
    op.add_column("symbol_files", sa.Column("alt_read", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_symbol_files_alt_build_id", "symbol_files", ["alt_build_id"])


def downgrade() -> None:
    op.drop_index("ix_symbol_files_alt_build_id", table_name="symbol_files")
    with op.batch_alter_table("symbol_files") as table:
        table.drop_column("alt_read")
        table.drop_column("alt_build_id")
