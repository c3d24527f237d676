"""a signature's events read index-only for its epidemiology; large signatures' stored samples

A large signature's events are spread over the whole `events` heap: reading 100,000 of them
through the signature index reads one heap page per event (34,000 pages of a 270 MB table).
`ix_events_epidemiology` (PostgreSQL) holds what the analysis reads of them (host and its
attribute snapshot, labels, time, uptime), keyed by (signature, event id), so PostgreSQL reads
contiguous index leaf pages instead (index-only where the visibility map says so: vacuumed
pages), and the events after a stored sample's watermark are a range.

A btree entry holds at most 2,704 bytes and labels are unbounded, so the covering index is
partial: events whose attribute values and labels take more than 2,048 bytes of text
(`epidemiology_row_fits`, PL/pgSQL, immutable) are indexed by `ix_events_epidemiology_wide`
instead (the complement; normally empty), and no insert can fail for the covering index's
sake. The predicates are the ones in `registry.epidemiology.models.SAMPLE_FITS`.

`epidemiology_samples` and `epidemiology_sample_groups`: a large signature's events as the
refresh grouped them (used on PostgreSQL; the tables exist on both for one schema).

Revision ID: 0014_epi_read_index
Revises: 0013_jira_comments
Create Date: 2026-11-29 20:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014_epi_read_index"
down_revision: str | Sequence[str] | None = "0013_jira_comments"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
WHEN = sa.DateTime(timezone=True)
HOST_COLUMNS = {
    "physical_host": 255,
    "region": 128,
    "cluster": 128,
    "sku": 128,
    "cpu_model": 255,
    "microcode": 64,
    "bios_version": 128,
    "bmc_version": 128,
    "kernel_version": 128,
    "os_image": 255,
    "hypervisor": 128,
    "gpu_driver": 128,
}
# The attributes a signature's analysis groups events by, in `HOST_ATTRIBUTES` order.
ATTRIBUTES = ("physical_host", "hostname", *list(HOST_COLUMNS)[1:])
FITS = f"epidemiology_row_fits({', '.join(ATTRIBUTES)}, labels)"
# One PL/pgSQL call per index predicate: the sum written inline in the predicates is compiled
# for every single-row INSERT (measured: +51 us per insert against +9 us for the call).
FITS_FUNCTION = f"""
CREATE FUNCTION epidemiology_row_fits({", ".join(f"{name} text" for name in ATTRIBUTES)}, labels jsonb)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN {" + ".join(f"coalesce(octet_length({name}), 0)" for name in ATTRIBUTES)}
    + octet_length(labels::text) <= 2048;
END
$$"""


def upgrade() -> None:
    op.create_table(
        "epidemiology_samples",
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("signature_ids", JSON, nullable=False),
        sa.Column("watermark", sa.Integer(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column(
            "event_ids", sa.JSON().with_variant(postgresql.ARRAY(sa.Integer()), "postgresql"), nullable=False
        ),
        sa.Column("daily", JSON, nullable=False),
        sa.Column(
            "uptimes", sa.JSON().with_variant(postgresql.ARRAY(sa.BigInteger()), "postgresql"), nullable=False
        ),
        sa.Column("computed_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["signatures.id"],
            name=op.f("fk_epidemiology_samples_signature_id_signatures"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("signature_id", name=op.f("pk_epidemiology_samples")),
    )
    op.create_table(
        "epidemiology_sample_groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        *(sa.Column(name, sa.String(length=length), nullable=True) for name, length in HOST_COLUMNS.items()),
        sa.Column("memory_gb", sa.Integer(), nullable=True),
        sa.Column("labels", JSON, nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["epidemiology_samples.signature_id"],
            name=op.f("fk_epidemiology_sample_groups_signature_id_epidemiology_samples"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_epidemiology_sample_groups")),
    )
    op.create_index("ix_epidemiology_sample_groups_signature", "epidemiology_sample_groups", ["signature_id"])
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FITS_FUNCTION)
    op.execute(
        f"CREATE INDEX ix_events_epidemiology ON events (signature_id, id) "
        f"INCLUDE (host_id, {', '.join(ATTRIBUTES)}, labels, crashed_at, uptime_s) WHERE {FITS}"
    )
    op.execute(f"CREATE INDEX ix_events_epidemiology_wide ON events (signature_id, id) WHERE NOT ({FITS})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_events_epidemiology_wide")
        op.execute("DROP INDEX ix_events_epidemiology")
        op.execute(f"DROP FUNCTION epidemiology_row_fits({', '.join('text' for _ in ATTRIBUTES)}, jsonb)")
    op.drop_index("ix_epidemiology_sample_groups_signature", table_name="epidemiology_sample_groups")
    op.drop_table("epidemiology_sample_groups")
    op.drop_table("epidemiology_samples")
