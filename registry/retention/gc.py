"""Retention's garbage collection: read the facts, let registry.retention.policy decide, act.

Dumps go in three durable steps, so a run killed anywhere is finished by the next one:
1. mark: `stored` -> `deleting`, in a transaction that locks the rows and reads their pins
   after the lock (registry.retention.pins serialises on the same rows);
2. delete the object from the store (deleting a missing object is no error);
3. record: `deleting` -> `deleted` with `deleted_at` (the row stays, as history).
A later run decides again over `deleting` rows too: one still to go is deleted and recorded;
one the policy now keeps (its signature regressed meanwhile) goes back to `stored` if its
object is still there. Console logs are trimmed a batch per transaction (the report's text and
its `console_trims` row together), so an interrupted run leaves whole logs or trimmed ones.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import groupby, islice
from typing import Any, TypeVar

from sqlalchemy import Row, exists, func, select, update
from sqlalchemy.orm import Session

from registry.capture.models import Capture, CaptureSlot
from registry.capture.policy import SLOT_RELEASED
from registry.config import Settings
from registry.core.events import Event, Report
from registry.core.signatures import Signature
from registry.db import Database, utcnow
from registry.rca.models import Rca
from registry.retention.models import ConsoleTrim, DumpPin
from registry.retention.policy import (
    DELETE,
    TRIM,
    Ages,
    Decision,
    Dump,
    EventLog,
    SignatureState,
    decide_dumps,
    decide_log,
)
from registry.retention.symbols import abort_stale_uploads, collect_symbols
from registry.retention.trim import trim_log
from registry.storage.models import Dump as StoredDump
from registry.storage.store import DumpStore, store_location

OPEN_RCA_STATUSES = ("proposed", "confirmed")  # a rejected or superseded RCA protects nothing
BATCH = 500  # rows per transaction
LOG_BATCH = 100  # console logs per transaction (each up to 1 MiB)
LOG_RANGE = 100_000  # report ids read for console-log candidates at a time: memory stays flat
STORED, DELETING, DELETED = "stored", "deleting", "deleted"

Progress = Callable[[str], None]
T = TypeVar("T")


@dataclass(frozen=True)
class DoomedDump:
    """A dump a dry run would delete, and the retention rule that lets it go."""

    dump_id: int
    capture_id: int
    event_id: int
    signature_id: int | None
    key: str
    bytes: int
    state: str  # stored, or deleting (marked by a run that did not finish)
    rule: str
    reason: str


Doomed = Callable[[DoomedDump], None]


@dataclass
class GcOutcome:
    """What one run did (or, dry, would do)."""

    dry_run: bool
    dumps_deleted: int = 0
    bytes_freed: int = 0
    dumps_restored: int = 0  # marked by an earlier run, kept now, object still there
    kept_by_rule: dict[str, int] = field(default_factory=dict)
    logs_trimmed: int = 0
    log_bytes_freed: int = 0
    logs_kept_by_rule: dict[str, int] = field(default_factory=dict)
    symbols_deleted: int = 0
    symbol_bytes_freed: int = 0
    symbol_uploads_aborted: int = 0

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        kept = ", ".join(f"{rule} {n}" for rule, n in sorted(self.kept_by_rule.items())) or "none"
        logs = ", ".join(f"{rule} {n}" for rule, n in sorted(self.logs_kept_by_rule.items())) or "none"
        return (
            f"dumps: {verb} {self.dumps_deleted} ({self.bytes_freed} bytes), restored {self.dumps_restored}, "
            f"kept by rule: {kept}\nconsole logs: {'would trim' if self.dry_run else 'trimmed'} "
            f"{self.logs_trimmed} ({self.log_bytes_freed} bytes), kept whole by rule: {logs}\n"
            f"symbol files: {verb} {self.symbols_deleted} ({self.symbol_bytes_freed} bytes), "
            f"abandoned uploads {'would abort' if self.dry_run else 'aborted'}: {self.symbol_uploads_aborted}"
        )


def ages_of(settings: Settings) -> Ages:
    return Ages(
        exemplars=settings.full_captures_per_window,
        dump=timedelta(days=settings.retention.dump_days),
        resolved_grace=timedelta(days=settings.retention.resolved_grace_days),
        log=timedelta(days=settings.retention.log_days),
    )


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def open_rca_citations(session: Session) -> tuple[frozenset[int], frozenset[int]]:
    """(capture ids, event ids) cited as evidence by open RCAs."""
    captures: set[int] = set()
    events: set[int] = set()
    for (evidence,) in session.execute(select(Rca.evidence).where(Rca.status.in_(OPEN_RCA_STATUSES))):
        for item in evidence or []:
            for kind, key, into in (("capture", "capture_id", captures), ("event", "event_id", events)):
                if isinstance(item, dict) and item.get("type") == kind and str(item.get(key, "")).isdigit():
                    into.add(int(item[key]))
    return frozenset(captures), frozenset(events)


def _holds_slot(event_id: Any) -> Any:
    return exists().where(CaptureSlot.event_id == event_id, CaptureSlot.state != SLOT_RELEASED)


def _pinned(capture_id: Any) -> Any:
    return exists().where(DumpPin.capture_id == capture_id, DumpPin.unpinned_at.is_(None))


def signature_states(session: Session) -> dict[int, SignatureState]:
    return {
        row.id: SignatureState(row.status, row.resolved_at)
        for row in session.execute(select(Signature.id, Signature.status, Signature.resolved_at))
    }


@dataclass(frozen=True)
class DumpRow:
    dump_id: int
    signature_id: int | None
    state: str
    dump: Dump


def dump_rows(
    session: Session, location: str, cited: tuple[frozenset[int], frozenset[int]]
) -> Iterator[DumpRow]:
    """The store's stored and deleting dumps with what protects them, by signature."""
    cited_captures, cited_events = cited
    query = (
        select(
            StoredDump.id,
            StoredDump.state,
            StoredDump.stored_at,
            StoredDump.created_at,
            Capture.id.label("capture_id"),
            Capture.event_id,
            Capture.signature_id,
            _holds_slot(Capture.event_id).label("holds_slot"),
            _pinned(Capture.id).label("pinned"),
        )
        .join(Capture, Capture.id == StoredDump.capture_id)
        .where(StoredDump.state.in_((STORED, DELETING)), StoredDump.store == location)
        .order_by(Capture.signature_id, Capture.id)
        .execution_options(yield_per=BATCH)
    )
    for row in session.execute(query):
        cited_now = row.capture_id in cited_captures or row.event_id in cited_events
        dump = Dump(
            row.capture_id,
            row.event_id,
            row.stored_at or row.created_at,
            bool(row.holds_slot),
            pinned=bool(row.pinned),
            cited=cited_now,
        )
        yield DumpRow(row.id, row.signature_id, row.state, dump)


