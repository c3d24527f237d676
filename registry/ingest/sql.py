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
    Table,
    Text,
    bindparam,
    cast,
    func,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert

from registry.auth.models import HOLDER_FIELDS, ApiToken
from registry.auth.tokens import live_token
from registry.capture.decide import SLOT_READ_COLUMNS, slots_in
from registry.capture.models import CaptureSlot
from registry.capture.policy import Slot
from registry.core.events import PANIC_SOURCES, Event, Report
from registry.core.hosts import HOST_ATTRIBUTES, Host
from registry.core.signatures import COUNTER_SHARDS, Signature
from registry.direct import DirectStatement
from registry.signatures.service import (
    SNAPSHOT_FIELDS,
    SignatureSnapshot,
    counting,
    known_signature_id,
    stats_columns,
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

# The signature a fingerprint routes to with its counts and Jira key, as one row. OFFSET 0
# keeps PostgreSQL from pulling the subquery up into the read, where it would evaluate the
# count subqueries once for each capture slot row.
ROUTED = (
    select(*SIGNATURE_COLUMNS.columns, *STATS_COLUMNS.columns)
    .where(SIGNATURES.id == known_signature_id(bindparam("fingerprint")))
    .offset(0)
    .subquery("routed")
)
# A crash kernel's or DPU's report of a panic whose pstore record (read back after the reboot,
# without the crashed boot's boot_id) was stored first: the event that record opened, found by
# host, fingerprint and time as PANIC_PARTNER finds it the other way round. Its parameters are
# NULL for any other report, and then no event matches.
PSTORE_FIRST = (
    select(EVENTS.boot_key)
    .where(
        EVENTS.host_id == HOSTS.id,
        EVENTS.fingerprint == bindparam("panic_fingerprint", type_=EVENTS.fingerprint.type),
        EVENTS.first_source == "pstore",
        EVENTS.boot_id.is_(None),
        EVENTS.crashed_at.between(
            bindparam("panic_earliest", type_=EVENTS.crashed_at.type),
            bindparam("panic_latest", type_=EVENTS.crashed_at.type),
        ),
    )
    .order_by(EVENTS.crashed_at.desc())
    .limit(1)
    .scalar_subquery()
)
# The host with that event's boot key, as one row (OFFSET 0, as ROUTED: evaluated once, not
# once per capture slot row).
HOSTED = (
    select(*HOST_COLUMNS.columns, PSTORE_FIRST.label("host_pstore_boot_key"))
    .where(HOSTS.hostname == bindparam("hostname"))
    .offset(0)
    .subquery("hosted")
)
# Everything ingest reads before it writes, in one round trip: the stored report (a replay),
# the host (and a pstore-first event of the crash), the routed signature, its capture slots
# (one row per slot, SLOT_READ_COLUMNS) and the caller's live token.
CONTEXT = DirectStatement(
    select(
        *STORED_REPORT_COLUMNS.columns,
        *(HOSTED.c[label] for label in (*HOST_COLUMNS.labels.values(), "host_pstore_boot_key")),
        *(ROUTED.c[label] for label in (*SIGNATURE_COLUMNS.labels.values(), *STATS_COLUMNS.labels.values())),
        *TOKEN_COLUMNS.columns,
        *SLOT_READ_COLUMNS,
    )
    .select_from(select(literal(1).label("one")).subquery("anchor"))
    .outerjoin(Report.__table__, REPORTS.report_id == bindparam("report_id"))
    .outerjoin(HOSTED, true())
    .outerjoin(ROUTED, true())
    .outerjoin(ApiToken.__table__, live_token(bindparam("token_hash")))
    .outerjoin(CaptureSlot.__table__, CaptureSlot.__table__.c.signature_id == ROUTED.c.signature_id)
)
STORED_REPORT = DirectStatement(
    select(*STORED_REPORT_COLUMNS.columns).where(REPORTS.report_id == bindparam("report_id"))
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
PANIC_PARTNER = (
    select(EVENTS.boot_key)
    .where(
        EVENTS.host_id == bindparam("host_id"),
        EVENTS.fingerprint == bindparam("fingerprint"),
        EVENTS.crashed_at.between(bindparam("earliest"), bindparam("latest")),
        EVENTS.first_source.in_(PANIC_SOURCES),
    )
    .order_by(EVENTS.crashed_at.desc())
    .limit(1)
)
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




def _bound(table: Table, prefix: str, names: tuple[str, ...]) -> list[Any]:
    return [bindparam(f"{prefix}_{name}", type_=table.c[name].type) for name in names]


@cache
def report_at_once(
    host_columns: tuple[str, ...] | None, event_columns: tuple[str, ...], report_columns: tuple[str, ...]
) -> DirectStatement:
    """PostgreSQL: a report's writes in one statement (data-modifying CTEs, one snapshot, all
    or nothing), for the storm's common case: the host (inserted unless `host_columns` is None:
    known, its id the `host_id` parameter), the event, its signature's counter shard (with a
    `signature_id`) and the report, whose answer gets the event's id (`report_answer` is the rest
    of it). Its one row is the event's id; none when the host or the event was stored by another
    report first (the same crash from a second source: joining it takes `store`'s steps), and
    then nothing was written but the host. Parameters are named `<table>_<column>`; every column
    is given (no Python default is filled in)."""
    hosts, events, reports = Host.__table__, Event.__table__, Report.__table__
    if host_columns is None:
        host = select(bindparam("host_id", type_=HOSTS.id.type).label("id")).cte("host")
    else:
        host = (
            pg_insert(hosts)
            .from_select(host_columns, select(*_bound(hosts, "host", host_columns)), include_defaults=False)
            .on_conflict_do_nothing(index_elements=["hostname"])
            .returning(HOSTS.id)
            .cte("host")
        )
    event = (
        pg_insert(events)
        .from_select(
            [*event_columns, "host_id"],
            select(*_bound(events, "event", event_columns), host.c.id),
            include_defaults=False,
        )
        .on_conflict_do_nothing(index_elements=["host_id", "boot_key"])
        .returning(EVENTS.id)
        .cte("event")
    )
    counted = counting(
        "postgresql",
        (
            ["signature_id", "shard", "events", "last_seen"],
            select(
                bindparam("signature_id", type_=SIGNATURES.id.type),
                event.c.id % COUNTER_SHARDS,
                literal(1),
                bindparam("event_crashed_at", type_=EVENTS.crashed_at.type),
            ).where(bindparam("signature_id", type_=SIGNATURES.id.type).is_not(None)),
        ),
    ).cte("counted")
    answer = bindparam("report_answer", type_=REPORTS.answer.type).op("||")(
        func.jsonb_build_object("event_id", cast(event.c.id, Text))
    )
    stored = (
        pg_insert(reports)
        .from_select(
            [*report_columns, "event_id", "answer"],
            select(*_bound(reports, "report", report_columns), event.c.id, answer),
            include_defaults=False,
        )
        .cte("stored")
    )
    return DirectStatement(select(event.c.id).add_cte(counted, stored))


@dataclass(frozen=True)
class IngestStatements:
    """The ingest path's dialect-specific statements, for one dialect."""

    insert_host: DirectStatement  # ... ON CONFLICT (hostname) DO NOTHING RETURNING id
    insert_event: DirectStatement  # ... ON CONFLICT (host_id, boot_key) DO NOTHING RETURNING id

    @staticmethod
    @cache
    def of(dialect: str) -> IngestStatements:
        host = insert_ignore_statement(dialect, Host.__table__, ("hostname",), None)
        event = insert_ignore_statement(dialect, Event.__table__, ("host_id", "boot_key"), None)
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


def read_context(
    connection: Connection,
    report_id: str,
    hostname: str,
    fingerprint: str | None,
    token_hash: str | None,
    panic_window: tuple[datetime, datetime] | None = None,
) -> IngestContext:
    """`panic_window`: for a panic's report (crash kernel, DPU), when its pstore record may have
    been stored first (PSTORE_FIRST)."""
    earliest, latest = panic_window or (None, None)
    rows = CONTEXT.mappings(
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
    )


def stored_report(row: dict[str, Any]) -> StoredReport | None:
    """The report of a STORED_REPORT_COLUMNS row (None: not stored)."""
    return StoredReport(**STORED_REPORT_COLUMNS.values(row)) if row["report_sha256"] is not None else None


def read_stored_report(connection: Connection, report_id: str) -> StoredReport | None:
    rows = STORED_REPORT.mappings(connection, {"report_id": report_id})
    return stored_report(rows[0]) if rows else None


def read_host(connection: Connection, hostname: str) -> KnownHost:
    (row,) = HOST_BY_NAME.mappings(connection, {"hostname": hostname})
    return KnownHost.of(HOST_COLUMNS.values(row))
