"""rpt_dumps: the dump store for Grafana, one row per dump (state, bytes, when stored and
deleted by retention; never its key or URI, which may name a bucket)

Revision ID: 0026_rpt_dumps
Revises: 0025_process_attributes
Create Date: 2026-12-01 23:35:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0026_rpt_dumps"
down_revision: str | Sequence[str] | None = "0025_process_attributes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE VIEW rpt_dumps AS "
        "SELECT d.id AS dump_id, d.capture_id, c.signature_id, d.state, d.bytes, d.stored_at, d.deleted_at "
        "FROM dumps d JOIN captures c ON c.id = d.capture_id"
    )


def downgrade() -> None:
    op.execute("DROP VIEW rpt_dumps")
