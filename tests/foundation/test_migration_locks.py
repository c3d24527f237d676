"""Every migration after 0028 upgrades a large registry without holding a long lock on a large
table (tests/support/migration_locks.py; the rule: docs/upgrading.md). PostgreSQL only: it is
where a lock stalls a live registry; SQLite's migrations rebuild tables by design.

The partitioning migration (0034) is checked as any other: its tables renamed to partitions are
followed by oid, and an index ATTACH PARTITION would build on one is a finding.

The check itself is shown to find each long lock in migrations written to hold one (and the
real 0028's plain index on captures), and to pass their concurrent forms.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command

from registry.migrate import MIGRATIONS_DIR
from tests.support.databases import BACKENDS, create_postgres_database, drop_postgres_database
from tests.support.migration_locks import BASELINE, alembic_config, lock_findings, revisions_after

pytestmark = pytest.mark.skipif("postgresql" not in BACKENDS, reason="locks are PostgreSQL's concern")

BEFORE_0028 = "0027_one_sig_time_index"
HEADER = '''from alembic import op
import sqlalchemy as sa

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None


def downgrade() -> None:
    pass


'''
HOLDS_LOCKS = '''def upgrade() -> None:
    op.create_index("ix_events_kernel_region", "events", ["kernel_version", "region"])
    op.add_column("reports", sa.Column("seen_at", sa.DateTime(timezone=True),
                                       server_default=sa.text("clock_timestamp()")))
    op.execute("ALTER TABLE events ADD CONSTRAINT repeats_positive CHECK (repeats >= 0)")
    op.alter_column("events", "process_uptime_s", existing_type=sa.BigInteger(), nullable=False)
    op.create_index("ix_web_sessions_expires_token", "web_sessions", ["expires_at", "token_id"])
    op.execute("CREATE INDEX ix_events_only_region ON ONLY events (region)")
'''
LOCKS_BRIEFLY = '''def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.create_index("ix_events_region_sku", "events", ["region", "sku"], postgresql_concurrently=True)
    op.add_column("reports", sa.Column("note", sa.Text(), nullable=True))
    op.execute("ALTER TABLE events ADD CONSTRAINT uptime_known CHECK (uptime_s IS NOT NULL) NOT VALID")
    op.execute("ALTER TABLE events VALIDATE CONSTRAINT uptime_known")
    op.alter_column("events", "uptime_s", existing_type=sa.BigInteger(), nullable=False)
'''


@pytest.fixture
def postgres_url() -> Iterator[str]:
    url = create_postgres_database()
    yield url
    drop_postgres_database(url)


def test_migrations_after_0028_lock_no_large_table_for_long(postgres_url: str) -> None:
    command.upgrade(alembic_config(MIGRATIONS_DIR, postgres_url), BASELINE)
    findings = lock_findings(MIGRATIONS_DIR, postgres_url)
    assert findings == [], "\n".join(f.line() for f in findings)


def test_the_check_finds_each_long_lock_and_passes_the_concurrent_forms(
    postgres_url: str, tmp_path: Path
) -> None:
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    for name, down, body in (("9001_holds_locks", BASELINE, HOLDS_LOCKS),
                             ("9002_locks_briefly", "9001_holds_locks", LOCKS_BRIEFLY)):
        (scripts / "versions" / f"{name}.py").write_text(HEADER.format(revision=name, down=down) + body)
    assert revisions_after(scripts, BEFORE_0028)[:1] == [BASELINE]
    command.upgrade(alembic_config(scripts, postgres_url), BEFORE_0028)

    findings = lock_findings(scripts, postgres_url, baseline=BEFORE_0028)
    found = {(f.revision, f.table, f.problem.split(":")[0]) for f in findings
             if f.revision in (BASELINE, "9001_holds_locks", "9002_locks_briefly")}
    plain_index = "a non-concurrent index build blocks every write for the whole build"
    assert (BASELINE, "captures", plain_index) in found  # the real 0028: before the rule
    assert ("9001_holds_locks", "events", plain_index) in found
    assert ("9001_holds_locks", "reports", "rewritten (a new relfilenode)") in found
    assert ("9001_holds_locks", "events", "a constraint added valid reads every row under an ACCESS "
            "EXCLUSIVE lock") in found
    assert any(f[:2] == ("9001_holds_locks", "events") and f[2].startswith("SET NOT NULL") for f in found)
    only = "index ix_events_only_region built on its rows under a lock"
    assert ("9001_holds_locks", "events", only) in found
    assert not any(f[1] == "web_sessions" for f in found)  # a small table may be locked briefly
    assert not any(f[0] == "9002_locks_briefly" for f in found), found


ON_PARTITIONS_HOLDS_LOCKS = '''def upgrade() -> None:
    op.execute("CREATE INDEX ix_reports_source ON ONLY reports (source)")
    op.execute("CREATE INDEX reports_p0000_ix_reports_source ON reports_p0000 (source)")
    op.execute("ALTER INDEX ix_reports_source ATTACH PARTITION reports_p0000_ix_reports_source")
'''
ON_PARTITIONS_LOCKS_BRIEFLY = '''def upgrade() -> None:
    op.execute("CREATE INDEX ix_events_kernel ON ONLY events (kernel_version)")
    with op.get_context().autocommit_block():
        op.execute("CREATE INDEX CONCURRENTLY events_p0000_ix_events_kernel ON events_p0000 (kernel_version)")
    op.execute("ALTER INDEX ix_events_kernel ATTACH PARTITION events_p0000_ix_events_kernel")
'''


def test_on_partitioned_tables_the_check_judges_each_partitions_own_index(
    postgres_url: str, tmp_path: Path
) -> None:
    """An index on a partitioned table is built on each partition (which years of history
    fill): one built there without CONCURRENTLY is a finding; the parent's own, ON ONLY, builds
    nothing and is none."""
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    head = revisions_after(scripts, BEFORE_0028)[-1]
    for name, down, body in (("9101_on_partitions_holds_locks", head, ON_PARTITIONS_HOLDS_LOCKS),
                             ("9102_on_partitions_locks_briefly", "9101_on_partitions_holds_locks",
                              ON_PARTITIONS_LOCKS_BRIEFLY)):
        (scripts / "versions" / f"{name}.py").write_text(HEADER.format(revision=name, down=down) + body)
    command.upgrade(alembic_config(scripts, postgres_url), head)

    findings = {(f.revision, f.table, f.problem) for f in lock_findings(scripts, postgres_url, baseline=head)}
    assert findings == {("9101_on_partitions_holds_locks", "reports_p0000",
                         "index reports_p0000_ix_reports_source built on its rows under a lock")}
