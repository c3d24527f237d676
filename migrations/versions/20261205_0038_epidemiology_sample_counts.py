"""epidemiology_sample_counts: a stored sample's events per attribute value, and its weight
against the inventory

A large signature's stored sample (PostgreSQL, kept by the epidemiology refresh) held its
events grouped by host snapshot, and every request counted the groups again per attribute
value: at 100,000 hosts a GROUP BY GROUPING SETS over 100,000 groups, half a second. The
refresh now stores the counts themselves (every value, hostnames and labels too) and a request
adds the counts of the events since the sample. The sample also keeps how many of its events
lie on inventory hosts (and on hosts changed without history), with the inventory's version
then: while the inventory is unchanged a request reads neither again. The samples stored before
it are dropped (a
few rows per large signature, their groups with them): until the next refresh stores them
again with their counts, requests read every event, as for a signature without one.

Revision ID: 0038_epidemiology_sample_counts
Revises: 0037_capture_fleet_rollups
Create Date: 2026-12-05 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0038_epidemiology_sample_counts"
down_revision: str | Sequence[str] | None = "0037_capture_fleet_rollups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "epidemiology_sample_counts",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("attribute", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["epidemiology_samples.signature_id"],
            name=op.f("fk_epidemiology_sample_counts_signature_id_epidemiology_samples"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("signature_id", "attribute", "value", name=op.f("pk_epidemiology_sample_counts")),
    )
    if op.get_bind().dialect.name == "postgresql":  # where samples are stored
        # a signature's most frequent values of an attribute (its busiest hosts): an index range
        op.create_index(
            "ix_epidemiology_sample_counts_top",
            "epidemiology_sample_counts",
            ["signature_id", "attribute", sa.text("n DESC"), "value"],
        )
    # what the sample's events weigh against the inventory, and the inventory's version then
    op.add_column("epidemiology_samples", sa.Column("inventory_version", sa.Text(), nullable=True))
    op.add_column("epidemiology_samples", sa.Column("inventory_events", sa.Integer(), nullable=True))
    op.add_column("epidemiology_samples", sa.Column("unrecorded_changes", sa.Integer(), nullable=True))
    op.execute("DELETE FROM epidemiology_samples")


def downgrade() -> None:
    for column in ("unrecorded_changes", "inventory_events", "inventory_version"):
        op.drop_column("epidemiology_samples", column)
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_epidemiology_sample_counts_top", table_name="epidemiology_sample_counts")
    op.drop_table("epidemiology_sample_counts")
