"""dumps: a core compressed when the reporter found it keeps its compression's name

A core systemd-coredump had compressed (zstd, or xz, lz4, bzip2) was uploaded as `identity`,
and the commands that fetch it handed gdb the compressed file. The reporter now names the
compression it found, and the registry accepts it (registry/dump_encodings.py).

Revision ID: 0040_dump_encodings
Revises: 0039_sample_validity
Create Date: 2026-12-06 14:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0040_dump_encodings"
down_revision: str | Sequence[str] | None = "0039_sample_validity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("identity", "gzip")
AFTER = ("identity", "gzip", "zstd", "xz", "lz4", "bzip2")


def _allow(encodings: tuple[str, ...]) -> None:
    if op.get_bind().dialect.name == "postgresql":  # no long lock on a large table (docs/upgrading.md)
        op.execute("ALTER TABLE dumps DROP CONSTRAINT ck_dumps_encoding")
        op.execute(f"ALTER TABLE dumps ADD CONSTRAINT ck_dumps_encoding CHECK (encoding IN {encodings}) NOT VALID")
        op.execute("ALTER TABLE dumps VALIDATE CONSTRAINT ck_dumps_encoding")
        return
    with op.batch_alter_table("dumps") as table:  # SQLite: the table made again
        table.drop_constraint(op.f("ck_dumps_encoding"), type_="check")
        table.create_check_constraint("encoding", f"encoding IN {encodings}")


def upgrade() -> None:
    _allow(AFTER)


def downgrade() -> None:
    op.execute(f"UPDATE dumps SET encoding = 'identity' WHERE encoding NOT IN {BEFORE}")
    _allow(BEFORE)
