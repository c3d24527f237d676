"""hosts.pstore_first_crash_at: the newest crash a pstore record opened an event for

A panic's report (crash kernel, DPU) joins the event its pstore record opened first, when the
record came first (docs/api.md, "Live kernel reports and pstore"). Ingest's one-statement
write checked that no such event exists by reading `events`, and on partitioned `events` a
cached generic plan sets up that read in every partition, on every report: PostgreSQL's CPU a
report grew with the registry's history (bench/ingest_cpu.py --partitions). The host's row,
which the write reads anyway, now carries the newest `crashed_at` of the host's events opened
by a pstore record without the crashed boot's boot_id, kept by an AFTER INSERT trigger on
`events` (PostgreSQL and SQLite alike), and the write reads only that: a panic's report whose
join window starts after it has no such event to join (registry/ingest/sql.py).

No long lock: the column (nullable: a catalogue change) and the trigger are made in a short
transaction of their own (CREATE TRIGGER waits for the writes in flight and holds events' SHARE
ROW EXCLUSIVE lock only for the DDL, tried again rather than queue writers behind a long
reader); then the hosts with such events get their value, reading `events` under no lock
beyond reading (an event inserted meanwhile is the trigger's: both keep the newer value). Only
then does the column's comment say it is kept, and ingest trusts it from then on.

Revision ID: 0041_pstore_first_crash
Revises: 0040_dump_encodings
Create Date: 2026-12-06 18:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from registry.partitions import in_short_transaction

revision: str = "0041_pstore_first_crash"
down_revision: str | Sequence[str] | None = "0040_dump_encodings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPENED_BY_A_RECORD = "NEW.first_source = 'pstore' AND NEW.boot_id IS NULL"
# The value kept as the newest of what is there and what comes: the trigger's and the backfill's
# updates of one host, in either order, leave the newest of both.
PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION hosts_pstore_first_crash() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  UPDATE hosts SET pstore_first_crash_at = greatest(pstore_first_crash_at, NEW.crashed_at)\n"
    "  WHERE id = NEW.host_id\n"
    "    AND (pstore_first_crash_at IS NULL OR pstore_first_crash_at < NEW.crashed_at);\n"
    "  RETURN NULL;\n"
    "END $$"
)
PG_TRIGGER = (
    "CREATE TRIGGER events_pstore_first_crash AFTER INSERT ON events FOR EACH ROW "
    f"WHEN ({OPENED_BY_A_RECORD}) EXECUTE FUNCTION hosts_pstore_first_crash()"
)
OPENED = (
    "SELECT host_id, max(crashed_at) AS crashed_at FROM events "
    "WHERE first_source = 'pstore' AND boot_id IS NULL GROUP BY host_id"
)
# Ingest trusts the column once its comment says so (registry.core.events.hosts_marked): set
# last, when every host has its value.
KEPT = "kept by the trigger events_pstore_first_crash (migration 0041)"
SQLITE_TRIGGER = (
    f"CREATE TRIGGER events_pstore_first_crash AFTER INSERT ON events WHEN {OPENED_BY_A_RECORD} BEGIN "
    "UPDATE hosts SET pstore_first_crash_at = NEW.crashed_at WHERE id = NEW.host_id "
    "AND (pstore_first_crash_at IS NULL OR pstore_first_crash_at < NEW.crashed_at); END"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":  # one transaction, writers serialised
        op.add_column("hosts", sa.Column("pstore_first_crash_at", sa.DateTime(timezone=True), nullable=True))
        op.execute(SQLITE_TRIGGER)
        op.execute(f"UPDATE hosts SET pstore_first_crash_at = (SELECT crashed_at FROM ({OPENED}) AS opened "
                   "WHERE opened.host_id = hosts.id)")
        return
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        connection.exec_driver_sql(PG_FUNCTION)

        def add_column_and_trigger(c: sa.Connection) -> None:
            c.exec_driver_sql("ALTER TABLE hosts ADD COLUMN IF NOT EXISTS pstore_first_crash_at timestamptz")
            c.exec_driver_sql("DROP TRIGGER IF EXISTS events_pstore_first_crash ON events")
            c.exec_driver_sql(PG_TRIGGER)

        # CREATE TRIGGER waits for the writers in flight: every event is either read below or
        # the trigger's.
        in_short_transaction(connection, add_column_and_trigger)
        connection.exec_driver_sql(
            "UPDATE hosts SET pstore_first_crash_at = greatest(hosts.pstore_first_crash_at, opened.crashed_at) "
            f"FROM ({OPENED}) AS opened WHERE hosts.id = opened.host_id"
        )
        connection.exec_driver_sql(f"COMMENT ON COLUMN hosts.pstore_first_crash_at IS '{KEPT}'")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER events_pstore_first_crash ON events")
        op.execute("DROP FUNCTION hosts_pstore_first_crash()")
    else:
        op.execute("DROP TRIGGER events_pstore_first_crash")
    op.drop_column("hosts", "pstore_first_crash_at")
