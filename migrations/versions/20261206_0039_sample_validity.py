"""a stored sample's validity from the rollup queue, not from a list of its event ids

A large signature's stored sample (PostgreSQL) stood for its events up to its watermark while
the signature's events up to the watermark were exactly the ids it listed; every request
compared that list with the events again (a million ids, 0.3-0.4 s at 10 M events). Every
change of an event's signature passes through the rollup queue (`rollup_changes`, one row per
event counted in or out), so the queue now names the event (`event_id`), and a sample is
stale when a change of a signature's membership at or below its watermark is still queued
or has been folded since it was stored: the fold's delete of such queue rows deletes the
sample (a statement trigger on the queue). Rows leave the database without queue rows only
by the archive, whole partitions from the oldest id up: a sample also keeps its first event
id, and is stale once the oldest stored event is above it. The id list is dropped.

A queue row without an event (written before this migration) makes its signature's sample
stale: the sample is stored again at the next refresh.

Revision ID: 0039_sample_validity
Revises: 0038_epidemiology_sample_counts
Create Date: 2026-12-06 01:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from registry.partitions import in_short_transaction

revision: str = "0039_sample_validity"
down_revision: str | Sequence[str] | None = "0038_epidemiology_sample_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTED = ("signature_id", "host_id", "crashed_at", "region", "kernel_version", "capture_action", "regression",
           "bios_version", "sku", "first_source", "memory_gb", "repeats")


def _enqueue(row: str, delta: int, event: bool) -> str:
    kind = f"(SELECT kind FROM signatures WHERE id = {row}.signature_id)"
    columns = ("event_id", "delta", "kind", *COUNTED) if event else ("delta", "kind", *COUNTED)
    values = ((f"{row}.id",) if event else ()) + (str(delta), kind, *(f"{row}.{c}" for c in COUNTED))
    return f"INSERT INTO rollup_changes ({', '.join(columns)}) VALUES ({', '.join(values)});"


def _pg_function(event: bool) -> str:
    return (
        "CREATE OR REPLACE FUNCTION rollup_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n    IF TG_OP <> 'INSERT' THEN {_enqueue('OLD', -1, event)} END IF;\n"
        f"    IF TG_OP <> 'DELETE' THEN {_enqueue('NEW', 1, event)} END IF;\n    RETURN NULL;\nEND $$"
    )


def _sqlite_triggers(event: bool) -> tuple[str, ...]:
    return (
        f"CREATE TRIGGER events_rollup_insert AFTER INSERT ON events BEGIN {_enqueue('NEW', 1, event)} END",
        f"CREATE TRIGGER events_rollup_update AFTER UPDATE OF {', '.join(COUNTED)} ON events "
        f"WHEN {' OR '.join(f'OLD.{c} IS NOT NEW.{c}' for c in COUNTED)} "
        f"BEGIN {_enqueue('OLD', -1, event)} {_enqueue('NEW', 1, event)} END",
        f"CREATE TRIGGER events_rollup_delete AFTER DELETE ON events BEGIN {_enqueue('OLD', -1, event)} END",
    )


SQLITE_TRIGGERS = ("events_rollup_insert", "events_rollup_update", "events_rollup_delete")

# The queue rows a statement deleted (the fold's batches, a rebuild) whose event moved in or
# out of a signature (its rows' deltas not cancelling: a change of other columns writes -1 and
# +1 under the same signature) at or below a sample's watermark; or rows without an event.
OUTDATED_FUNCTION = """
CREATE FUNCTION epidemiology_samples_outdated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM epidemiology_samples AS s
    USING (SELECT event_id, signature_id FROM folded GROUP BY event_id, signature_id
           HAVING event_id IS NULL OR sum(delta) <> 0) AS moved
    WHERE s.signature_ids @> to_jsonb(moved.signature_id)
      AND (moved.event_id IS NULL OR moved.event_id <= s.watermark);
    RETURN NULL;
END $$
"""
OUTDATED_TRIGGER = (
    "CREATE TRIGGER rollup_changes_outdate_samples AFTER DELETE ON rollup_changes "
    "REFERENCING OLD TABLE AS folded FOR EACH STATEMENT EXECUTE FUNCTION epidemiology_samples_outdated()"
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table("epidemiology_samples") as batch:
        batch.add_column(sa.Column("first_event_id", sa.Integer(), nullable=True))
    if dialect == "postgresql":
        op.execute("UPDATE epidemiology_samples SET first_event_id = event_ids[1]")
    with op.batch_alter_table("epidemiology_samples") as batch:
        batch.drop_column("event_ids")
    if dialect != "postgresql":
        op.add_column("rollup_changes", sa.Column("event_id", sa.Integer(), nullable=True))
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
        for trigger in _sqlite_triggers(event=True):
            op.execute(trigger)
        return
    op.execute(OUTDATED_FUNCTION)
    # The queue takes every report's insert: its DDL in short transactions, the column
    # committed before the events' trigger function writes it.
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        in_short_transaction(connection, lambda c: c.exec_driver_sql(
            "ALTER TABLE rollup_changes ADD COLUMN IF NOT EXISTS event_id integer"))
        in_short_transaction(connection, lambda c: c.exec_driver_sql(_pg_function(event=True)))
        in_short_transaction(connection, lambda c: c.exec_driver_sql(OUTDATED_TRIGGER))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER rollup_changes_outdate_samples ON rollup_changes")
        op.execute("DROP FUNCTION epidemiology_samples_outdated()")
        op.execute(_pg_function(event=False))
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
        for trigger in _sqlite_triggers(event=False):
            op.execute(trigger)
    op.execute("DELETE FROM epidemiology_samples")  # without their ids: stored again by the refresh
    with op.batch_alter_table("epidemiology_samples") as batch:
        batch.drop_column("first_event_id")
        batch.add_column(sa.Column("event_ids", sa.JSON().with_variant(
            postgresql.ARRAY(sa.Integer()), "postgresql"), nullable=False))
    op.drop_column("rollup_changes", "event_id")
