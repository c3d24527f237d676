"""events and reports partitioned by range of id, converted live (PostgreSQL; SQLite: nothing)

docs/partitioning.md says what and why. PostgreSQL wants the partition key in every unique
key, so the natural keys move to narrow key tables, kept by BEFORE INSERT triggers:
- `event_keys (host_id, boot_key) -> event_id`: a second event of the same crash is skipped
  (the trigger returns NULL), as `INSERT ... ON CONFLICT DO NOTHING` skipped it before;
- `report_keys (report_id) -> id, event_id`: a second report with a report_id raises
  unique_violation, as the unique constraint did (ingest rolls back and replays the first
  answer: a skip would commit an event without its report in ingest's one-statement write).
AFTER DELETE triggers remove a deleted row's key.

The conversion never holds a lock on a large table for long (docs/upgrading.md): key tables,
triggers and non-unique natural-key indexes are made first (the keys backfilled in batches, the
indexes built CONCURRENTLY), a `CHECK (id < bound)` is added NOT VALID and validated; then one
short transaction per table renames it to its first partition, makes the partitioned parent
with the same columns, keys and index definitions (ATTACH matches the existing indexes, and
the validated CHECK spares the scan), re-points the foreign keys into it NOT VALID (validated
after) and adds the partitions ahead. It waits at most LOCK_TIMEOUT for each lock and is tried
again rather than queue writers behind a long reader. The materialized views over events are
rebuilt from the parent beside the old ones and swapped in.

The downgrade copies the rows back into plain tables: it is offline (it locks both tables for
the copy).

Revision ID: 0034_partitions
Revises: 0033_rollups
Create Date: 2026-12-05 03:30:00
"""

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

from alembic import op
from sqlalchemy import Connection, text

from registry.config import Settings
from registry.partitions import (
    AHEAD,
    ensure_ahead,
    in_short_transaction,
    next_id,
    partition_name,
)

revision: str = "0034_partitions"
down_revision: str | Sequence[str] | None = "0033_rollups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL_BATCH = 50_000  # rows keyed per transaction


@dataclass(frozen=True)
class Keyed:
    """A table whose natural key moves to a key table."""

    table: str
    keys: str  # the key table
    key_columns: str  # its CREATE TABLE body
    natural: str  # the natural key's columns
    keyed_columns: str  # the key table's columns, filled from the row (NEW. / the SELECT)
    old_unique: str  # the unique constraint it replaces
    index: str  # the non-unique index on the natural key each partition gets
    on_duplicate: str  # plpgsql run when the key is there already


EVENTS = Keyed(
    "events", "event_keys",
    "host_id integer NOT NULL, boot_key varchar(160) NOT NULL, event_id integer NOT NULL, "
    "CONSTRAINT pk_event_keys PRIMARY KEY (host_id, boot_key)",
    "host_id, boot_key", "host_id, boot_key, id", "uq_events_host_id_boot_key", "ix_events_host_boot",
    "RETURN NULL;",
)
REPORTS = Keyed(
    "reports", "report_keys",
    "report_id varchar(128) NOT NULL, id integer NOT NULL, event_id integer NOT NULL, "
    "CONSTRAINT pk_report_keys PRIMARY KEY (report_id)",
    "report_id", "report_id, id, event_id", "uq_reports_report_id", "ix_reports_report_id",
    "RAISE unique_violation USING MESSAGE = format('duplicate key value violates unique constraint "
    "\"pk_report_keys\": report_id %s', NEW.report_id), CONSTRAINT = 'pk_report_keys';",
)
# events first: reports' foreign key must point at the partitioned events before reports is
# converted, so that its first partition's key matches the parent's.
KEYED = (EVENTS, REPORTS)


def say(line: str) -> None:
    print(f"0034_partitions: {line}", file=sys.stderr, flush=True)


def width() -> int:
    return Settings.from_env().partition_width


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        connection = op.get_bind()
        for keyed in KEYED:
            if not is_partitioned(connection, keyed.table):  # else an earlier, interrupted run did
                partition(connection, keyed, prepare(connection, keyed))
            validate_references(connection, keyed.table)
            analyze_rows(connection, keyed.table)
        ensure_ahead(connection, AHEAD, say, first_width=width())
        rebuild_materialized_views(connection)


