"""ix_reports_build_ids: the build-ids a userspace report's stack names, indexed

When DWARF replaced a build's symbol table, the reports to symbolicate again were found by a
text search of every userspace report's payload, once per replacement: with years of history,
minutes of reading for a pipeline that uploads its symbol tables first. A GIN index of the
build-ids each userspace report's stack names (jsonb_path_query_array over `stack.**.build_id`,
partial on `source = 'userspace'`: a kernel report pays nothing) finds them instead.
PostgreSQL only: the index is made on the partitioned `reports` alone (ON ONLY, at once), then
on each partition CONCURRENTLY and attached, so no write waits on its build; partitions made
later take it from the parent. SQLite keeps the search (docs/symbols.md).

Revision ID: 0043_reports_build_ids
Revises: 0042_symbol_file_lines
Create Date: 2026-12-06 23:30:00
"""

import sys
from collections.abc import Sequence

from alembic import op
from sqlalchemy import Connection

from registry.partitions import in_short_transaction, partitions

revision: str = "0043_reports_build_ids"
down_revision: str | Sequence[str] | None = "0042_symbol_file_lines"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_reports_build_ids"
# As registry/symbolication/models.py declares it.
DEFINITION = ("USING gin (jsonb_path_query_array(payload, 'strict $.stack.**.build_id', '{}', true)) "
              "WHERE source = 'userspace'")


def say(line: str) -> None:
    print(f"0043_reports_build_ids: {line}", file=sys.stderr, flush=True)


def index_partition(connection: Connection, partition: str) -> None:
    """The partition's own index, built without blocking its writes (a leftover invalid one, from
    an interrupted run, dropped first), then attached to the parent's."""
    name = f"{partition}_{INDEX}"
    invalid = connection.exec_driver_sql(
        f"SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('{name}') AND NOT indisvalid").first()
    if invalid:
        connection.exec_driver_sql(f"DROP INDEX CONCURRENTLY {name}")
    say(f"index {name} on {partition}, concurrently")
    connection.exec_driver_sql(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {partition} {DEFINITION}")
    in_short_transaction(connection, lambda c: c.exec_driver_sql(f"ALTER INDEX {INDEX} ATTACH PARTITION {name}"),
                         say)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        in_short_transaction(
            connection, lambda c: c.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {INDEX} ON ONLY reports {DEFINITION}"),
            say)
        for partition in partitions(connection):
            if partition.table == "reports":
                index_partition(connection, partition.name)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {INDEX}")