@dataclass
class DumpPlan:
    """What the policy says about the store's dumps now, as dump ids (8 bytes each)."""

    mark: array[int] = field(default_factory=lambda: array("q"))  # stored, to go
    finish: array[int] = field(default_factory=lambda: array("q"))  # deleting (an earlier run), to go
    restore: array[int] = field(default_factory=lambda: array("q"))  # deleting, kept now
    why: dict[int, Decision] | None = None  # each going dump's decision, when asked (a dry run)


def plan_dumps(
    session: Session, location: str, now: datetime, ages: Ages, outcome: GcOutcome, explain: bool = False
) -> DumpPlan:
    """Read the facts one signature at a time (a group is one signature's dumps) and decide;
    `explain`: keep each going dump's decision too."""
    states = signature_states(session)
    plan = DumpPlan(why={} if explain else None)
    rows = dump_rows(session, location, open_rca_citations(session))
    for signature_id, group in groupby(rows, key=lambda row: row.signature_id):
        members = list(group)
        signature = states.get(signature_id) if signature_id is not None else None
        decided = decide_dumps((row.dump for row in members), signature, now, ages)
        for row in members:
            decision = decided[row.dump.capture_id]
            if decision.action == DELETE:
                (plan.mark if row.state == STORED else plan.finish).append(row.dump_id)
                if plan.why is not None:
                    plan.why[row.dump_id] = decision
            else:
                outcome.kept_by_rule[decision.rule] = outcome.kept_by_rule.get(decision.rule, 0) + 1
                if row.state == DELETING:
                    plan.restore.append(row.dump_id)
    return plan


