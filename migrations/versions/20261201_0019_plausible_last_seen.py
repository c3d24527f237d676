"""rpt_signatures.last_seen leaves out implausible crash times, as the API's last_seen does

A crash time stored before ingest bounded it (year 9999, a broken clock) sits in a signature's
counter for ever, and Grafana's signature tables sorted by last_seen showed that signature first,
"seen" in 9999. The view now takes the latest counter time between 2000-01-01 and a day from now
(registry/bounds.py); a signature with no plausible time has none. Columns, order and grants are
unchanged (PostgreSQL: CREATE OR REPLACE VIEW).

Revision ID: 0019_plausible_last_seen
Revises: 0018_console_log_lz4
Create Date: 2026-12-01 18:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019_plausible_last_seen"
down_revision: str | Sequence[str] | None = "0018_console_log_lz4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LATEST = {"postgresql": "now() + interval '1 day'", "sqlite": "datetime('now', '+1 day')"}
EARLIEST = {"postgresql": "timestamptz '2000-01-01 00:00:00+00'", "sqlite": "'2000-01-01 00:00:00'"}

SIGNATURES = """
    SELECT s.id AS signature_id, s.fingerprint, s.title, s.kind, s.function, s.module,
           s.status, s.first_seen, c.last_seen, COALESCE(c.events, 0) AS event_count,
           s.resolved_at, s.resolution, s.fixed_in_kernel, s.capture_policy,
           j.issue_key AS jira_key, j.url AS jira_url, j.status_category AS jira_status
    FROM signatures s
    LEFT JOIN (
        SELECT signature_id, SUM(events) AS events, {last_seen} AS last_seen
        FROM signature_counters GROUP BY signature_id
    ) c ON c.signature_id = s.id
    LEFT JOIN jira_links j ON j.signature_id = s.id
    WHERE s.merged_into_id IS NULL
"""
PLAUSIBLE = "MAX(CASE WHEN last_seen BETWEEN {earliest} AND {latest} THEN last_seen END)"


def _replace(sql: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE OR REPLACE VIEW rpt_signatures AS {sql}")
    else:
        op.execute("DROP VIEW rpt_signatures")
        op.execute(f"CREATE VIEW rpt_signatures AS {sql}")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    last_seen = PLAUSIBLE.format(earliest=EARLIEST[dialect], latest=LATEST[dialect])
    _replace(SIGNATURES.format(last_seen=last_seen))


def downgrade() -> None:
    _replace(SIGNATURES.format(last_seen="MAX(last_seen)"))
