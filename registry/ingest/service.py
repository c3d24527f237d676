"""Ingest: a validated crash report in, a stored event and a capture answer out.

Idempotent on report_id (replays answer what the first answer said), and race-safe: every
insert is ON CONFLICT DO NOTHING, and a transaction that loses the report_id race rolls back
whole and replays the winner's answer, so nothing is stored twice.

A report is one transaction of named steps (`ingest_report`): one read of everything it needs
(registry.ingest.sql.read_context, the caller's token included), then the host at crash time,
the signature its fingerprint routes to, the capture answer planned before the event is stored,
the event, the signature's bookkeeping, a claimed capture answer if one can still win, and the
stored report with its answer. On PostgreSQL the storm's common case is one statement instead
(`stored_on_postgresql`). Statements per report: tests/registry/ingest/test_statements.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict, cast

from sqlalchemy import Connection, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from registry.auth.tokens import LAST_USED_RESOLUTION
from registry.capture.decide import NO_DUMP_DECISIONS, CaptureDecision, decide_capture, decision_without_claim
from registry.capture.no_signature import decide_without_signature
from registry.capture.policy import ENGINE_FAILED, NO_CRASH, Slot
from registry.config import Settings
from registry.core.events import PANIC_SOURCES, CaptureAnswer, Event, hosts_marked, reports_keyed
from registry.core.hosts import HOST_ATTRIBUTES
from registry.core.signatures import Signature
from registry.core.wiring import Engine
from registry.db import Database, utcnow
from registry.errors import ApiError
from registry.ingest.last_read import WriteBasis, last_read_of
from registry.ingest.sql import (
    DECIDED,
    EVENTS,
    HOST_SHARED_BY_PANIC,
    HOST_TAKEN_BY_RECORD,
    LOCKED_EVENT,
    PANIC_PARTNER,
    PSTORE_FIRST_OF_HOST,
    PSTORE_JOIN_WINDOW,
    STORE_REPORT,
    IngestContext,
    IngestStatements,
    KnownHost,
    SignatureStats,
    StoredReport,
    read_context,
    read_host,
    read_stored_report,
    read_stored_report_by_id,
    report_at_once,
)
from registry.outbox import publish
from registry.partitions import is_missing_partition, maintain
from registry.signatures.identify import CrashSignature, identify
from registry.signatures.regression import REGRESSED, regression_verdict
from registry.signatures.service import (
    SignatureSnapshot,
    SignatureSummary,
    count_event,
    resolve_or_create,
    seen_at,
    summary,
)
from registry.symbolication.misses import committed, note_misses, unsymbolicated

log = logging.getLogger("crashreg.ingest")
# Socorro's rule: the engine never fails a report. One engine bug must not become a 500 that
# every crashing host retries and spools; the report is stored with no signature and the error,
# counted, listed (/unfingerprinted), captured within the budget of reports without a signature
# and fingerprinted by the next `crashreg signatures rebuild`.


class ReportAnswer(TypedDict):
    """What POST /api/v1/reports answers (stored with the report: a resend gets it again)."""

    event_id: str
    duplicate: bool
    known: bool
    signature: SignatureSummary | None
    capture: CaptureAnswer
    archived: NotRequired[bool]  # a resend of a report that was archived (archived_answer)


class ArchivedEvent(Exception):
    """The crash's event was archived: its natural key is kept (event_keys), its row is gone."""


# A report_id whose key is kept and whose row is not: archived (docs/partitioning.md, "Archive";
# a key and its row are written by one statement, so a committed key without its row is never
# one being stored). Read only when a write found the key taken: never on a new report's path.
ARCHIVED_REPORT = text(
    "SELECT k.event_id FROM report_keys k WHERE k.report_id = :report_id "
    "AND NOT EXISTS (SELECT FROM reports r WHERE r.id = k.id)")
ARCHIVED_EVENT = text("SELECT event_id FROM event_keys WHERE host_id = :host_id AND boot_key = :boot_key")
ARCHIVED_REASON = "a resend of a report that was archived: its event is in the archive, not stored again"


