"""what the archive of finished captures needs: the captures' rollup trigger queues nothing for
its deletes and put-backs; tallies of the history figures' archived rows, read by `rpt_dumps`

Captures whose evidence is finished now go to the archive with their event's partition
(docs/partitioning.md, "Archive"): the archive deletes them, and puts them back when a detach is
refused. Neither is a change of history:

- `rollup_capture_daily` keeps counting an archived capture as it keeps counting an archived
  event (a dropped events partition fires no trigger). So `rollup_capture_enqueue`, the function
  of the `captures_rollup_*` triggers, queues nothing while the transaction has
  `crashreg.archiving` set to `on` (`SET LOCAL`, in the archive's deleting and putting-back
  transactions only). Otherwise it is 0037's function unchanged. `CREATE OR REPLACE FUNCTION`
  takes no lock on a table. SQLite keeps its triggers as they are: nothing archives there.
- the dump store's history (deleted dumps and their bytes) and the console logs retention
  trimmed are figures read from the `dumps` and `console_trims` rows, which the archive takes.
  `archived_dumps` keeps what it took of the deleted dumps (how many, their bytes) by their
  `deleted_at`, and `archived_console_trims` what it took of the trims that freed bytes by
  their `trimmed_at`: the time of the gc run that did it, so a tally has a row a run and a
  panel's time range counts it exactly. The archive adds to them in the transaction that
  deletes the rows and takes off what it puts back (registry.retention.archive.TALLIES). Both
  databases have them (empty on SQLite): the metrics (registry.retention.metrics) and
  `rpt_dumps` read them on both. `rpt_dumps` gains a row per `archived_dumps` row (state
  `deleted`, no dump, capture or signature) and a column `dumps`, how many dumps a row stands
  for (1 for a dump's own row); dropped and made again (SQLite has no CREATE OR REPLACE VIEW,
  and a downgrade drops the column), with the grants it had (Grafana's role).

Revision ID: 0049_archive_captures
Revises: 0048_kernel_rollup
Create Date: 2026-12-07 22:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0049_archive_captures"
down_revision: str | Sequence[str] | None = "0048_kernel_rollup"
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

DUMPS_0026 = (
    "SELECT d.id AS dump_id, d.capture_id, c.signature_id, d.state, d.bytes, d.stored_at, d.deleted_at{} "
    "FROM dumps d JOIN captures c ON c.id = d.capture_id"
)
RPT_DUMPS = (
    DUMPS_0026.format(", 1 AS dumps")
    + " UNION ALL SELECT NULL, NULL, NULL, 'deleted', a.bytes, NULL, a.deleted_at, a.dumps FROM archived_dumps a"
)


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


def _view(sql: str) -> None:
    """rpt_dumps as `sql`, with the grants it had (Grafana's role reads it on PostgreSQL)."""
    connection = op.get_bind()
    grants = (
        connection.exec_driver_sql(
            "SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
            "ELSE quote_ident(pg_get_userbyid(a.grantee)) END FROM pg_class c, aclexplode(c.relacl) a "
            "WHERE c.oid = 'rpt_dumps'::regclass AND a.grantee <> c.relowner"
        ).all()
        if connection.dialect.name == "postgresql"
        else []
    )
    op.execute("DROP VIEW rpt_dumps")  # not CREATE OR REPLACE: SQLite has none, and a downgrade drops a column
    op.execute(f"CREATE VIEW rpt_dumps AS {sql}")
    for privilege, grantee in grants:
        op.execute(f"GRANT {privilege} ON rpt_dumps TO {grantee}")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function(QUIET))
    op.create_table(
        "archived_dumps",
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("dumps", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("deleted_at", name=op.f("pk_archived_dumps")),
    )
    op.create_table(
        "archived_console_trims",
        sa.Column("trimmed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("logs", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("trimmed_at", name=op.f("pk_archived_console_trims")),
    )
    _view(RPT_DUMPS)


def downgrade() -> None:
    _view(DUMPS_0026.format(""))
    op.drop_table("archived_console_trims")
    op.drop_table("archived_dumps")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function(""))