def prepare(connection: Connection, keyed: Keyed) -> int:
    """What comes before the short transaction, writes going on: the keys kept and backfilled,
    the natural key's index built, the id bound checked; the bound."""
    keep_keys(connection, keyed)
    backfill(connection, keyed)
    index_concurrently(connection, keyed.index, f"{keyed.table} ({keyed.natural})")
    return bounded(connection, keyed.table)


def partition(connection: Connection, keyed: Keyed, bound: int) -> None:
    """The short transaction (`convert`), tried until its locks are free within LOCK_TIMEOUT."""
    say(f"{keyed.table}: the partitioned table, in one short transaction")
    try:
        in_short_transaction(connection, lambda c: convert(c, keyed, bound), say)
    except BaseException:
        # left in place, the bound would refuse every insert once the ids reach it
        in_short_transaction(connection, lambda c: c.exec_driver_sql(
            f"ALTER TABLE {keyed.table} DROP CONSTRAINT IF EXISTS {keyed.table}_before_partitions"), say)
        raise


def analyze_rows(connection: Connection, table: str) -> None:
    """The partitioned table's statistics (autovacuum never gathers a partitioned table's own),
    taken while its one partition holds the rows it had, and only if it has any. ANALYZE of a
    partitioned table also analyzes its partitions, and a partition analyzed empty is planned
    as empty: a worker's cached generic plan scanned it whole for each report as it filled,
    until autovacuum analyzed it again. One never analyzed is planned on its indexes."""
    if connection.execute(text(f"SELECT EXISTS (SELECT FROM {table})")).scalar_one():
        connection.execute(text(f"ANALYZE {table}"))