def objects(session: Session, ids: list[int], state: str, lock: bool = False) -> list[Row[Any]]:
    """(id, key, bytes, capture_id) of those dumps still in `state` (locked in id order, as
    registry.storage.service.lock_dumps locks them)."""
    query = (
        select(StoredDump.id, StoredDump.key, StoredDump.bytes, StoredDump.capture_id)
        .where(StoredDump.id.in_(ids), StoredDump.state == state)
        .order_by(StoredDump.id)
    )
    return list(session.execute(query.with_for_update() if lock else query))


def protected_now(session: Session, capture_ids: list[int]) -> set[int]:
    """Those captures a standing pin or an open RCA protects, read after their dumps' rows were
    locked: one committed before the lock is seen here, one after it finds the dump deleting."""
    if not capture_ids:
        return set()
    cited_captures, cited_events = open_rca_citations(session)
    pinned = _pinned(Capture.id).label("pinned")
    rows = session.execute(select(Capture.id, Capture.event_id, pinned).where(Capture.id.in_(capture_ids)))
    return {row.id for row in rows if row.pinned or row.id in cited_captures or row.event_id in cited_events}


def mark(database: Database, ids: list[int]) -> list[Row[Any]]:
    """stored -> deleting, the rows locked first and their pins and open RCAs read after the
    lock: a pin or an RCA made before is seen here, one made after finds the dump deleting and
    is refused (registry.retention.pins, registry.rca.service.hold_cited_dumps)."""
    with database.session() as session:
        locked = objects(session, ids, STORED, lock=True)
        protected = protected_now(session, [row.capture_id for row in locked])
        marked = [row for row in locked if row.capture_id not in protected]
        if marked:
            session.execute(
                update(StoredDump)
                .where(StoredDump.id.in_([row.id for row in marked]))
                .values(state=DELETING)
                .execution_options(synchronize_session=False)
            )
    return marked


def record_deleted(database: Database, rows: list[Row[Any]], now: datetime, outcome: GcOutcome) -> None:
    """deleting -> deleted, counting only the rows this call moved (never one twice)."""
    with database.session() as session:
        moved = set(
            session.scalars(
                update(StoredDump)
                .where(StoredDump.id.in_([row.id for row in rows]), StoredDump.state == DELETING)
                .values(state=DELETED, deleted_at=now)
                .returning(StoredDump.id)
                .execution_options(synchronize_session=False)
            )
        )
    outcome.dumps_deleted += len(moved)
    outcome.bytes_freed += sum(row.bytes or 0 for row in rows if row.id in moved)


def restore(database: Database, store: DumpStore, ids: list[int], now: datetime, outcome: GcOutcome) -> None:
    """Marked dumps the policy keeps now: back to stored when the object is still there."""
    with database.session() as session:
        rows = objects(session, ids, DELETING)
    present = [row for row in rows if store.head(row.key) is not None]
    gone = [row for row in rows if row not in present]
    if present:
        with database.session() as session:
            outcome.dumps_restored += session.execute(
                update(StoredDump)
                .where(StoredDump.id.in_([row.id for row in present]), StoredDump.state == DELETING)
                .values(state=STORED)
                .execution_options(synchronize_session=False)
            ).rowcount
    if gone:
        record_deleted(database, gone, now, outcome)


def delete_objects(
    database: Database,
    store: DumpStore,
    rows: list[Row[Any]],
    now: datetime,
    outcome: GcOutcome,
    progress: Progress,
) -> None:
    for row in rows:
        store.delete(row.key)
    record_deleted(database, rows, now, outcome)
    progress(f"deleted {outcome.dumps_deleted} dumps so far ({outcome.bytes_freed} bytes freed)")


