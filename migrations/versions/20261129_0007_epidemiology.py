"""epidemiology: stored verdicts, findings and fleet-wide suspect hosts (for Grafana)

Revision ID: 0007_epidemiology
Revises: see down_revision
Create Date: 2026-11-29 17:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_epidemiology"
down_revision: str | Sequence[str] | None = "0008_rca"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "epidemiology_verdicts",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("baseline", sa.String(length=16), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("hosts", sa.Integer(), nullable=False),
        sa.Column("top_attribute", sa.String(length=64), nullable=True),
        sa.Column("top_value", sa.String(length=255), nullable=True),
        sa.Column("top_in_signature", sa.Float(), nullable=True),
        sa.Column("top_overall", sa.Float(), nullable=True),
        sa.Column("top_lift", sa.Float(), nullable=True),
        sa.Column("top_p_value", sa.Float(), nullable=True),
        sa.Column("more_events_needed", sa.Integer(), nullable=True),
        sa.Column("first_seen", WHEN, nullable=True),
        sa.Column("change_point", WHEN, nullable=True),
        sa.Column("onset_shape", sa.String(length=32), nullable=True),
        sa.Column("uptime_statement", sa.Text(), nullable=True),
        sa.Column("analysis", JSON, nullable=False),
        sa.Column("computed_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["signatures.id"],
            name=op.f("fk_epidemiology_verdicts_signature_id_signatures"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("signature_id", name=op.f("pk_epidemiology_verdicts")),
    )
    op.create_index("ix_epidemiology_verdicts_verdict", "epidemiology_verdicts", ["verdict"])
    op.create_table(
        "epidemiology_findings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("baseline", sa.String(length=16), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("attribute", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.Column("in_signature", sa.Float(), nullable=False),
        sa.Column("overall", sa.Float(), nullable=False),
        sa.Column("lift", sa.Float(), nullable=False),
        sa.Column("p_value", sa.Float(), nullable=False),
        sa.Column("log10_p", sa.Float(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("explained_by", sa.String(length=320), nullable=True),
        sa.Column("computed_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["signatures.id"],
            name=op.f("fk_epidemiology_findings_signature_id_signatures"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_epidemiology_findings")),
    )
    op.create_index(
        "ix_epidemiology_findings_signature",
        "epidemiology_findings",
        ["signature_id", "baseline"],
    )
    op.create_table(
        "epidemiology_suspect_hosts",
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("physical_host", sa.String(length=255), nullable=False),
        sa.Column("crashes", sa.Integer(), nullable=False),
        sa.Column("signatures", sa.Integer(), nullable=False),
        sa.Column("expected_signatures", sa.Float(), nullable=False),
        sa.Column("p_value", sa.Float(), nullable=False),
        sa.Column("log10_p", sa.Float(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("detail", JSON, nullable=False),
        sa.Column("computed_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("rank", name=op.f("pk_epidemiology_suspect_hosts")),
    )


def downgrade() -> None:
    op.drop_table("epidemiology_suspect_hosts")
    op.drop_index("ix_epidemiology_findings_signature", table_name="epidemiology_findings")
    op.drop_table("epidemiology_findings")
    op.drop_index("ix_epidemiology_verdicts_verdict", table_name="epidemiology_verdicts")
    op.drop_table("epidemiology_verdicts")
