"""reports without a signature: their capture budget, an index and a reporting view

- `no_signature_slots`: the full-capture slots of reports the engine found no crash in or
  failed on, K per host (`host:<id>`) and K per fleet (`fleet`), used as `capture_slots` are.
- `ix_events_without_signature`: a partial index over events with no signature, for the page
  and API that list them and the /metrics gauges that count them.
- `rpt_unfingerprinted_events`: those events for Grafana, with why they have no signature
  (`no_crash` or `engine_failed`) and their capture answer; never their text.

Revision ID: 0030_no_signature_budget
Revises: 0028_capture_removed
Create Date: 2026-12-04 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_no_signature_budget"
down_revision: str | Sequence[str] | None = "0028_capture_removed"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WITHOUT_SIGNATURE = sa.text("signature_id IS NULL")


def upgrade() -> None:
    op.create_table(
        "no_signature_slots",
        sa.Column("budget", sa.String(length=32), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('granted', 'completed', 'released')", name=op.f("ck_no_signature_slots_state")
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_no_signature_slots_event_id_events"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("budget", "slot", name=op.f("pk_no_signature_slots")),
    )
    op.create_index("ix_no_signature_slots_event", "no_signature_slots", ["event_id"])
    # events is large: on PostgreSQL the index is built without blocking ingest's writes
    # (docs/upgrading.md); CONCURRENTLY cannot run inside the migration's transaction.
    index = {"postgresql_where": WITHOUT_SIGNATURE, "sqlite_where": WITHOUT_SIGNATURE}
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.create_index("ix_events_without_signature", "events", ["id"], postgresql_concurrently=True, **index)
    else:
        op.create_index("ix_events_without_signature", "events", ["id"], **index)
    op.execute(
        "CREATE VIEW rpt_unfingerprinted_events AS "
        "SELECT e.id AS event_id, e.crashed_at, e.received_at, e.hostname, e.first_source AS source, "
        "CASE WHEN e.fingerprint_error IS NULL THEN 'no_crash' ELSE 'engine_failed' END AS cause, "
        "e.capture_action, e.capture_reason "
        "FROM events e WHERE e.signature_id IS NULL"
    )


def downgrade() -> None:
    op.execute("DROP VIEW rpt_unfingerprinted_events")
    op.drop_index("ix_events_without_signature", table_name="events")
    op.drop_index("ix_no_signature_slots_event", table_name="no_signature_slots")
    op.drop_table("no_signature_slots")
