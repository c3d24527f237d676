"""epidemiology settings stored with the data: the program label

`epidemiology_settings` holds what the analysis is configured with in the database (today the
inventory label naming the program a host runs), so the server, the scheduler and `crashreg
demo` on one database analyse alike; CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL overrides it.

Revision ID: 0022_epidemiology_settings
Revises: 0021_retention
Create Date: 2026-12-01 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_epidemiology_settings"
down_revision: str | Sequence[str] | None = "0021_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "epidemiology_settings",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_epidemiology_settings")),
    )


def downgrade() -> None:
    op.drop_table("epidemiology_settings")