def archived_answer(connection: Connection, report_id: str) -> ReportAnswer | None:
    """The answer to a resend of an archived report (None: the report_id is not archived): the
    event it made and `duplicate`, as a replay says; its signature and first answer went to the
    archive with it, so they are not given, and no dump is asked for."""
    if not reports_keyed(connection):
        return None
    event_id = connection.execute(ARCHIVED_REPORT, {"report_id": report_id}).scalar()
    if event_id is None:
        return None
    return {"event_id": str(event_id), "duplicate": True, "known": True, "signature": None,
            "capture": {"action": "skip", "reason": ARCHIVED_REASON, "dump_level": None}, "archived": True}


@dataclass(frozen=True)
class IngestResult:
    answer: ReportAnswer
    created: bool
    unfingerprinted: bool = False  # the engine failed on this report (stored without a signature)
    no_crash: bool = False  # the engine found no crash in this report (stored without a signature)


@dataclass(frozen=True)
class Caller:
    """The token a request presented, checked inside the one read or the write planned on an
    earlier one (no lookup of its own):
    `admit` gets the connection and the token's live row (None: unknown or revoked) and refuses
    the request (an ApiError) or lets it through."""

    token_hash: str
    admit: Callable[[Connection, dict[str, Any] | None], None]


def payload_digest(raw: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# Sources whose crash does not end the boot, so each report is an event of its own, and the
# field naming the report a later one repeats (None: none). A live host's oops or warning is
# joined by the reports counting its repeats (repeat_of); a process's crash is its own event,
# its boot_id an attribute.
EVENT_PER_REPORT: dict[str, str | None] = {"live_kernel": "repeat_of", "userspace": None}


@dataclass(frozen=True)
class IncomingReport:
    """A validated report (the schema's output), its body as sent, and what is known of it
    before any statement: the body's digest and the crash signature."""

    fields: dict[str, Any]
    raw: dict[str, Any]
    digest: str
    crash: CrashSignature | None
    engine_error: str | None = None  # the engine raised this on the report (crash is None)

    @property
    def no_signature_cause(self) -> str:
        """Why a report with no crash signature has none."""
        return ENGINE_FAILED if self.engine_error is not None else NO_CRASH

    @property
    def report_id(self) -> str:
        return self.fields["report_id"]

    @property
    def host(self) -> dict[str, Any]:
        """The host as the report describes it."""
        return self.fields["host"]

    @property
    def boot_key(self) -> str:
        """Reports of one crash share it: the boot_id (a crash ends its boot), else the report
        on its own; for the sources in EVENT_PER_REPORT, the report (or the one it repeats)."""
        source = self.fields["source"]
        if source in EVENT_PER_REPORT:
            repeated = EVENT_PER_REPORT[source]
            return f"report:{(repeated and self.fields.get(repeated)) or self.report_id}"
        return self.fields.get("boot_id") or f"report:{self.report_id}"


@dataclass(frozen=True)
class HostAtCrash:
    id: int
    attributes: dict[str, Any]  # what the report says, else what the inventory knows
    created: bool = False  # by this report's transaction: any other report of it waits for its commit


@dataclass(frozen=True)
class Routing:
    """The signature a report's fingerprint routes to (None: no crash signature), and what the
    one read knows of it: `stats` and `slots` are None when the read did not describe it (a
    merged signature's survivor); a new signature has no slots."""

    signature: SignatureSnapshot | None
    is_new: bool
    stats: SignatureStats | None
    slots: list[Slot] | None


@dataclass
class OpenEvent:
    """The crash event a report belongs to, as ingest read or wrote it (plain Core columns)."""

    id: int
    crashed_at: Any
    kernel_version: str | None
    sources: list[str]
    signature_id: int | None
    capture: CaptureDecision | None  # None: a new event whose answer needs a claim first
    regression: str | None = None
    counted: bool = False  # this report added the event to its signature's count


def ingest_report(
    db: Database,
    settings: Settings,
    report: dict[str, Any],
    raw: dict[str, Any],
    caller: Caller | None = None,
    engine: Engine = identify,
) -> IngestResult:
    incoming = IncomingReport(report, raw, payload_digest(raw), *fingerprinted(engine, report))
    missing = unsymbolicated(incoming.crash)
    if missing:  # before the report's transaction: an acknowledged report never lacks its note
        note_misses(db, incoming.report_id, missing)
    try:
        result = stored_or_replayed(db, settings, incoming, caller)
    except DBAPIError as error:
        if is_missing_partition(error):
            # The partitions job has not run for a while and the ids ran past the last
            # partition: make the next ones (as the job would) rather than refuse every report.
            log.warning("no partition for report %s's rows: making the partitions ahead", incoming.report_id)
            maintain(db.engine)
        elif not error.connection_invalidated:
            raise
        # Else the pooled connection died with its server (a restart, a failover; registry.db
        # pings only idle ones) and the pool has dropped the rest. Either way nothing of this
        # transaction was stored, or if its commit got through, the report_id makes the second
        # try a replay.
        result = stored_or_replayed(db, settings, incoming, caller)
    if missing:
        committed(db, missing)
    return result


def fingerprinted(engine: Engine, report: dict[str, Any]) -> tuple[CrashSignature | None, str | None]:
    """The engine on the report (pure: outside the transaction), or what it raised."""
    try:
        return engine(report.get("console_log"), report.get("stack")), None
    except Exception as error:  # any engine bug: the report is stored all the same
        log.exception("signature engine failed on report %s", report["report_id"])
        return None, f"{type(error).__name__}: {error}"[:512]


def stored_or_replayed(
    db: Database, settings: Settings, incoming: IncomingReport, caller: Caller | None
) -> IngestResult:
    """The report stored, or the answer it was first given."""
    try:
        if db.engine.dialect.name == "postgresql":
            return stored_on_postgresql(db, settings, incoming, caller)
        return stored_by_steps(db, settings, incoming, caller)
    except (IntegrityError, ArchivedEvent) as error:
        # Another worker stored this report_id between our check and our commit; or its key, or
        # its crash's event key, is kept from an archived report (never stored twice).
        with db.session(bounded=True) as session:
            stored = read_stored_report(session.connection(), incoming.report_id)
            archived = archived_answer(session.connection(), incoming.report_id) if stored is None else None
        if archived is not None:
            return IngestResult(archived, created=False)
        if isinstance(error, ArchivedEvent):
            raise ApiError(
                409,
                "conflict",
                "the crash this report belongs to was archived: a further report of it is not stored",
                fields={"boot_id": [f"its crash's event ({error}) is in the archive"]},
            ) from None
        replay = replayed_answer(stored, incoming.digest)
        if replay is None:
            raise
        return IngestResult(replay, created=False)


def stored_by_steps(
    db: Database, settings: Settings, incoming: IncomingReport, caller: Caller | None
) -> IngestResult:
    """The one read, then `store`'s steps, in one transaction: SQLite's path (its BEGIN
    IMMEDIATE from the read on serialises its writers), and the answer every write planned on
    PostgreSQL must give (tests/registry/ingest/test_writers_agree.py)."""
    with db.session(bounded=True) as session:
        connection = session.connection()
        context, replay = checked(connection, incoming, caller)
        if replay is not None:
            return IngestResult(replay, created=False)
        return created(incoming, store(session, connection, settings, incoming, context))


def stored_on_postgresql(
    db: Database, settings: Settings, incoming: IncomingReport, caller: Caller | None
) -> IngestResult:
    """PostgreSQL: in the storm's common case, one statement (`stored_at_once`) planned on what
    this worker's last read of the bug found (registry.ingest.last_read), which the statement
    checks; else the one read, and the one write planned on it. Each commits by itself, with no
    BEGIN and COMMIT round trips, on a connection kept in autocommit mode (Database.autocommit):
    one statement is atomic, and under READ COMMITTED each statement of a transaction reads a
    snapshot of its own anyway, so the read sees outside a transaction what it would see inside
    one. Any other report takes `store`'s steps in a transaction of its own."""
    last_read = last_read_of(db)
    fingerprint = incoming.crash.fingerprint if incoming.crash else None
    with db.autocommit() as connection:
        basis = last_read.basis(fingerprint, caller, utcnow() - LAST_USED_RESOLUTION)
        if basis is not None:
            try:
                written = stored_at_once(connection, settings, incoming, caller, basis)
            except IntegrityError:  # another worker stored this report_id meanwhile: the read finds it
                written = None
            if written is not None:
                if caller is not None:
                    caller.admit(connection, basis.token)  # the write checked it live: g.token
                return outcome(incoming, written)
        try:
            context, replay = checked(connection, incoming, caller)
        except ApiError:
            last_read.forget(caller=caller)
            raise
        last_read.remember(fingerprint, caller, context)
        if replay is not None:
            return IngestResult(replay, created=False)
        written = None
        if context.pstore_boot_key is None:  # else the panic's pstore record opened its event first
            at_crash = snapshot(context.host.attributes if context.host else {}, incoming.host)
            written = stored_at_once(connection, settings, incoming, caller, WriteBasis.of(context), at_crash)
    if written is not None:
        return outcome(incoming, written)
    last_read.forget(fingerprint)
    with db.session(bounded=True) as session:
        return created(incoming, store(session, session.connection(), settings, incoming, context))


def outcome(incoming: IncomingReport, written: ReportAnswer | StoredReport) -> IngestResult:
    """What report_at_once's row says: the new report's answer, or a resend's first one (a 409
    if the body differs)."""
    if isinstance(written, StoredReport):
        return IngestResult(cast(ReportAnswer, replayed_answer(written, incoming.digest)), created=False)
    return created(incoming, written)


def checked(
    connection: Connection, incoming: IncomingReport, caller: Caller | None
) -> tuple[IngestContext, ReportAnswer | None]:
    """The one read, the caller admitted by it, and the first answer if the report is a resend."""
    context = read_context(
        connection,
        incoming.report_id,
        incoming.host["hostname"],
        incoming.crash.fingerprint if incoming.crash else None,
        caller.token_hash if caller else None,
        panic_window(incoming),
    )
    if caller is not None:
        caller.admit(connection, context.token)
    return context, replayed_answer(context.stored, incoming.digest)


def created(incoming: IncomingReport, answer: ReportAnswer) -> IngestResult:
    unsigned = incoming.crash is None
    return IngestResult(
        answer,
        created=True,
        unfingerprinted=unsigned and incoming.no_signature_cause == ENGINE_FAILED,
        no_crash=unsigned and incoming.no_signature_cause == NO_CRASH,
    )


def replayed_answer(stored: StoredReport | None, digest: str) -> ReportAnswer | None:
    """The first answer for a resent report_id (None if it is new); 409 if the body differs."""
    if stored is None:
        return None
    if stored.sha256 != digest:
        raise ApiError(
            409,
            "conflict",
            "report_id was already used for a different report",
            fields={"report_id": ["already used with a different body"]},
        )
    return cast(ReportAnswer, {**stored.answer, "duplicate": True})


def store(
    session: Session,
    connection: Connection,
    settings: Settings,
    incoming: IncomingReport,
    context: IngestContext,
) -> ReportAnswer:
    """A new report's steps after the read; the answer it stored."""
    statements = IngestStatements.of(connection.dialect.name)
    host = host_at_crash(connection, statements, incoming.host, context.host)
    # A pstore record and its panic's report join one event whichever is stored first. Looked
    # for before anything else is written, so that the host's row is the first thing taken.
    paired = paired_boot_key(connection, host, incoming, context)
    routing = route(session, incoming, context)
    regression = regression_of(
        routing.signature, host.attributes["kernel_version"], incoming.fields["crashed_at"]
    )
    # When no claim can win, the answer is stored by the event's insert (no update after it).
    planned = planned_decision(settings, incoming, routing, regression)
    event, created = find_or_open_event(
        session, connection, statements, host, incoming, paired or incoming.boot_key, routing.signature,
        planned, regression,
    )
    if created:
        routing = count_new_event(session, routing, event)
        if event.capture is None:
            event.capture = claimed_decision(session, connection, settings, incoming, routing, event, host.id)
    elif event.counted and routing.signature is not None and event.capture and event.capture.action == "skip":
        # A report with no recognisable crash opened the event and its budget said skip; this
        # one names the crash, whose own policy decides the dump still to be taken (a new bug
        # must not go uncaptured because a DPU's garbled log came first).
        event.capture = claimed_decision(session, connection, settings, incoming, routing, event, host.id)
    answer = answer_of(session, routing, event)
    STORE_REPORT.execute(connection, report_values(incoming) | {"event_id": event.id, "answer": answer})
    return answer


def planned_decision(
    settings: Settings, incoming: IncomingReport, routing: Routing, regression: str | None
) -> CaptureDecision | None:
    """The answer known before the event is stored; None when only a claim can say (always,
    for a report without a signature: its budget's slots are not read before)."""
    return (
        NO_DUMP_DECISIONS.get(incoming.fields["source"])
        or decision_without_claim(
            routing.signature, regression == REGRESSED, settings, routing.is_new, routing.slots
        )
    )


def stored_at_once(
    connection: Connection,
    settings: Settings,
    incoming: IncomingReport,
    caller: Caller | None,
    basis: WriteBasis,
    at_crash: dict[str, Any] | None = None,
) -> ReportAnswer | StoredReport | None:
    """PostgreSQL, the storm's common case in one statement (`report_at_once`): a report of a
    known signature (or of no crash) whose answer needs no claim and whose event writes nothing
    else: no regression to flag, no earlier first sighting, no pstore record to pair. Its answer
    is planned on `basis` (what a read found), which the statement checks, and is `store`'s for
    the same report. `at_crash`: the host's attributes at crash time if the read knows them
    (None: a resolved signature's regression verdict, which needs the kernel, is left to the
    read). None: nothing was stored, and the report takes the read's or `store`'s steps (a
    new or merged signature, a claim that might win, a second source of a crash joining its
    event, a host another report created meanwhile, what the basis says no longer holding).
    A StoredReport: the report_id was stored already (a resend), and the token is live."""
    report, signature = incoming.fields, basis.signature
    if incoming.crash is not None and (signature is None or signature.merged_into_id is not None):
        return None
    if signature is not None and (report["crashed_at"] < signature.first_seen or basis.versions is None):
        return None
    if is_pstore_record(incoming):
        return None
    resolved = signature is not None and signature.status == "resolved"
    if resolved and at_crash is None:
        return None
    regression = regression_of(signature, (at_crash or {}).get("kernel_version"), report["crashed_at"])
    routing = Routing(signature, is_new=False, stats=COMPOSED_BY_THE_WRITE, slots=basis.slots)
    planned = planned_decision(settings, incoming, routing, regression)
    if planned is None or regression == REGRESSED:
        return None
    event = OpenEvent(0, report["crashed_at"], None, [report["source"]],
                      signature.id if signature else None, planned, regression, counted=bool(signature))
    now = utcnow()
    # What the report says of the host; the statement adds what the inventory knows.
    reported = reported_attributes(incoming.host)
    event_columns = event_values(reported, incoming, incoming.boot_key, signature, planned, regression)
    window = panic_window(incoming)
    earliest, latest = window or (None, None)
    versions = basis.versions
    values = (
        {
            "signature_id": event.signature_id,
            "signature_version": versions.signature if versions else None,
            "slots_version": versions.slots if versions else None,
            "token_hash": caller.token_hash if caller else None,
            "token_scope": basis.token["scope"] if basis.token else None,
            "panic_fingerprint": incoming.crash.fingerprint if window and incoming.crash else None,
            "panic_earliest": earliest,
            "panic_latest": latest,
            "report_answer": without(answer_of(None, routing, event), "event_id"),
        }
        | prefixed("event", event_columns | {"received_at": now})
        | prefixed("report", report_values(incoming) | {"received_at": now})
    )
    statement = report_at_once(
        (*event_columns, "received_at"), (*REPORT_COLUMNS, "received_at"),
        signed=signature is not None, keyed=reports_keyed(connection), marked=hosts_marked(connection),
    )
    rows = statement.execute(connection, values)
    if not rows:
        return None
    event_id, answer, replay_id = rows[0]
    if event_id is None:
        return read_stored_report_by_id(connection, replay_id)
    return cast(ReportAnswer, answer)


# The answer report_at_once is given: its signature's counts and Jira key are composed by the
# statement from what its snapshot holds.
COMPOSED_BY_THE_WRITE = SignatureStats(0, None, None)


def prefixed(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    return {f"{prefix}_{name}": value for name, value in values.items()}


def without(values: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in values.items() if key != name}


REPORT_COLUMNS = ("report_id", "source", "payload_sha256", "payload", "console_log")


def report_values(incoming: IncomingReport) -> dict[str, Any]:
    """The reports row of a new report, but for its event and answer."""
    values = (
        incoming.report_id,
        incoming.fields["source"],
        incoming.digest,
        without(incoming.raw, "console_log"),
        incoming.fields.get("console_log"),
    )
    return dict(zip(REPORT_COLUMNS, values, strict=True))


def host_at_crash(
    connection: Connection, statements: IngestStatements, reported: dict[str, Any], known: KnownHost | None
) -> HostAtCrash:
    """The host's id and its attributes at crash time; hosts first seen in a crash join the
    inventory with the attributes they reported."""
    if known is None:
        values = reported_attributes(reported)
        created_id = statements.insert_host.scalar(connection, values | {"hostname": reported["hostname"]})
        if created_id is not None:
            return HostAtCrash(created_id, snapshot(values, reported), created=True)
        known = read_host(connection, reported["hostname"])  # another report of it created it first
    return HostAtCrash(known.id, snapshot(known.attributes, reported))


def reported_attributes(reported: dict[str, Any]) -> dict[str, Any]:
    """A new host's inventory row from what its first report says (absent attributes: None)."""
    values = {name: reported.get(name) for name in HOST_ATTRIBUTES}
    values["labels"] = reported.get("labels") or {}
    return values


def snapshot(inventory: dict[str, Any], reported: dict[str, Any]) -> dict[str, Any]:
    """Attributes at crash time: what the report says, else what the inventory knows."""
    values = {name: inventory.get(name) for name in HOST_ATTRIBUTES}
    for name in HOST_ATTRIBUTES:
        if reported.get(name) is not None:
            values[name] = reported[name]
    values["labels"] = dict(inventory.get("labels") or {}) | (reported.get("labels") or {})
    return values


def route(session: Session, incoming: IncomingReport, context: IngestContext) -> Routing:
    """The signature the crash routes to, created if it is new."""
    if incoming.crash is None:
        return Routing(None, is_new=False, stats=None, slots=None)
    signature, is_new = resolve_or_create(
        session, incoming.crash, incoming.fields["crashed_at"], context.signature
    )
    if is_new:
        return Routing(signature, is_new=True, stats=None, slots=[])
    # The read describes this signature unless the fingerprint led to a merged one.
    described = context.signature is not None and signature.id == context.signature.id
    return Routing(
        signature,
        is_new=False,
        stats=context.stats if described else None,
        slots=context.slots if described else None,
    )


def regression_of(
    signature: SignatureSnapshot | None, kernel_version: str | None, crashed_at: Any
) -> str | None:
    """How a new event bears on a resolved signature: regressed, unless it predates the fix."""
    if signature is None or signature.status != "resolved":
        return None
    return regression_verdict(kernel_version, crashed_at, signature.fixed_in_kernel, signature.resolved_at)


NO_PROCESS: dict[str, Any] = {"program_version": None, "process_started_at": None, "process_uptime_s": None}


def process_attributes(report: Mapping[str, Any]) -> dict[str, Any]:
    """A userspace crash's process as event attributes, for the population analysis: the
    program's release (`stack.process.version`, else the executable's `stack.build_id`), when
    the process started and how long it had run (either time gives the other)."""
    stack = report.get("stack") or {}
    if report["source"] != "userspace" or not stack:
        return NO_PROCESS
    process = stack.get("process") or {}
    started, uptime = process.get("started_at"), process.get("uptime_s")
    if started is None and uptime is not None:
        started = report["crashed_at"] - timedelta(seconds=uptime)
    if uptime is None and started is not None:
        uptime = max(0.0, (report["crashed_at"] - started).total_seconds())
    return {
        "program_version": process.get("version") or stack.get("build_id"),
        "process_started_at": started,
        "process_uptime_s": round(uptime) if uptime is not None else None,
    }


def find_or_open_event(
    session: Session,
    connection: Connection,
    statements: IngestStatements,
    host: HostAtCrash,
    incoming: IncomingReport,
    boot_key: str,
    signature: SignatureSnapshot | None,
    planned: CaptureDecision | None,
    regression: str | None,
) -> tuple[OpenEvent, bool]:
    """One event per crash: reports with the same hostname and boot key join it (False)."""
    report = incoming.fields
    values = event_values(host.attributes, incoming, boot_key, signature, planned, regression) | {
        "host_id": host.id
    }
    created_id = statements.insert_event.scalar(connection, values)
    if created_id is not None:
        event = OpenEvent(
            created_id,
            values["crashed_at"],
            values["kernel_version"],
            values["sources"],
            values["signature_id"],
            planned,
            regression,
        )
        return event, True
    row = connection.execute(LOCKED_EVENT, {"host_id": host.id, "boot_key": boot_key}).one_or_none()
    if row is None:  # the event key is kept, the event archived (docs/partitioning.md)
        raise ArchivedEvent(archived_event_id(connection, host.id, boot_key))
    event = OpenEvent(
        row.id,
        row.crashed_at,
        row.kernel_version,
        list(row.sources),
        row.signature_id,
        CaptureDecision(row.capture_action, row.capture_reason, row.capture_dump_level),
        row.regression,
    )
    changes: dict[str, Any] = {}
    if event.signature_id is None and signature is not None:
        # The first source could not fingerprint (e.g. a DPU with no log); this one can.
        changes |= fingerprint_values(incoming, signature)
        count_event(session, signature.id, event.id, event.crashed_at)
        event.counted = True
    if report["source"] not in event.sources:
        changes["sources"] = [*event.sources, report["source"]]
    if report["repeat_count"]:
        changes["repeats"] = EVENTS.repeats + report["repeat_count"]
    if changes:
        connection.execute(update(Event.__table__).where(EVENTS.id == event.id).values(**changes))
    return event, False


def archived_event_id(connection: Connection, host_id: int, boot_key: str) -> int | None:
    return connection.execute(ARCHIVED_EVENT, {"host_id": host_id, "boot_key": boot_key}).scalar()


def fingerprint_values(incoming: IncomingReport, signature: SignatureSnapshot | None) -> dict[str, Any]:
    """An event's columns from the engine's verdict and the signature it routes to."""
    crash = incoming.crash
    return {
        "signature_id": signature.id if signature else None,
        "fingerprint": crash.fingerprint if crash else None,
        "algorithm_version": crash.algorithm_version if crash else None,
        "title": crash.title[:512] if crash else None,
        "explanation": crash.explanation if crash else None,
        "fingerprint_error": incoming.engine_error,
    }


def event_values(
    attributes: dict[str, Any],
    incoming: IncomingReport,
    boot_key: str,
    signature: SignatureSnapshot | None,
    planned: CaptureDecision | None,
    regression: str | None,
) -> dict[str, Any]:
    """A new event's columns but its host_id (and received_at, a default)."""
    report = incoming.fields
    return attributes | fingerprint_values(incoming, signature) | {
        "hostname": incoming.host["hostname"],
        "boot_key": boot_key,
        "boot_id": report.get("boot_id"),
        "crashed_at": report["crashed_at"],
        "uptime_s": report.get("uptime_s"),
        "repeats": report["repeat_count"],
        "first_source": report["source"],
        "sources": [report["source"]],
        "capture_action": planned.action if planned else "pending",
        "capture_reason": planned.reason if planned else "",
        "capture_dump_level": planned.dump_level if planned else None,
        "regression": regression,
    } | process_attributes(report)


def is_pstore_record(incoming: IncomingReport) -> bool:
    """A pstore report of a crash without the crashed boot's boot_id (read back after the
    reboot): its panic's event is found by host, fingerprint and time."""
    report = incoming.fields
    return report["source"] == "pstore" and not report.get("boot_id") and incoming.crash is not None


def paired_boot_key(
    connection: Connection, host: HostAtCrash, incoming: IncomingReport, context: IngestContext
) -> str | None:
    """The boot key of the event the other half of this report's panic opened, if it is half
    of a pair: for a pstore record, the host's event from a crash kernel or DPU with the same
    fingerprint, crashed within PSTORE_JOIN_WINDOW of the panic time the record carries
    (PANIC_PARTNER); for a panic's report, the event its pstore record opened first. None:
    no such event, or no pair. On PostgreSQL the host's row is taken first and the event looked
    for in a statement of its own (HOST_TAKEN_BY_RECORD, HOST_SHARED_BY_PANIC), so that of two
    halves stored at once the second finds the first's event; on SQLite the read ran inside
    this transaction, which serialises writers, and its answer stands."""
    crash = incoming.crash
    if crash is None or host.created:  # no other report's event is on a host this one created
        return None
    postgresql = connection.dialect.name == "postgresql"
    record = is_pstore_record(incoming)
    window = join_window(incoming.fields["crashed_at"]) if record else panic_window(incoming)
    if window is None or not (record or postgresql):
        return context.pstore_boot_key
    taking, other_half = (
        (HOST_TAKEN_BY_RECORD, PANIC_PARTNER) if record else (HOST_SHARED_BY_PANIC, PSTORE_FIRST_OF_HOST)
    )
    if postgresql:
        connection.execute(taking, {"host_id": host.id})
    earliest, latest = window
    return connection.execute(
        other_half,
        {"host_id": host.id, "panic_fingerprint": crash.fingerprint, "panic_earliest": earliest,
         "panic_latest": latest},
    ).scalar()


def panic_window(incoming: IncomingReport) -> tuple[datetime, datetime] | None:
    """A panic's report (crash kernel, DPU): the times within which its pstore record, stored
    first, is taken for the same crash (None: any other report)."""
    if incoming.crash is None or incoming.fields["source"] not in PANIC_SOURCES:
        return None
    return join_window(incoming.fields["crashed_at"])


CALENDAR_START, CALENDAR_END = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def join_window(crashed_at: datetime) -> tuple[datetime, datetime]:
    """The times within which a pstore record and a panic's report of one host and fingerprint
    are taken for one crash (their clocks and what each calls the crash's time differ), cut at
    the ends of the calendar (a row stored before crashed_at was bounded may say year 9999)."""
    before, after = crashed_at - CALENDAR_START, CALENDAR_END - crashed_at
    return crashed_at - min(PSTORE_JOIN_WINDOW, before), crashed_at + min(PSTORE_JOIN_WINDOW, after)


def count_new_event(session: Session, routing: Routing, event: OpenEvent) -> Routing:
    """A new event's bookkeeping on its signature: counted, announced when the signature is new,
    first_seen moved earlier, flipped to regressed."""
    signature = routing.signature
    if signature is None:
        return routing
    count_event(session, signature.id, event.id, event.crashed_at)
    event.counted = True
    if routing.is_new:
        publish(session, "signature.created", signature.id)
        return routing
    signature = seen_at(session, signature, event.crashed_at)
    if event.regression == REGRESSED:
        signature = flip_to_regressed(session, signature, event.id)
    return replace(routing, signature=signature)


def flip_to_regressed(session: Session, signature: SignatureSnapshot, event_id: int) -> SignatureSnapshot:
    """A resolved signature with a regressed event: regressed (once, even in a storm)."""
    flipped = session.execute(
        update(Signature)
        .where(Signature.id == signature.id, Signature.status == "resolved")
        .values(status="regressed", updated_at=utcnow())
    ).rowcount
    if not flipped:  # a concurrent report of the same storm flipped it first: answer what it is now
        now = session.scalar(select(Signature.status).where(Signature.id == signature.id))
        return replace(signature, status=now)
    publish(session, "signature.regressed", signature.id, event_id=event_id)
    return replace(signature, status="regressed")


def claimed_decision(
    session: Session,
    connection: Connection,
    settings: Settings,
    incoming: IncomingReport,
    routing: Routing,
    event: OpenEvent,
    host_id: int,
) -> CaptureDecision:
    """The answer of a new event whose answer needs a claim (a capture slot, an extra capture,
    a slot of the budget of reports without a signature), written onto the event."""
    if routing.signature is None:
        decision = decide_without_signature(session, settings, incoming.no_signature_cause, event.id, host_id)
    else:
        decision = decide_capture(session, routing.signature, event, settings, routing.is_new, routing.slots)
    connection.execute(
        DECIDED,
        {
            "event_id": event.id,
            "action": decision.action,
            "reason": decision.reason,
            "dump_level": decision.dump_level,
        },
    )
    return decision


def answer_of(session: Session | None, routing: Routing, event: OpenEvent) -> ReportAnswer:
    assert event.capture is not None
    signature = routing.signature
    return {
        "event_id": str(event.id),
        "duplicate": False,
        "known": signature is not None and not routing.is_new,
        "signature": signature_summary(session, routing, event) if signature is not None else None,
        "capture": event.capture.as_dict(),
    }


def signature_summary(session: Session | None, routing: Routing, event: OpenEvent) -> SignatureSummary:
    """The answer's signature object. Its counts are the ones read before the writes plus this
    event (what a read after them would see, without the round trip); a signature the read
    did not describe (a merged one's survivor) is read now."""
    signature = routing.signature
    assert signature is not None
    last_seen: datetime | None
    if routing.is_new:
        events, last_seen, jira_key = (1, event.crashed_at, None) if event.counted else (0, None, None)
    elif routing.stats is not None:
        events, last_seen, jira_key = routing.stats.events, routing.stats.last_seen, routing.stats.jira_key
        if event.counted:
            events, last_seen = events + 1, max(last_seen or event.crashed_at, event.crashed_at)
    else:
        assert session is not None  # only a signature the read did not describe is read now
        return summary(session, signature)
    return summary(session, signature, (events, last_seen), jira_key)
