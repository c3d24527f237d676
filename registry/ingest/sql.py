"""Every statement the ingest path runs, built once; its one read in named column groups.

The statements every report runs are DirectStatements (registry.direct: compiled once, run on
the DBAPI cursor), the rare ones plain Core. The dialect-specific statements (INSERT ... ON
CONFLICT DO NOTHING) are built per dialect in `IngestStatements`; the others compile for
either database as they are (SQLite leaves out FOR UPDATE: BEGIN IMMEDIATE already serialises
its writers).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Text,
    bindparam,
    case,
    cast,
    exists,
    func,
    insert,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert

from registry.auth.models import HOLDER_FIELDS, ApiToken
from registry.auth.tokens import live_token
from registry.capture.decide import SLOT_READ_COLUMNS, slots_in
from registry.capture.models import CaptureSlot
from registry.capture.policy import Slot
from registry.core.events import (
    PANIC_SOURCES,
    Event,
    Report,
    by_report_id,
    report_id_stored,
    reports_keyed,
    stored_report_id,
)
from registry.core.hosts import HOST_ATTRIBUTES, Host
from registry.core.signatures import COUNTER_SHARDS, Signature
from registry.direct import DirectStatement
from registry.signatures.service import (
    SNAPSHOT_FIELDS,
    SignatureSnapshot,
    counting,
    known_signature_id,
    stats_columns,
    stats_row,
)
from registry.upsert import insert_ignore_statement

REPORTS, HOSTS, EVENTS, SIGNATURES, TOKENS = (
    model.__table__.c for model in (Report, Host, Event, Signature, ApiToken)  # type: ignore[attr-defined]
)
HOST_FIELDS = (*HOST_ATTRIBUTES, "labels")


class ColumnGroup:
    """Columns of the one read that describe one thing: labelled `<prefix>_<name>` in the read,
    given back by name."""

    def __init__(self, prefix: str, columns: dict[str, ColumnElement[Any]]) -> None:
        self.labels = {name: f"{prefix}_{name}" for name in columns}
        self.columns = tuple(column.label(self.labels[name]) for name, column in columns.items())

    def values(self, row: dict[str, Any]) -> dict[str, Any]:
        return {name: row[label] for name, label in self.labels.items()}


STORED_REPORT_COLUMNS = ColumnGroup("report", {"sha256": REPORTS.payload_sha256, "answer": REPORTS.answer})
HOST_COLUMNS = ColumnGroup("host", {"id": HOSTS.id} | {name: HOSTS[name] for name in HOST_FIELDS})
SIGNATURE_COLUMNS = ColumnGroup("signature", {name: SIGNATURES[name] for name in SNAPSHOT_FIELDS})
STATS_COLUMNS = ColumnGroup(
    "stats", dict(zip(("events", "last_seen", "jira_key"), stats_columns(SIGNATURES.id), strict=True))
)
TOKEN_COLUMNS = ColumnGroup("token", {name: TOKENS[name] for name in HOLDER_FIELDS})

# PostgreSQL: the versions of a signature's row and of its capture slot rows (each row's xmin,
# which every write to it changes), as text. A report's write planned on what an earlier read
# found is made only if these are still what that read saw (report_at_once).
SIGNATURE_VERSION = literal_column("signatures.xmin::text")
HOST_VERSION = literal_column("hosts.xmin::text")
SLOTS = CaptureSlot.__table__.c


def slots_version(signature_id: Any) -> ColumnElement[Any]:
    return (
        select(
            func.string_agg(
                literal_column("capture_slots.xmin::text"),
                aggregate_order_by(literal_column("','"), SLOTS.slot),
            )
        )
        .where(SLOTS.signature_id == signature_id)
        .scalar_subquery()
    )


VERSION_COLUMNS = ("signature_version", "signature_slots_version")


def routed(versions: bool) -> Any:
    """The signature a fingerprint routes to with its counts and Jira key (and on PostgreSQL
    its versions), as one row. OFFSET 0 keeps PostgreSQL from pulling the subquery up into the
    read, where it would evaluate the count subqueries once for each capture slot row."""
    version_columns = (
        SIGNATURE_VERSION.label(VERSION_COLUMNS[0]),
        slots_version(SIGNATURES.id).label(VERSION_COLUMNS[1]),
    )
    return (
        select(*SIGNATURE_COLUMNS.columns, *STATS_COLUMNS.columns, *(version_columns if versions else ()))
        .where(SIGNATURES.id == known_signature_id(bindparam("fingerprint")))
        .offset(0)
        .subquery("routed")
    )


def paired_events(host_id: Any, *half: ColumnElement[bool]) -> Select[Any]:
    """The host's events of the same panic as a report, the other half of its pair: the same
    fingerprint, crashed within the join window (`panic_*` parameters, NULL for a report with
    no pair: then no event matches), and opened by the `half` that pairs with it."""
    return select(EVENTS.boot_key).where(
        EVENTS.host_id == host_id,
        EVENTS.fingerprint == bindparam("panic_fingerprint", type_=EVENTS.fingerprint.type),
        EVENTS.crashed_at.between(
            bindparam("panic_earliest", type_=EVENTS.crashed_at.type),
            bindparam("panic_latest", type_=EVENTS.crashed_at.type),
        ),
        *half,
    )


def pstore_first_events(host_id: Any) -> Select[Any]:
    """For a crash kernel's or DPU's report of a panic: the events its pstore record (read back
    after the reboot, without the crashed boot's boot_id) may have opened, stored first."""
    return paired_events(host_id, EVENTS.first_source == "pstore", EVENTS.boot_id.is_(None))


def latest(events: Select[Any]) -> Select[Any]:
    return events.order_by(EVENTS.crashed_at.desc()).limit(1)


# The host with the boot key of such an event, as one row (OFFSET 0, as in `routed`:
# evaluated once, not once per capture slot row).
PSTORE_FIRST = latest(pstore_first_events(HOSTS.id)).scalar_subquery()
HOSTED = (
    select(*HOST_COLUMNS.columns, PSTORE_FIRST.label("host_pstore_boot_key"))
    .where(HOSTS.hostname == bindparam("hostname"))
    .offset(0)
    .subquery("hosted")
)


def context_read(versions: bool, keyed: bool) -> DirectStatement:
    """Everything ingest reads before it writes, in one round trip: the stored report (a
    replay; `keyed`: found through REPORT_KEYS), the host (and a pstore-first event of the
    crash), the routed signature (and on PostgreSQL its versions), its capture slots (one row
    per slot, SLOT_READ_COLUMNS) and the caller's live token."""
    signature = routed(versions)
    signature_labels = (*SIGNATURE_COLUMNS.labels.values(), *STATS_COLUMNS.labels.values())
    return DirectStatement(
        select(
            *STORED_REPORT_COLUMNS.columns,
            *(HOSTED.c[label] for label in (*HOST_COLUMNS.labels.values(), "host_pstore_boot_key")),
            *(signature.c[label] for label in (*signature_labels, *(VERSION_COLUMNS if versions else ()))),
            *TOKEN_COLUMNS.columns,
            *SLOT_READ_COLUMNS,
        )
        .select_from(select(literal(1).label("one")).subquery("anchor"))
        .outerjoin(Report.__table__, by_report_id(keyed, bindparam("report_id")))
        .outerjoin(HOSTED, true())
        .outerjoin(signature, true())
        .outerjoin(ApiToken.__table__, live_token(bindparam("token_hash")))
        .outerjoin(CaptureSlot.__table__, SLOTS.signature_id == signature.c.signature_id)
    )


# By (dialect, reports_keyed): SQLite; PostgreSQL before and after migration 0034.
SCHEMAS = (("sqlite", False), ("postgresql", False), ("postgresql", True))
CONTEXT = {(dialect, keyed): context_read(dialect == "postgresql", keyed) for dialect, keyed in SCHEMAS}
STORED_REPORT = {
    keyed: DirectStatement(
        select(*STORED_REPORT_COLUMNS.columns).where(by_report_id(keyed, bindparam("report_id")))
    )
    for keyed in (False, True)
}
STORED_REPORT_BY_ID = DirectStatement(
    select(*STORED_REPORT_COLUMNS.columns).where(REPORTS.id == bindparam("id"))
)
HOST_BY_NAME = DirectStatement(select(*HOST_COLUMNS.columns).where(HOSTS.hostname == bindparam("hostname")))
LOCKED_EVENT = (
    select(
        EVENTS.id,
        EVENTS.crashed_at,
        EVENTS.kernel_version,
        EVENTS.sources,
        EVENTS.signature_id,
        EVENTS.capture_action,
        EVENTS.capture_reason,
        EVENTS.capture_dump_level,
        EVENTS.regression,
    )
    .where(EVENTS.host_id == bindparam("host_id"), EVENTS.boot_key == bindparam("boot_key"))
    # Concurrent reports of the same crash append to one sources list. Only reports of one
    # crash ever contend for it, so this is no storm-wide hot row.
    .with_for_update()
)
# A pstore record carries no boot_id; with the post-boot agent's boot log lost it is matched
# to the crash kernel's (or DPU's) event of the same host and fingerprint by the panic's time.
PSTORE_JOIN_WINDOW = timedelta(minutes=15)
# For a pstore record: its panic's event from a crash kernel or DPU.
PANIC_PARTNER = latest(paired_events(bindparam("host_id"), EVENTS.first_source.in_(PANIC_SOURCES)))
# PostgreSQL: the host's row taken by a report that may be half of a panic's pair (its pstore
# record, and its crash kernel's or DPU's report) before it looks for the other half, in a
# statement of its own. A record writes a new version of the row, waiting out the panic
# reports that share it; a panic's report shares it, waiting out a record that took it. So of
# two halves stored at once, the second looks after the first has committed and finds its
# event. The planned write (report_at_once) shares the row too, and compares its version.
HOST_TAKEN_BY_RECORD = (
    update(Host.__table__).where(HOSTS.id == bindparam("host_id")).values(hostname=HOSTS.hostname)
)
HOST_SHARED_BY_PANIC = select(HOSTS.id).where(HOSTS.id == bindparam("host_id")).with_for_update(read=True)
PSTORE_FIRST_OF_HOST = latest(pstore_first_events(bindparam("host_id")))
DECIDED = (
    update(Event.__table__)
    .where(EVENTS.id == bindparam("event_id"))
    .values(
        capture_action=bindparam("action"),
        capture_reason=bindparam("reason"),
        capture_dump_level=bindparam("dump_level"),
    )
)
STORE_REPORT = DirectStatement(insert(Report.__table__))




def iso_utc(timestamp: Any) -> ColumnElement[Any]:
    """A timestamptz as Python's `datetime.isoformat()` writes an aware UTC datetime (the
    microseconds only when there are some), for an answer composed in SQL."""
    utc = func.timezone(literal_column("'UTC'"), timestamp)
    micro = func.to_char(utc, literal_column("'US'"))
    fraction = case(
        (micro == literal_column("'000000'"), literal_column("''")),
        else_=literal_column("'.'").op("||")(micro),
    )
    return (
        func.to_char(utc, literal_column("""'YYYY-MM-DD"T"HH24:MI:SS'"""))
        .op("||")(fraction)
        .op("||")(literal_column("'+00:00'"))
    )


# A new host's inventory row, from the event's parameters (what the report says of the host).
HOST_INSERT_COLUMNS = ("hostname", "first_seen", "updated_at", "in_inventory", *HOST_FIELDS)


def no_pstore_first_event(known: Any, marked: bool, panic_fingerprint: Any) -> ColumnElement[bool]:
    """report_at_once's guard that no pstore record of the panic opened an event first: from
    the host's row (`marked`, hosts_marked), or else from `events`, a read a generic plan sets
    up in every partition."""
    if not marked:
        return ~pstore_first_events(select(known.c.id).scalar_subquery()).exists()
    return ~exists().where(
        panic_fingerprint.is_not(None),
        known.c.pstore_first_crash_at >= bindparam("panic_earliest", type_=EVENTS.crashed_at.type),
    )


@cache
def report_at_once(
    event_columns: tuple[str, ...], report_columns: tuple[str, ...], signed: bool, keyed: bool, marked: bool
) -> DirectStatement:
    """PostgreSQL: a report's writes in one statement (data-modifying CTEs, one snapshot, all
    or nothing), for the storm's common case, made only if what its answer was planned on
    still holds in the statement's own snapshot (the guard):

    - the caller's token is live with the scope it was admitted with (`token_hash`,
      `token_scope`; a NULL hash: no caller);
    - the report_id is not stored yet (a resend gets its stored answer instead, below);
    - the fingerprint still routes to the signature the answer was planned on, and that
      signature's row and its capture slot rows are the versions it was planned on
      (`signature_id`, `signature_version`, `slots_version`; NULL: no signature);
    - no pstore record of the same panic opened an event first (`panic_*`, as in the read;
      known from the host's `pstore_first_crash_at`: none since the window's start, or the
      report takes the read's steps), nor took the host's row since the snapshot: for a
      panic's report the row is locked FOR SHARE, which waits for a record's transaction
      holding it and then gives the row's newest version, and must give the snapshot's
      (HOST_TAKEN_BY_RECORD).

    It writes the host (inserted unless its hostname is known; the event's attributes are what
    the report says, else what the inventory knows, labels merged), the event, its signature's
    counter shard (with a `signature_id`) and the report, whose answer is `report_answer`
    with the event's id and, when `signed`, the signature's counts and Jira key as they stand
    before this event plus this event. Its one row is the event's id and that answer; none when
    the guard failed, or the host or the event was stored by another report first (the same
    crash from a second source: joining it takes `store`'s steps), and then nothing was
    written. Or, for a report_id stored already (a resend) with the token live, the stored
    report's id (`replay_id`, for STORED_REPORT_BY_ID) in a row without an event id. Parameters are named
    `<table>_<column>` (the host's from the event's); every column is given (no Python default
    is filled in). `keyed`: report_ids are read from REPORT_KEYS (reports_keyed); `marked`: hosts
    keep pstore_first_crash_at (hosts_marked)."""
    hosts, events, reports = Host.__table__, Event.__table__, Report.__table__

    def event_value(name: str) -> Any:
        return bindparam(f"event_{name}", type_=EVENTS[name].type)

    signature_id = bindparam("signature_id", type_=SIGNATURES.id.type)
    token_hash = bindparam("token_hash", type_=TOKENS.token_hash.type)
    token_live = or_(
        token_hash.is_(None),
        exists().where(live_token(token_hash), TOKENS.scope == bindparam("token_scope")),
    )
    report_id = bindparam("report_report_id", type_=REPORTS.report_id.type)
    hostname = event_value("hostname")
    panic_fingerprint = bindparam("panic_fingerprint", type_=EVENTS.fingerprint.type)
    known = (
        select(
            HOSTS.id,
            HOST_VERSION.label("version"),
            *((HOSTS.pstore_first_crash_at,) if marked else ()),
            *(HOSTS[name] for name in HOST_FIELDS),
        )
        .where(HOSTS.hostname == hostname)
        .cte("known")
    )
    shared = (
        select(HOSTS.id, HOST_VERSION.label("version"))
        .where(HOSTS.hostname == hostname, panic_fingerprint.is_not(None))
        .with_for_update(read=True)
        .cte("shared_host")
    )
    guard = (
        select(literal(1).label("passed"))
        .where(
            token_live,
            ~report_id_stored(keyed, report_id),
            known_signature_id(event_value("fingerprint")).is_not_distinct_from(signature_id),
            select(SIGNATURE_VERSION)
            .where(SIGNATURES.id == signature_id)
            .scalar_subquery()
            .is_not_distinct_from(bindparam("signature_version", type_=Text())),
            slots_version(signature_id).is_not_distinct_from(bindparam("slots_version", type_=Text())),
            no_pstore_first_event(known, marked, panic_fingerprint),
            ~exists().where(shared.c.id == known.c.id, shared.c.version != known.c.version),
        )
        .cte("guard")
    )
    inserted = (
        pg_insert(hosts)
        .from_select(
            HOST_INSERT_COLUMNS,
            select(
                hostname,
                event_value("received_at"),
                event_value("received_at"),
                literal(False),
                *(event_value(name) for name in HOST_FIELDS),
            )
            .select_from(guard)
            .where(~select(known.c.id).exists()),
            include_defaults=False,
        )
        .on_conflict_do_nothing(index_elements=["hostname"])
        .returning(HOSTS.id)
        .cte("inserted_host")
    )
    host = (
        select(inserted.c.id).union_all(select(known.c.id).select_from(known.join(guard, true()))).cte("host")
    )
    at_crash = {name: func.coalesce(event_value(name), known.c[name]) for name in HOST_ATTRIBUTES} | {
        "labels": func.coalesce(known.c.labels, func.jsonb_build_object()).op("||")(event_value("labels"))
    }
    event = (
        pg_insert(events)
        .from_select(
            [*event_columns, "host_id"],
            select(*(at_crash.get(name, event_value(name)) for name in event_columns), host.c.id).select_from(
                host.outerjoin(known, true())
            ),
            include_defaults=False,
        )
        # No conflict target: on PostgreSQL the natural key is event_keys' (docs/partitioning.md),
        # whose trigger skips the row as this clause did; before that migration, the unique key.
        .on_conflict_do_nothing()
        .returning(EVENTS.id)
        .cte("event")
    )
    counted = counting(
        "postgresql",
        (
            ["signature_id", "shard", "events", "last_seen"],
            select(signature_id, event.c.id % COUNTER_SHARDS, literal(1), event_value("crashed_at")).where(
                signature_id.is_not(None)
            ),
        ),
    ).cte("counted")
    planned = bindparam("report_answer", type_=REPORTS.answer.type)
    composed: list[Any] = [literal_column("'event_id'"), cast(event.c.id, Text)]
    answered = [event]
    if signed:
        before = stats_row(signature_id).subquery("before")
        counts = select(
            (before.c.events + 1).label("event_count"),
            func.greatest(before.c.last_seen, event_value("crashed_at")).label("last_seen"),
            before.c.jira_key,
        ).cte("counts")
        answered.append(counts)
        composed += [
            literal_column("'signature'"),
            planned.op("->")(literal_column("'signature'")).op("||")(
                func.jsonb_build_object(
                    literal_column("'event_count'"), counts.c.event_count,
                    literal_column("'last_seen'"), iso_utc(counts.c.last_seen),
                    literal_column("'jira_key'"), counts.c.jira_key,
                )
            ),
        ]
    stored = (
        pg_insert(reports)
        .from_select(
            [*report_columns, "event_id", "answer"],
            select(
                *(bindparam(f"report_{name}", type_=REPORTS[name].type) for name in report_columns),
                event.c.id,
                planned.op("||")(func.jsonb_build_object(*composed)),
            ).select_from(*answered),
            include_defaults=False,
        )
        .returning(REPORTS.answer)
        .cte("stored")
    )
    written = select(event.c.id, stored.c.answer, cast(null(), REPORTS.id.type).label("replay_id"))
    # A resend with the token live: the stored report's id instead, from REPORT_KEYS alone. Not
    # its answer: read from the partitioned `reports` by a key this plan does not have, that
    # would set up a scan of each partition on every report (STORED_REPORT_BY_ID reads one).
    replay = stored_report_id(keyed, report_id).subquery("replay")
    replayed = select(
        cast(null(), EVENTS.id.type), cast(null(), REPORTS.answer.type), replay.c.id.label("replay_id")
    ).where(token_live)
    return DirectStatement(written.union_all(replayed).add_cte(counted))


@dataclass(frozen=True)
class IngestStatements:
    """The ingest path's dialect-specific statements, for one dialect."""

    insert_host: DirectStatement  # ... ON CONFLICT (hostname) DO NOTHING RETURNING id
    insert_event: DirectStatement  # ... ON CONFLICT DO NOTHING RETURNING id (host_id, boot_key's)

    @staticmethod
    @cache
    def of(dialect: str) -> IngestStatements:
        host = insert_ignore_statement(dialect, Host.__table__, ("hostname",), None)
        event = insert_ignore_statement(dialect, Event.__table__, (), None)
        return IngestStatements(insert_host=DirectStatement(host), insert_event=DirectStatement(event))


@dataclass(frozen=True)
class StoredReport:
    sha256: str
    answer: dict[str, Any]


@dataclass(frozen=True)
class KnownHost:
    id: int
    attributes: dict[str, Any]  # HOST_FIELDS, as the inventory has them

    @staticmethod
    def of(values: dict[str, Any]) -> KnownHost:
        return KnownHost(values.pop("id"), values)


@dataclass(frozen=True)
class SignatureStats:
    """A signature's counts and Jira key as the read found them (before this report's writes)."""

    events: int
    last_seen: datetime | None
    jira_key: str | None


@dataclass(frozen=True)
class IngestContext:
    """What the one read found; None where it found nothing."""

    stored: StoredReport | None
    host: KnownHost | None
    signature: SignatureSnapshot | None
    stats: SignatureStats | None
    slots: list[Slot]
    token: dict[str, Any] | None
    pstore_boot_key: str | None = None  # the event a pstore record of this panic opened first
    versions: RowVersions | None = None  # PostgreSQL, a routed signature's


@dataclass(frozen=True)
class RowVersions:
    """PostgreSQL: a signature's row and capture slot rows as a read found them (their xmins;
    `slots` None: no slot rows), for a write planned on that read to check (report_at_once)."""

    signature: str
    slots: str | None


def read_context(
    connection: Connection,
    report_id: str,
    hostname: str,
    fingerprint: str | None,
    token_hash: str | None,
    panic_window: tuple[datetime, datetime] | None = None,
) -> IngestContext:
    """`panic_window`: for a panic's report (crash kernel, DPU), when its pstore record may have
    been stored first (pstore_first_events)."""
    earliest, latest = panic_window or (None, None)
    rows = CONTEXT[connection.dialect.name, reports_keyed(connection)].mappings(
        connection,
        {
            "report_id": report_id,
            "hostname": hostname,
            "fingerprint": fingerprint,
            "token_hash": token_hash,
            "panic_fingerprint": fingerprint if panic_window else None,
            "panic_earliest": earliest,
            "panic_latest": latest,
        },
    )
    first = rows[0]
    signature = SIGNATURE_COLUMNS.values(first)
    known = signature["id"] is not None
    stats = STATS_COLUMNS.values(first)
    return IngestContext(
        stored=stored_report(first),
        host=KnownHost.of(HOST_COLUMNS.values(first)) if first["host_id"] is not None else None,
        signature=SignatureSnapshot(**signature) if known else None,
        stats=SignatureStats(int(stats["events"]), stats["last_seen"], stats["jira_key"]) if known else None,
        slots=slots_in(rows),
        token=TOKEN_COLUMNS.values(first) if first["token_id"] is not None else None,
        pstore_boot_key=first["host_pstore_boot_key"],
        versions=RowVersions(*(first[label] for label in VERSION_COLUMNS))
        if known and VERSION_COLUMNS[0] in first
        else None,
    )


def stored_report(row: dict[str, Any]) -> StoredReport | None:
    """The report of a STORED_REPORT_COLUMNS row (None: not stored)."""
    return StoredReport(**STORED_REPORT_COLUMNS.values(row)) if row["report_sha256"] is not None else None


def read_stored_report(connection: Connection, report_id: str) -> StoredReport | None:
    rows = STORED_REPORT[reports_keyed(connection)].mappings(connection, {"report_id": report_id})
    return stored_report(rows[0]) if rows else None


def read_stored_report_by_id(connection: Connection, report_pk: int) -> StoredReport | None:
    """The report with this `reports.id`: a plan that reads its one partition."""
    rows = STORED_REPORT_BY_ID.mappings(connection, {"id": report_pk})
    return stored_report(rows[0]) if rows else None


def read_host(connection: Connection, hostname: str) -> KnownHost:
    (row,) = HOST_BY_NAME.mappings(connection, {"hostname": hostname})
    return KnownHost.of(HOST_COLUMNS.values(row))