def report_doomed(database: Database, plan: DumpPlan, outcome: GcOutcome, doomed: Doomed) -> None:
    """A dry run: each dump the plan lets go, told to `doomed` in id order, and counted."""
    assert plan.why is not None
    query = (
        select(StoredDump.id, StoredDump.capture_id, Capture.event_id, Capture.signature_id,
               StoredDump.key, StoredDump.bytes, StoredDump.state)
        .join(Capture, Capture.id == StoredDump.capture_id)
        .order_by(StoredDump.id)
    )
    with database.session() as session:
        for ids, state in ((plan.mark, STORED), (plan.finish, DELETING)):
            for chunk in batches(ids, BATCH):
                for row in session.execute(query.where(StoredDump.id.in_(chunk), StoredDump.state == state)):
                    decision = plan.why[row.id]
                    outcome.dumps_deleted += 1
                    outcome.bytes_freed += row.bytes or 0
                    doomed(DoomedDump(row.id, row.capture_id, row.event_id, row.signature_id, row.key,
                                      row.bytes or 0, row.state, decision.rule, decision.reason))


def collect_dumps(
    database: Database,
    store: DumpStore,
    ages: Ages,
    now: datetime,
    dry_run: bool,
    outcome: GcOutcome,
    progress: Progress,
    batch: int,
    doomed: Doomed,
) -> None:
    with database.session() as session:
        plan = plan_dumps(session, store_location(store), now, ages, outcome, explain=dry_run)
    progress(f"dumps: {len(plan.mark) + len(plan.finish)} to delete, {len(plan.restore)} to restore, "
             f"{sum(outcome.kept_by_rule.values())} kept")
    if dry_run:
        report_doomed(database, plan, outcome, doomed)
        return
    for chunk in batches(plan.restore, batch):
        restore(database, store, chunk, now, outcome)
    for chunk in batches(plan.finish, batch):
        with database.session() as session:
            rows = objects(session, chunk, DELETING)
        delete_objects(database, store, rows, now, outcome, progress)
    for chunk in batches(plan.mark, batch):
        delete_objects(database, store, mark(database, chunk), now, outcome, progress)


def log_candidates(
    session: Session, now: datetime, ages: Ages, cited: tuple[frozenset[int], frozenset[int]],
    reports: tuple[int, int],
) -> Iterator[tuple[int, EventLog]]:
    """(report id, its event's facts) for whole console logs of events older than the window,
    of the reports whose ids are in [first, end)."""
    cited_captures, cited_events = cited
    kept_dump = (
        select(Capture.id)
        .join(StoredDump, StoredDump.capture_id == Capture.id)
        .where(Capture.event_id == Event.id, StoredDump.state.in_(("uploading", STORED)))
        .exists()
    )
    pinned = select(Capture.id).where(Capture.event_id == Event.id, _pinned(Capture.id)).exists()
    query = (
        select(
            Report.id,
            Event.id.label("event_id"),
            Event.received_at,
            _holds_slot(Event.id).label("holds_slot"),
            kept_dump.label("kept_dump"),
            pinned.label("pinned"),
        )
        .join(Event, Event.id == Report.event_id)
        .where(
            Report.id >= reports[0],
            Report.id < reports[1],
            Event.received_at < now - ages.log,
            Report.console_log.is_not(None),
            ~exists().where(ConsoleTrim.report_id == Report.id),
        )
        .order_by(Report.id)
        .execution_options(yield_per=BATCH)
    )
    cited_events_of_captures = (
        set(session.scalars(select(Capture.event_id).where(Capture.id.in_(cited_captures))))
        if cited_captures
        else set()
    )
    for row in session.execute(query):
        yield (
            row.id,
            EventLog(
                row.event_id,
                row.received_at,
                bool(row.holds_slot),
                dump_kept=bool(row.kept_dump or row.pinned),
                cited=row.event_id in cited_events or row.event_id in cited_events_of_captures,
            ),
        )


