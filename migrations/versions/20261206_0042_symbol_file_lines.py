"""symbol_files.lines, .replaced_sha256, .resymbolicated_at: a symbol table gives way to DWARF

A build-id kept the first file of each kind. A pipeline that uploads its `strip -g` binary
(a symbol table, which serves as debuginfo) before the `.debug` file (DWARF) never got source
lines: the DWARF file added no kind and was not kept. A debuginfo row now says whether its file
has source lines; a file with them replaces a debuginfo row without (registry/symbols/keep.py),
naming the file it replaced, and the registry symbolicates the build's events again (noting
when in `resymbolicated_at`, so that the scheduler's symbols-arrived job does what the process
that took the file did not).

`lines` is NULL for the files recorded before: not known, so a DWARF file may replace them
(the same build, at worst the same lines again). The columns are nullable: a catalogue change.

Revision ID: 0042_symbol_file_lines
Revises: 0041_pstore_first_crash
Create Date: 2026-12-06 20:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0042_symbol_file_lines"
down_revision: str | Sequence[str] | None = "0041_pstore_first_crash"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("symbol_files", sa.Column("lines", sa.Boolean(), nullable=True))
    op.add_column("symbol_files", sa.Column("replaced_sha256", sa.String(64), nullable=True))
    op.add_column("symbol_files", sa.Column("resymbolicated_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("symbol_files") as table:
        table.drop_column("resymbolicated_at")
        table.drop_column("replaced_sha256")
        table.drop_column("lines")
