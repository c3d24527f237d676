"""reporting views over RCAs and stored epidemiology

Adds to the `rpt_*` contract (see 0002): RCAs with their author kind and review outcome,
and the epidemiology refresh job's verdicts, findings and fleet-wide suspect hosts. RCA
bodies and evidence, and the full analysis JSON, stay out of Grafana's reach.

Revision ID: 0010_rpt_rca_epi
Revises: 0009_grafana
Create Date: 2026-11-29 17:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_rpt_rca_epi"
down_revision: str | Sequence[str] | None = "0009_grafana"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = {
    "rpt_rcas": """
        SELECT id AS rca_id, signature_id, status, author_kind, confidence, checks_passed,
               fixed_in_kernel, created_at, reviewed_at
        FROM rcas
    """,
    "rpt_epidemiology_verdicts": """
        SELECT signature_id, verdict, reason, baseline, events, hosts, top_attribute, top_value,
               top_in_signature, top_overall, top_lift, top_p_value, more_events_needed,
               first_seen, change_point, onset_shape, computed_at
        FROM epidemiology_verdicts
    """,
    "rpt_epidemiology_findings": """
        SELECT f.signature_id, v.verdict, f.baseline, f.rank, f.attribute, f.value,
               f.in_signature, f.overall, f.lift, f.p_value, f.events, v.hosts,
               f.explained_by, f.computed_at
        FROM epidemiology_findings f
        LEFT JOIN epidemiology_verdicts v ON v.signature_id = f.signature_id
    """,
    "rpt_epidemiology_suspects": """
        SELECT rank, physical_host, crashes, signatures, expected_signatures, p_value, evidence,
               computed_at
        FROM epidemiology_suspect_hosts
    """,
}


def upgrade() -> None:
    for name, sql in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {sql}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
