"""reports keep their console log compressed with lz4 instead of pglz where the server has it

A crash kernel's console log is 4-60 KB, past PostgreSQL's TOAST threshold (about 2 KB), so every
report's INSERT compresses it; with pglz that was about a third of the statement's CPU in a crash
storm (bench/README.md). Only the method for new rows changes: a catalogue change, no rewrite;
rows stored before stay pglz and read as before. SQLite does not compress.

Revision ID: 0018_console_log_lz4
Revises: 0017_grafana_alerts
Create Date: 2026-12-01 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_console_log_lz4"
down_revision: str | Sequence[str] | None = "0017_grafana_alerts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LZ4_AVAILABLE = (
    "SELECT count(*) FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and bind.execute(sa.text(LZ4_AVAILABLE)).scalar():
        op.execute("ALTER TABLE reports ALTER COLUMN console_log SET COMPRESSION lz4")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE reports ALTER COLUMN console_log SET COMPRESSION default")
