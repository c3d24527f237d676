"""the captures' rollup trigger queues nothing for the archive's deletes and put-backs

Captures whose evidence is finished now go to the archive with their event's partition
(docs/partitioning.md, "Archive"): the archive deletes them, and puts them back when a detach is
refused. Neither is a change of history: `rollup_capture_daily` keeps counting an archived
capture as it keeps counting an archived event (a dropped events partition fires no trigger).
So `rollup_capture_enqueue`, the function of the `captures_rollup_*` triggers, queues nothing
while the transaction has `crashreg.archiving` set to `on` (`SET LOCAL`, in the archive's
deleting and putting-back transactions only). Otherwise it is 0037's function unchanged.

`CREATE OR REPLACE FUNCTION` takes no lock on a table. SQLite keeps its triggers as they are:
it has no partitions, and nothing archives there.

Revision ID: 0049_archive_quiet_captures
Revises: 0047_rpt_kernel_intervals
Create Date: 2026-12-08 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0049_archive_quiet_captures"
down_revision: str | Sequence[str] | None = "0047_rpt_kernel_intervals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A capture as 0037 counts it: its event's columns (e), its own (c).
CAPTURE_QUEUED = (
    "delta",
    "crashed_at",
    "capture_action",
    "memory_gb",
    "status",
    "bytes",
    "duration_s",
    "downtime_s",
)
EVENT_COUNTED = ("crashed_at", "capture_action", "memory_gb")
CAPTURE_COUNTED = ("status", "bytes", "duration_s", "downtime_s")
QUIET = "IF current_setting('crashreg.archiving', true) = 'on' THEN RETURN NULL; END IF; "


def _of_event(row: str) -> str:
    """A capture row counted in (NEW) or out (OLD) with its event's columns."""
    values = ", ".join(
        (
            ("1" if row == "NEW" else "-1"),
            *(f"e.{c}" for c in EVENT_COUNTED),
            *(f"{row}.{c}" for c in CAPTURE_COUNTED),
        )
    )
    return (
        f"INSERT INTO rollup_capture_changes ({', '.join(CAPTURE_QUEUED)}) SELECT {values} "
        f"FROM events e WHERE e.id = {row}.event_id;"
    )


def _function(quiet: str) -> str:
    return (
        "CREATE OR REPLACE FUNCTION rollup_capture_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"{quiet}IF TG_OP <> 'INSERT' THEN {_of_event('OLD')} END IF; "
        f"IF TG_OP <> 'DELETE' THEN {_of_event('NEW')} END IF; RETURN NULL; END $$"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function(QUIET))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function(""))
