"""a mixed signature's components and the analysis in words, for Grafana

The epidemiology refresh stores each mixed signature's parts (issue 16): its concentrated
components (a physical host, host or cluster carrying far more crashes than the spread part
predicts: how many, since when, uptime profile) and the spread part whose verdict the
signature gets, in `epidemiology_components`; `epidemiology_verdicts` gains `summary` (the
analysis in sentences, one a line) and `concentrated` (how many concentrated components).
Grafana reads them through `rpt_epidemiology_components` and the recreated
`rpt_epidemiology_verdicts` (the read-only role is granted every `rpt_*` view when it is
ensured again: `crashreg grafana provision` or the scheduler's Grafana sync).

Revision ID: 0016_epi_components
Revises: 0015_event_explanation
Create Date: 2026-12-01 07:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_epi_components"
down_revision: str | Sequence[str] | None = "0015_event_explanation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHEN = sa.DateTime(timezone=True)

VERDICTS_BEFORE = """
    SELECT signature_id, verdict, reason, baseline, events, hosts, top_attribute, top_value,
           top_in_signature, top_overall, top_lift, top_p_value, more_events_needed,
           first_seen, change_point, onset_shape, computed_at
    FROM epidemiology_verdicts
"""
VERDICTS = """
    SELECT signature_id, verdict, reason, baseline, events, hosts, top_attribute, top_value,
           top_in_signature, top_overall, top_lift, top_p_value, more_events_needed,
           first_seen, change_point, onset_shape, computed_at, concentrated, summary
    FROM epidemiology_verdicts
"""
COMPONENTS = """
    SELECT c.signature_id, c.rank, c.kind, c.attribute, c.value, c.events, c.share,
           c.expected_events, c.hosts, c.first_seen, c.since, c.uptime_median_days,
           c.uptime_statement, c.verdict, c.statement, v.verdict AS signature_verdict, c.computed_at
    FROM epidemiology_components c
    LEFT JOIN epidemiology_verdicts v ON v.signature_id = c.signature_id
"""


def upgrade() -> None:
    op.create_table(
        "epidemiology_components",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("signature_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("attribute", sa.String(length=64), nullable=True),
        sa.Column("value", sa.String(length=255), nullable=True),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("expected_events", sa.Float(), nullable=True),
        sa.Column("hosts", sa.Integer(), nullable=False),
        sa.Column("first_seen", WHEN, nullable=True),
        sa.Column("since", WHEN, nullable=True),
        sa.Column("uptime_median_days", sa.Float(), nullable=True),
        sa.Column("uptime_statement", sa.Text(), nullable=True),
        sa.Column("verdict", sa.String(length=32), nullable=True),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("computed_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["signature_id"],
            ["signatures.id"],
            name=op.f("fk_epidemiology_components_signature_id_signatures"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_epidemiology_components")),
    )
    op.create_index("ix_epidemiology_components_signature", "epidemiology_components", ["signature_id"])
    op.add_column("epidemiology_verdicts", sa.Column("concentrated", sa.Integer(), nullable=True))
    op.add_column("epidemiology_verdicts", sa.Column("summary", sa.Text(), nullable=True))
    op.execute("DROP VIEW IF EXISTS rpt_epidemiology_verdicts")
    op.execute(f"CREATE VIEW rpt_epidemiology_verdicts AS {VERDICTS}")
    op.execute(f"CREATE VIEW rpt_epidemiology_components AS {COMPONENTS}")


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS rpt_epidemiology_components")
    op.execute("DROP VIEW IF EXISTS rpt_epidemiology_verdicts")
    op.execute(f"CREATE VIEW rpt_epidemiology_verdicts AS {VERDICTS_BEFORE}")
    with op.batch_alter_table("epidemiology_verdicts") as batch:
        batch.drop_column("summary")
        batch.drop_column("concentrated")
    op.drop_index("ix_epidemiology_components_signature", table_name="epidemiology_components")
    op.drop_table("epidemiology_components")
