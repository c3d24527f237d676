"""grafana provisioning state

What crashreg last saved to Grafana (for idempotency and to notice dashboards edited in
Grafana) and which annotations it pushed.

Revision ID: 0009_grafana
Revises: 0007_epidemiology
Create Date: 2026-11-29 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_grafana"
down_revision: str | Sequence[str] | None = "0007_epidemiology"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "grafana_provisioned",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("provisioned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "uid", name=op.f("pk_grafana_provisioned")),
    )
    op.create_table(
        "grafana_annotations",
        sa.Column("annotation_key", sa.String(length=200), nullable=False),
        sa.Column("grafana_id", sa.Integer(), nullable=False),
        sa.Column("pushed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("annotation_key", name=op.f("pk_grafana_annotations")),
    )


def downgrade() -> None:
    op.drop_table("grafana_annotations")
    op.drop_table("grafana_provisioned")
