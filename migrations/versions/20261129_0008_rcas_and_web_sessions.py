"""RCAs with evidence-check results and reviews; web login sessions and the app secret

Revision ID: 0008_rca
Revises: see down_revision
Create Date: 2026-11-29 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_rca"
down_revision: str | Sequence[str] | None = "0005_jira"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
CONFIRMED = sa.text("status = 'confirmed'")


def upgrade() -> None:
    op.create_table(
        "rcas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("summary", sa.String(length=500), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("author", sa.String(length=255), nullable=False),
        sa.Column("author_kind", sa.String(length=8), nullable=False),
        sa.Column("agent_name", sa.String(length=255), nullable=True),
        sa.Column("agent_model", sa.String(length=255), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("evidence", JSON, nullable=False),
        sa.Column("fix_commit", sa.String(length=64), nullable=True),
        sa.Column("fix_url", sa.String(length=1000), nullable=True),
        sa.Column("fixed_in_kernel", sa.String(length=128), nullable=True),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("token_name", sa.String(length=128), nullable=False),
        sa.Column("checks", JSON, nullable=False),
        sa.Column("checks_passed", sa.Boolean(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reviewed_by", sa.String(length=128), nullable=True),
        sa.Column("review_note", sa.Text(), nullable=True),
        sa.Column("superseded_by_id", sa.Integer(), nullable=True),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('proposed', 'confirmed', 'rejected', 'superseded')", name=op.f("ck_rcas_status")
        ),
        sa.CheckConstraint("author_kind IN ('human', 'ai')", name=op.f("ck_rcas_author_kind")),
        sa.CheckConstraint(
            "confidence IS NULL OR (confidence >= 0 AND confidence <= 1)", name=op.f("ck_rcas_confidence")
        ),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["signatures.id"],
            name=op.f("fk_rcas_signature_id_signatures"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_tokens.id"], name=op.f("fk_rcas_token_id_api_tokens"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["superseded_by_id"], ["rcas.id"], name=op.f("fk_rcas_superseded_by_id_rcas")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rcas")),
    )
    op.create_index("ix_rcas_signature_created", "rcas", ["signature_id", "created_at"])
    op.create_index(
        "uq_rcas_one_confirmed_per_signature",
        "rcas",
        ["signature_id"],
        unique=True,
        postgresql_where=CONFIRMED,
        sqlite_where=CONFIRMED,
    )
    op.create_table(
        "rca_reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rca_id", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("reviewer", sa.String(length=128), nullable=False),
        sa.Column("reviewer_token_id", sa.Integer(), nullable=True),
        sa.Column("checks_passed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("verdict IN ('confirmed', 'rejected')", name=op.f("ck_rca_reviews_verdict")),
        sa.ForeignKeyConstraint(
            ["rca_id"], ["rcas.id"], name=op.f("fk_rca_reviews_rca_id_rcas"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["reviewer_token_id"],
            ["api_tokens.id"],
            name=op.f("fk_rca_reviews_reviewer_token_id_api_tokens"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rca_reviews")),
    )
    op.create_index("ix_rca_reviews_rca", "rca_reviews", ["rca_id"])
    op.create_table(
        "web_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name=op.f("fk_web_sessions_token_id_api_tokens"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_web_sessions")),
    )
    op.create_index("ix_web_sessions_expires", "web_sessions", ["expires_at"])
    op.create_table(
        "app_secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_app_secrets")),
    )


def downgrade() -> None:
    op.drop_table("app_secrets")
    op.drop_index("ix_web_sessions_expires", table_name="web_sessions")
    op.drop_table("web_sessions")
    op.drop_index("ix_rca_reviews_rca", table_name="rca_reviews")
    op.drop_table("rca_reviews")
    op.drop_index("uq_rcas_one_confirmed_per_signature", table_name="rcas")
    op.drop_index("ix_rcas_signature_created", table_name="rcas")
    op.drop_table("rcas")