def is_partitioned(connection: Connection, table: str) -> bool:
    return connection.execute(
        text("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table}
    ).scalar_one()


def keep_keys(connection: Connection, keyed: Keyed) -> None:
    """The key table and the triggers that keep it, on the table as it is (and, cloned, on
    every partition later): every row inserted from here on is keyed."""
    new_values = ", ".join(f"NEW.{c}" for c in keyed.keyed_columns.split(", "))
    key_match = " AND ".join(f"{c} = OLD.{c}" for c in keyed.natural.split(", "))
    connection.execute(text(f"CREATE TABLE IF NOT EXISTS {keyed.keys} ({keyed.key_columns})"))
    connection.execute(text(
        f"CREATE OR REPLACE FUNCTION {keyed.keys}_insert() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n"
        f"  INSERT INTO {keyed.keys} VALUES ({new_values}) ON CONFLICT DO NOTHING;\n"
        f"  IF NOT FOUND THEN {keyed.on_duplicate} END IF;\n"
        f"  RETURN NEW;\n"
        f"END $$"
    ))
    connection.execute(text(
        f"CREATE OR REPLACE FUNCTION {keyed.keys}_delete() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN DELETE FROM {keyed.keys} WHERE {key_match}; RETURN NULL; END $$"
    ))
    in_short_transaction(connection, lambda c: add_triggers(c, keyed), say)


def add_triggers(connection: Connection, keyed: Keyed) -> None:
    """The table's key triggers (CREATE TRIGGER waits for the writers in flight, so every row
    committed after it is keyed by it or was written before it)."""
    connection.execute(text(f"DROP TRIGGER IF EXISTS {keyed.keys}_insert ON {keyed.table}"))
    connection.execute(text(f"DROP TRIGGER IF EXISTS {keyed.keys}_delete ON {keyed.table}"))
    connection.execute(text(
        f"CREATE TRIGGER {keyed.keys}_insert BEFORE INSERT ON {keyed.table} "
        f"FOR EACH ROW EXECUTE FUNCTION {keyed.keys}_insert()"
    ))
    connection.execute(text(
        f"CREATE TRIGGER {keyed.keys}_delete AFTER DELETE ON {keyed.table} "
        f"FOR EACH ROW EXECUTE FUNCTION {keyed.keys}_delete()"
    ))


def backfill(connection: Connection, keyed: Keyed) -> None:
    """The keys of the rows written before the triggers, BACKFILL_BATCH rows a transaction."""
    top = connection.execute(text(f"SELECT coalesce(max(id), 0) FROM {keyed.table}")).scalar_one()
    done = 0
    while done < top:
        upper = min(done + BACKFILL_BATCH, top)
        connection.execute(text(
            f"INSERT INTO {keyed.keys} SELECT {keyed.keyed_columns} FROM {keyed.table} "
            f"WHERE id > :lower AND id <= :upper ON CONFLICT DO NOTHING"
        ), {"lower": done, "upper": upper})
        done = upper
        say(f"{keyed.keys}: keyed {keyed.table} up to id {done:,} of {top:,}")


def index_concurrently(connection: Connection, name: str, on: str) -> None:
    """An index built without blocking writes (a leftover invalid one, from an interrupted
    run, is dropped first)."""
    invalid = connection.execute(text(
        "SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(:name) AND NOT indisvalid"
    ), {"name": name}).first()
    if invalid:
        connection.execute(text(f"DROP INDEX CONCURRENTLY {name}"))
    say(f"index {name} on {on}, concurrently")
    connection.execute(text(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {on}"))


def bounded(connection: Connection, table: str) -> int:
    """The table's upper id bound as its first partition: a width past the next id, rounded up
    to a width (the ids written during the migration stay below it), checked by a CHECK added
    NOT VALID and validated (which lets writes go on)."""
    span = width()
    upcoming = next_id(connection, table)
    bound = (upcoming + span) // span * span + span
    check = f"{table}_before_partitions"
    say(f"{table}: CHECK (id < {bound:,}), validated without blocking writes")
    in_short_transaction(connection, lambda c: c.execute(text(
        f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {check}, "
        f"ADD CONSTRAINT {check} CHECK (id < {bound}) NOT VALID")), say)
    connection.execute(text(f"ALTER TABLE {table} VALIDATE CONSTRAINT {check}"))
    return bound


def convert(connection: Connection, keyed: Keyed, bound: int) -> None:
    """One transaction: the table becomes the first partition of a partitioned table of its
    name, with the same columns, defaults, keys, indexes, triggers, and references into it."""
    table, first = keyed.table, partition_name(keyed.table, 0, width())
    run = connection.exec_driver_sql
    indexes = connection.execute(text(
        "SELECT i.relname, pg_get_indexdef(i.oid), c.conname IS NOT NULL "
        "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "LEFT JOIN pg_constraint c ON c.conindid = i.oid AND c.conrelid = x.indrelid "
        "WHERE x.indrelid = CAST(:t AS regclass) ORDER BY i.relname"
    ), {"t": table}).all()
    own_constraints = connection.execute(text(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = CAST(:t AS regclass) AND contype = 'f' AND conparentid = 0 ORDER BY conname"
    ), {"t": table}).all()
    views = dependent_views(connection, table, "v")
    # The table's other triggers (the rollups' queue, migration 0033) move to the parent, which
    # clones them onto every partition: left on the first partition, rows in later ones would
    # not fire them.
    triggers = connection.execute(text(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = CAST(:t AS regclass) "
        "AND NOT tgisinternal AND tgname NOT LIKE :keys ORDER BY tgname"
    ), {"t": table, "keys": f"{keyed.keys}_%"}).all()
    referencing = keyed_tables(connection, table, into=True)
    # The tables its own keys point at: attaching the first partition drops their action
    # triggers for its keys (ACCESS EXCLUSIVE on, say, events when reports is converted).
    referenced = keyed_tables(connection, table, into=False)
    # Every table the transaction rewrites the catalog of, taken at once (under lock_timeout)
    # before anything is changed: none is held while another is waited for. Taken midway, a
    # lock would be waited for while this transaction holds others against the writers in
    # flight (one that read events and then inserts into it: a deadlock).
    locked = dict.fromkeys([*referenced, table, *referencing])
    run(f"LOCK TABLE {', '.join(locked)} IN ACCESS EXCLUSIVE MODE")
    run(f"ALTER TABLE {table} RENAME TO {first}")
    run(f"DROP TRIGGER {keyed.keys}_insert ON {first}")
    run(f"DROP TRIGGER {keyed.keys}_delete ON {first}")
    run(f"ALTER TABLE {first} DROP CONSTRAINT {keyed.old_unique}, DROP CONSTRAINT {table}_before_partitions")
    run(f"ALTER TABLE {first} RENAME CONSTRAINT pk_{table} TO {first}_pkey")
    for name, _, is_constraint in indexes:
        if not is_constraint:
            run(f"ALTER INDEX {name} RENAME TO {(first + '_' + name)[:63]}")
    keys = [f"CONSTRAINT pk_{table} PRIMARY KEY (id)",
            *(f"CONSTRAINT {name} {definition}" for name, definition in own_constraints)]
    run(f"CREATE TABLE {table} (LIKE {first} INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION, "
        f"{', '.join(keys)}) PARTITION BY RANGE (id)")
    for _, definition, is_constraint in indexes:
        if not is_constraint:
            run(definition.replace(f" ON public.{table} ", f" ON ONLY public.{table} ", 1))
    run(f"ALTER TABLE {table} ATTACH PARTITION {first} FOR VALUES FROM (MINVALUE) TO ({bound})")
    add_triggers(connection, keyed)
    for name, definition in triggers:
        run(f"DROP TRIGGER {name} ON {first}")
        run(definition)  # ON public.<table>: now the parent
    run(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
    for name, definition in views:
        run(f"CREATE OR REPLACE VIEW {name} AS {definition}")
    repoint_references(connection, first, table)


def keyed_tables(connection: Connection, table: str, into: bool) -> list[str]:
    """The other tables with a foreign key into `table` (`into`), or those its own keys point at."""
    near, far = ("confrelid", "conrelid") if into else ("conrelid", "confrelid")
    return list(connection.execute(text(
        f"SELECT DISTINCT {far}::regclass::text FROM pg_constraint WHERE {near} = CAST(:t AS regclass) "
        "AND contype = 'f' AND conparentid = 0 AND conrelid <> confrelid ORDER BY 1"), {"t": table}).scalars())


def dependent_views(connection: Connection, table: str, kind: str) -> list[tuple[str, str]]:
    """The views (kind 'v') or materialized views ('m') that read `table`, with their queries."""
    return [tuple(row) for row in connection.execute(text(
        "SELECT DISTINCT v.relname, pg_get_viewdef(v.oid) FROM pg_depend d "
        "JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class "
        "WHERE d.refobjid = CAST(:t AS regclass) AND v.relkind = :kind AND v.oid <> d.refobjid "
        "ORDER BY v.relname"
    ), {"t": table, "kind": kind})]


def repoint_references(connection: Connection, old: str, table: str) -> None:
    """Each foreign key into `old` (the first partition) made a key into `table` (the parent),
    NOT VALID: the rows are checked after the transaction (validate_references)."""
    references = connection.execute(text(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE confrelid = CAST(:old AS regclass) AND contype = 'f' AND conparentid = 0 "
        "AND conrelid <> CAST(:old AS regclass) ORDER BY conname"
    ), {"old": old}).all()
    for referencing, name, definition in references:
        pointed = definition.replace(f"REFERENCES {old}(", f"REFERENCES {table}(")
        connection.exec_driver_sql(
            f"ALTER TABLE {referencing} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} {pointed} NOT VALID"
        )


def validate_references(connection: Connection, table: str) -> None:
    """The keys into `table` left NOT VALID, validated (SHARE UPDATE EXCLUSIVE: writes go on)."""
    for referencing, name in connection.execute(text(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint "
        "WHERE confrelid = CAST(:t AS regclass) AND contype = 'f' AND NOT convalidated AND conparentid = 0"
    ), {"t": table}).all():
        say(f"validating {referencing}.{name}")
        connection.execute(text(f"ALTER TABLE {referencing} VALIDATE CONSTRAINT {name}"))


@dataclass(frozen=True)
class Reader:
    """A view or materialized view reading a table: what makes it again, grants included."""

    name: str
    kind: str  # 'v' | 'm'
    query: str
    indexes: list[tuple[str, str]]
    grants: list[tuple[str, str]]

    def create(self, connection: Connection, suffix: str = "") -> None:
        kind = "MATERIALIZED VIEW" if self.kind == "m" else "VIEW"
        connection.exec_driver_sql(f"CREATE {kind} {self.name}{suffix} AS {self.query}")
        for index, definition in self.indexes:
            connection.exec_driver_sql(definition.replace(
                f"INDEX {index} ON public.{self.name} ", f"INDEX {index}{suffix} ON public.{self.name}{suffix} ", 1))

    def grant(self, connection: Connection) -> None:
        for privilege, grantee in self.grants:
            connection.exec_driver_sql(f"GRANT {privilege} ON {self.name} TO {grantee}")


def readers(connection: Connection, table: str, kind: str) -> list[Reader]:
    found = []
    for name, query in dependent_views(connection, table, kind):
        indexes = connection.execute(
            text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :v"), {"v": name}).all()
        grants = connection.execute(text(
            "SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
            "ELSE quote_ident(pg_get_userbyid(a.grantee)) END FROM pg_class c, aclexplode(c.relacl) a "
            "WHERE c.oid = CAST(:v AS regclass) AND a.grantee <> c.relowner"), {"v": name}).all()
        found.append(Reader(name, kind, query, [tuple(i) for i in indexes], [tuple(g) for g in grants]))
    return found


def rebuild_materialized_views(connection: Connection) -> None:
    """A materialized view over events or reports reads the table it was made on (now their
    first partition): each is made again from the partitioned table beside it (a long read,
    no lock on the writers) and swapped in, with its indexes and grants, in a short
    transaction."""
    for keyed in KEYED:
        first = partition_name(keyed.table, 0, width())
        for old in readers(connection, first, "m"):
            view = replace(old, query=re.sub(rf"\b{first}\b", keyed.table, old.query))
            say(f"materialized view {view.name}: made again from the partitioned {keyed.table}")
            connection.exec_driver_sql(f"DROP MATERIALIZED VIEW IF EXISTS {view.name}_next")
            view.create(connection, "_next")

            def swap(c: Connection, view: Reader = view) -> None:
                c.exec_driver_sql(f"DROP MATERIALIZED VIEW {view.name}")
                c.exec_driver_sql(f"ALTER MATERIALIZED VIEW {view.name}_next RENAME TO {view.name}")
                for index, _ in view.indexes:
                    c.exec_driver_sql(f"ALTER INDEX {index}_next RENAME TO {index}")
                view.grant(c)

            in_short_transaction(connection, swap, say)


def downgrade() -> None:
    """Offline: the rows are copied back into plain tables under an ACCESS EXCLUSIVE lock."""
    if op.get_bind().dialect.name != "postgresql":
        return
    connection = op.get_bind()
    for keyed in reversed(KEYED):
        if is_partitioned(connection, keyed.table):
            unpartition(connection, keyed)


def unpartition(connection: Connection, keyed: Keyed) -> None:
    table, plain = keyed.table, f"{keyed.table}_plain"
    run = connection.exec_driver_sql
    indexes = connection.execute(text(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = CAST(:t AS regclass) AND NOT x.indisprimary AND i.relname <> :natural"
    ), {"t": table, "natural": keyed.index}).all()
    own = connection.execute(text(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = CAST(:t AS regclass) AND contype = 'f' AND conparentid = 0"), {"t": table}).all()
    references = connection.execute(text(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE confrelid = CAST(:t AS regclass) AND contype = 'f' AND conparentid = 0"), {"t": table}).all()
    views = readers(connection, table, "v") + readers(connection, table, "m")
    triggers = connection.execute(text(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = CAST(:t AS regclass) "
        "AND NOT tgisinternal AND tgname NOT LIKE :keys ORDER BY tgname"
    ), {"t": table, "keys": f"{keyed.keys}_%"}).scalars().all()
    run(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    run(f"CREATE TABLE {plain} (LIKE {table} INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)")
    run(f"INSERT INTO {plain} SELECT * FROM {table}")
    for referencing, name, _ in references:
        run(f"ALTER TABLE {referencing} DROP CONSTRAINT {name}")
    for view in views:
        run(f"DROP {'MATERIALIZED VIEW' if view.kind == 'm' else 'VIEW'} {view.name}")
    run(f"ALTER SEQUENCE {table}_id_seq OWNED BY NONE")
    run(f"DROP TABLE {table}")
    run(f"DROP TABLE {keyed.keys}")
    run(f"DROP FUNCTION {keyed.keys}_insert(), {keyed.keys}_delete()")
    run(f"ALTER TABLE {plain} RENAME TO {table}")
    run(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
    run(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY (id), "
        f"ADD CONSTRAINT {keyed.old_unique} UNIQUE ({keyed.natural})")
    for name, definition in own:
        run(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    for _, definition in indexes:
        run(definition.replace(f" ON ONLY public.{table} ", f" ON public.{table} ", 1))
    for referencing, name, definition in references:
        run(f"ALTER TABLE {referencing} ADD CONSTRAINT {name} {definition}")
    for definition in triggers:
        run(definition)
    for view in views:
        view.create(connection)
        view.grant(connection)