def trim_logs(
    database: Database, ages: Ages, now: datetime, dry_run: bool, outcome: GcOutcome, progress: Progress,
    log_range: int = LOG_RANGE,
) -> None:
    """Report ids a range at a time: read the range's candidates, decide, trim them in batches,
    say how far it got. What a run trimmed is recorded with it, so a run killed anywhere leaves
    whole logs or trimmed ones, and the next run passes over what is done."""
    with database.session() as session:
        first, last = session.execute(select(func.min(Report.id), func.max(Report.id))).one()
        cited = open_rca_citations(session)
    if first is None:
        return
    for start in range(first, last + 1, log_range):
        to_trim: array[int] = array("q")
        with database.session() as session:
            for report_id, log in log_candidates(session, now, ages, cited, (start, start + log_range)):
                decision = decide_log(log, now, ages)
                if decision.action == TRIM:
                    to_trim.append(report_id)
                else:
                    kept = outcome.logs_kept_by_rule
                    kept[decision.rule] = kept.get(decision.rule, 0) + 1
        for chunk in batches(to_trim, LOG_BATCH):
            _trim(database, chunk, now, dry_run, outcome)
        progress(
            f"console logs: reports up to id {min(start + log_range - 1, last)} of {last} read, "
            f"{outcome.logs_trimmed} {'would be ' if dry_run else ''}trimmed so far "
            f"({outcome.log_bytes_freed} bytes freed)"
        )


def _trim(
    database: Database, report_ids: list[int], now: datetime, dry_run: bool, outcome: GcOutcome
) -> None:
    """One transaction: each report's log replaced by its crash report, and the trim recorded
    (a log that cannot be trimmed is recorded as kept whole, so it is not read again)."""
    with database.session() as session:
        rows = session.execute(
            select(Report.id, Report.event_id, Report.console_log, Report.payload).where(
                Report.id.in_(report_ids),
                Report.console_log.is_not(None),
                ~exists().where(ConsoleTrim.report_id == Report.id),
            )
        ).all()
        for row in rows:
            stack = (row.payload or {}).get("stack")
            trimmed = trim_log(row.console_log, stack if isinstance(stack, dict) else None)
            whole = len(row.console_log.encode())
            kept = len(trimmed.text.encode()) if trimmed else whole
            if trimmed:
                outcome.logs_trimmed += 1
                outcome.log_bytes_freed += whole - kept
            if dry_run:
                continue
            if trimmed:
                session.execute(
                    update(Report)
                    .where(Report.id == row.id)
                    .values(console_log=trimmed.text)
                    .execution_options(synchronize_session=False)
                )
            session.add(
                ConsoleTrim(
                    report_id=row.id,
                    event_id=row.event_id,
                    trimmed_at=now,
                    first_line=trimmed.first_line if trimmed else 1,
                    total_lines=trimmed.total_lines if trimmed else row.console_log.count("\n") + 1,
                    whole_bytes=whole,
                    kept_bytes=kept,
                )
            )
        if dry_run:
            session.rollback()


def collect(
    database: Database,
    store: DumpStore,
    settings: Settings,
    dry_run: bool = False,
    now: datetime | None = None,
    progress: Progress = lambda line: None,
    batch: int = BATCH,
    doomed: Doomed = lambda dump: None,
    log_range: int = LOG_RANGE,
) -> GcOutcome:
    """One gc run: dumps first (a log follows its event's kept dumps), then console logs. A
    dry run tells `doomed` each dump it would delete."""
    now = now or utcnow()
    ages = ages_of(settings)
    outcome = GcOutcome(dry_run)
    collect_dumps(database, store, ages, now, dry_run, outcome, progress, batch, doomed)
    trim_logs(database, ages, now, dry_run, outcome, progress, log_range)
    outcome.symbols_deleted, outcome.symbol_bytes_freed = collect_symbols(
        database, store, settings.retention.symbol_days, now, dry_run, progress)
    outcome.symbol_uploads_aborted = abort_stale_uploads(database, store, now, dry_run, progress)
    return outcome
