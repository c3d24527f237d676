"""Re-fingerprint history with the current engine, carrying triage to the new signatures.

Every event is fingerprinted again from its stored raw reports (the first report that holds
a crash, as at ingest). Then each old signature's events are compared with the new
fingerprints they now get:

- one old -> one new: *move*. The old row takes the new fingerprint in place, so its id,
  status, owner, Jira link and RCAs stay; the old fingerprint becomes an alias of it.
- several old -> one new: *merge*. The old signature with most events takes the new
  fingerprint (or the one already holding it: symbols arriving a build-id at a time move one
  release's signature first); the others are merged into it (alias rule, like a manual merge),
  and their Jira links, RCAs, owner and a title set by hand move to it where it has none; the
  merged status is the most active.
- one old -> several new: *split*. The biggest share keeps the old row; the others get new
  signatures that inherit status and owner. A signature someone merged by hand does not
  split: the human decision stands, the new fingerprints become aliases of it. Nor do the
  crashes of a fingerprint an alias routes to a standing signature: ingest sends them there.

Captures and their capture slots follow their events to whichever signature the events land
on (capture history, savings, the dedup counts and the K-dump budget read them by signature).
Every event also gets the current engine's explanation of its fingerprint (written in the
short per-chunk transactions, only where it differs from the stored one), so events stored
before explanations existed, or explained by an older engine, read like new ones. A rerun with
an unchanged engine changes nothing.

Live ingest goes on meanwhile. The slow part (fingerprinting every stored report) reads
without blocking anyone; then the rebuild holds the signatures table (ingest can still store
events of known signatures, but waits to create or change one), fingerprints the events that
arrived meanwhile, re-reads which signature each event is on, and applies the plan, so a
signature live ingest created with one of the new fingerprints is taken into account instead
of colliding with it.

Memory stays flat over any history: each event's new fingerprint goes to `rebuild_fingerprints`
(registry.signatures.checkpoint) in the transaction that fingerprinted it, and the plan is read
from those rows joined with the events; only one entry per distinct fingerprint is held. A
rebuild of the whole history that was stopped continues after the last event it wrote there.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, insert, select, text, update
from sqlalchemy.orm import Session

from registry.core.events import Event, Report
from registry.core.signatures import Signature, SignatureAlias
from registry.core.wiring import Engine, SignatureListeners
from registry.db import Database
from registry.fingerprint import ALGORITHM_VERSION, CrashSignature
from registry.signatures.checkpoint import CRASH, ENGINE_FAILED, NO_CRASH, WHOLE_HISTORY, RebuildFingerprint
from registry.signatures.dialect import dialect_of
from registry.signatures.identify import identify
from registry.signatures.merging import MERGE, REBUILD, recount, set_alias
from registry.signatures.service import stored_names

# When signatures merge, the merged one takes the most active of their statuses.
STATUS_PRECEDENCE = ("regressed", "triaged", "new", "resolved", "ignored")
CHUNK = 500


@dataclass
class RebuildSummary:
    """What a rebuild did, for the operator."""

    events: int = 0
    refingerprinted: int = 0
    explained: int = 0
    without_crash: int = 0
    engine_failed: int = 0
    unchanged: int = 0
    moved: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    split: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = [f"events: {self.events} re-fingerprinted: {self.refingerprinted}, "
                f"without a crash under this engine (kept as they were): {self.without_crash}, "
                f"the engine failed on (left unfingerprinted): {self.engine_failed}, "
                f"explanations written: {self.explained}",
                f"signatures unchanged: {self.unchanged}, moved: {len(self.moved)}, "
                f"merged: {len(self.merged)}, split: {len(self.split)}, new: {len(self.created)}"]
        details = [*(f"moved   {m}" for m in self.moved), *(f"merged  {m}" for m in self.merged),
                   *(f"split   {s}" for s in self.split), *(f"new     {c}" for c in self.created),
                   *(f"note    {n}" for n in self.notes)]
        return head + details


def _reports_by_event(
    session: Session, after_event: int, events: int | None = None, events_of: Select | None = None
) -> Iterator[tuple[int, list[tuple[str | None, dict]]]]:
    """The raw reports, in arrival order, of the events after `after_event` (of the next
    `events` of them if given; only those `events_of` selects if given), streamed."""
    later = select(Event.id).where(Event.id > after_event).order_by(Event.id)
    if events_of is not None:
        later = later.where(Event.id.in_(events_of))
    if events is not None:
        later = later.limit(events)
    rows = session.execute(
        select(Report.event_id, Report.console_log, Report.payload)
        .where(Report.event_id.in_(later.scalar_subquery()))
        .order_by(Report.event_id, Report.id)
    ).yield_per(CHUNK)
    current, reports = None, []
    for event_id, console_log, payload in rows:
        if event_id != current and current is not None:
            yield current, reports
            reports = []
        current = event_id
        reports.append((console_log, payload or {}))
    if current is not None:
        yield current, reports


class EngineFailed(Exception):
    """The engine raised on one of the event's reports: it stays unfingerprinted."""


def _crash(reports: list[tuple[str | None, dict]], engine: Engine) -> CrashSignature | None:
    for console_log, payload in reports:
        try:
            crash = engine(console_log, payload.get("stack"))
        except Exception as error:
            raise EngineFailed(f"{type(error).__name__}: {error}") from error
        if crash is not None:
            return crash
    return None


class Rebuild:
    """One rebuild, in steps: fingerprint in short transactions (no lock held), each event's
    outcome written to `rebuild_fingerprints`, then in the applying transaction: hold, catch up,
    read placement, apply."""

    def __init__(self, summary: RebuildSummary, listeners: SignatureListeners, dry_run: bool = False,
                 engine: Engine = identify, events_of: Select | None = None) -> None:
        self.summary = summary
        self.listeners = listeners
        self.dry_run = dry_run
        self.engine = engine
        self.events_of = events_of
        # A dry run or a rebuild of some events keeps its rows apart and drops them at the end.
        own = f"{'dry' if dry_run else 'some'}-{uuid.uuid4().hex}"
        self.scope = WHOLE_HISTORY if events_of is None and not dry_run else own
        self.session: Session
        self.crashes: dict[str, CrashSignature] = {}  # one per distinct new fingerprint
        self.canonical: dict[int, int] = {}
        self.pairs: Counter[tuple[int | None, str]] = Counter()  # (old signature, new fingerprint) -> events
        self.first_crash: dict[str, datetime] = {}  # new fingerprint -> its earliest event's crashed_at
        self.last_event = 0  # events up to this id are fingerprinted

    @staticmethod
    def _follow(sid: int, merged_into: dict[int, int | None]) -> int:
        seen = {sid}
        while merged_into.get(sid) is not None and merged_into[sid] not in seen:
            sid = merged_into[sid]  # type: ignore[assignment]
            seen.add(sid)
        return sid

    def _rows(self) -> Any:
        return RebuildFingerprint.scope == self.scope

    def resume(self, session: Session) -> int:
        """Continue after the events a stopped rebuild of the whole history fingerprinted with
        this engine (rows by another engine version are dropped); how many there were."""
        if self.scope != WHOLE_HISTORY:
            return 0
        session.execute(delete(RebuildFingerprint).where(
            self._rows(), RebuildFingerprint.algorithm_version != ALGORITHM_VERSION))
        done, last = session.execute(select(func.count(), func.max(RebuildFingerprint.event_id))
                                     .where(self._rows())).one()
        if done:
            self.last_event = last
            self.summary.notes.append(f"continued after event {last}: {done} events were fingerprinted "
                                      "by a rebuild that stopped")
        return int(done)

    def forget(self, session: Session) -> None:
        session.execute(delete(RebuildFingerprint).where(self._rows()))

    def fingerprint_history(self, session: Session, progress: Callable[[int], None],
                            events: int | None = None) -> int:
        """Fingerprint the stored reports of the events not fingerprinted yet (of the next
        `events` of them if given), writing each outcome; how many events were read."""
        read = 0
        explained: dict[int, dict] = {}
        no_crash: list[int] = []
        outcomes: list[dict[str, Any]] = []
        for event_id, reports in _reports_by_event(session, self.last_event, events, self.events_of):
            read += 1
            self.summary.events += 1
            self.last_event = max(self.last_event, event_id)
            fingerprint = None
            try:
                crash = _crash(reports, self.engine)
            except EngineFailed:
                self.summary.engine_failed += 1
                outcome = ENGINE_FAILED
            else:
                if crash is None:
                    self.summary.without_crash += 1
                    no_crash.append(event_id)
                    outcome = NO_CRASH
                else:
                    self.crashes.setdefault(crash.fingerprint, crash)
                    fingerprint, outcome = crash.fingerprint, CRASH
                    explained[event_id] = crash.explanation
            outcomes.append({"scope": self.scope, "event_id": event_id, "outcome": outcome,
                             "fingerprint": fingerprint, "algorithm_version": ALGORITHM_VERSION})
            if len(explained) >= CHUNK:
                self._explain(session, explained)
                explained = {}
            if len(outcomes) >= CHUNK:
                session.execute(insert(RebuildFingerprint), outcomes)
                outcomes = []
            progress(1)
        self._explain(session, explained)
        if outcomes:
            session.execute(insert(RebuildFingerprint), outcomes)
        if not self.dry_run:  # the engine no longer fails on them, and finds no crash: settled
            for start in range(0, len(no_crash), CHUNK):
                session.execute(update(Event).where(Event.id.in_(no_crash[start:start + CHUNK]),
                                                    Event.fingerprint_error.is_not(None))
                                .values(fingerprint_error=None))
        return read

    def _explain(self, session: Session, explained: dict[int, dict]) -> None:
        """Store the events' explanations where they differ from what is stored (counted, not
        written, in a dry run)."""
        if not explained:
            return
        stored = dict(session.execute(
            select(Event.id, Event.explanation).where(Event.id.in_(list(explained)))).all())
        changed = [{"id": e, "explanation": x} for e, x in explained.items() if stored.get(e) != x]
        self.summary.explained += len(changed)
        if changed and not self.dry_run:
            session.execute(update(Event), changed)

    def apply_in(self, session: Session, progress: Callable[[int], None]) -> None:
        """The applying transaction: hold, catch up with live ingest, read placement, apply."""
        self.session = session
        self.hold_signatures()
        self.fingerprint_history(session, progress)  # the events that arrived meanwhile
        self.read_placement()
        self.apply()

    def hold_signatures(self) -> None:
        """Until commit, nobody else creates or changes a signature (reads go on). On SQLite,
        beginning the transaction is enough: it begins IMMEDIATE, taking the write lock."""
        connection = self.session.connection()
        hold = dialect_of(self.session).hold_signatures
        if hold is not None:
            connection.execute(text(hold))

    def read_placement(self) -> None:
        """Which (canonical) signature the events of each new fingerprint are on now, merges and
        live ingest included: counted by the database, per (old signature, new fingerprint)."""
        merged_into = dict(self.session.execute(select(Signature.id, Signature.merged_into_id)).all())
        self.canonical = {sid: self._follow(sid, merged_into) for sid in merged_into}
        self._recall_crashes()
        fingerprint = RebuildFingerprint.fingerprint
        rows = self.session.execute(
            select(Event.signature_id, fingerprint, func.count(), func.min(Event.crashed_at))
            .join(Event, Event.id == RebuildFingerprint.event_id)
            .where(self._rows(), RebuildFingerprint.outcome == CRASH)
            .group_by(Event.signature_id, fingerprint))
        for signature_id, fp, events, first in rows:
            old = self.canonical.get(signature_id) if signature_id else None
            self.pairs[(old, fp)] += events
            self.first_crash[fp] = min(first, self.first_crash.get(fp, first))

    def _recall_crashes(self) -> None:
        """The crashes behind the fingerprints a stopped rebuild wrote: one event of each,
        fingerprinted again."""
        firsts = self.session.execute(
            select(RebuildFingerprint.fingerprint, func.min(RebuildFingerprint.event_id))
            .where(self._rows(), RebuildFingerprint.outcome == CRASH)
            .group_by(RebuildFingerprint.fingerprint))
        for fp, event_id in firsts.all():
            if fp in self.crashes:
                continue
            for _, reports in _reports_by_event(self.session, event_id - 1, 1):
                crash = _crash(reports, self.engine)
                if crash is None or crash.fingerprint != fp:
                    raise RuntimeError(f"event {event_id} no longer fingerprints as {fp}: the engine changed "
                                       "since the rebuild that stopped; run the rebuild again")
                self.crashes[fp] = crash

    def plan(self) -> tuple[dict[str, int | None], dict[int, str]]:
        """new fingerprint -> the old signature row that takes it (None: a new row)."""
        fingerprints = {fp for _, fp in self.pairs}
        holders = dict(self.session.execute(select(Signature.fingerprint, Signature.id).where(
            Signature.fingerprint.in_(list(fingerprints)))).all()) if fingerprints else {}
        heir: dict[str, int | None] = {}
        taken: dict[int, str] = {}
        for fp, sid in holders.items():  # a standing row that already holds it keeps it
            if self.canonical.get(sid, sid) == sid:
                heir[fp], taken[sid] = sid, fp
        for (sid, fp), _ in sorted(self.pairs.items(), key=lambda kv: (-kv[1], kv[0][0] or 0, kv[0][1])):
            # a fingerprint held by a merged-away row follows its merge: no row takes it
            if sid is not None and fp not in heir and fp not in holders and sid not in taken:
                heir[fp], taken[sid] = sid, fp
        for fp in sorted(fingerprints):
            heir.setdefault(fp, None)
        return heir, taken

    def apply(self) -> None:
        heir, taken = self.plan()
        origins: dict[str, Counter[int | None]] = defaultdict(Counter)
        shares: dict[int, Counter[str]] = defaultdict(Counter)
        for (sid, fp), events in self.pairs.items():
            origins[fp][sid] += events
            if sid is not None:
                shares[sid][fp] += events
        hand_merged = set(self.session.scalars(
            select(SignatureAlias.signature_id).where(SignatureAlias.reason == MERGE)).all())
        target: dict[str, int] = {}
        for fp, sid in sorted(heir.items(), key=lambda kv: kv[1] is None):
            target[fp] = self._take(fp, sid, origins[fp], shares, hand_merged, target)
        self._retarget_events(target)
        for sid, share in shares.items():
            if sid not in taken:
                self._fold(sid, target[share.most_common(1)[0][0]])
        affected = set(target.values()) | set(shares)
        self._first_seen(affected)
        recount(self.session, affected)
        self.forget(self.session)  # applied: commits with the changes

    def _take(self, fp: str, sid: int | None, origins: Counter[int | None], shares: dict[int, Counter[str]],
              hand_merged: set[int], target: dict[str, int]) -> int:
        crash = self.crashes[fp]
        if sid is not None:
            signature = self.session.get_one(Signature, sid)
            if signature.fingerprint == fp and signature.algorithm_version == crash.algorithm_version:
                self.summary.unchanged += 1
            else:
                self._restamp(signature, crash)
                self.summary.moved.append(f"{signature.id}: {signature.fingerprint}")
            return signature.id
        holder = self.session.scalar(select(Signature.id).where(Signature.fingerprint == fp))
        if holder is not None:  # merged away: its merge rule routes the fingerprint
            return self.canonical.get(holder, holder)
        # An alias routes the fingerprint to a signature that stands after this plan: ingest
        # sends its crashes there (a release whose stripped binary has only a symbol table joins
        # its bug by the name an earlier move left as an alias), so the rebuild does too.
        aliased = self.session.scalar(
            select(SignatureAlias.signature_id).where(SignatureAlias.fingerprint == fp))
        routed = self.canonical.get(aliased, aliased) if aliased is not None else None
        if routed is not None and routed in target.values():
            self.summary.notes.append(f"{fp} stays with signature {routed}, which its alias names")
            return routed
        origin = min(origins.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or 0))[0]
        if origin is not None and origin in hand_merged and origin in target.values():
            set_alias(self.session, fp, origin, MERGE, "rebuild")
            self.summary.notes.append(f"{fp} joins hand-merged signature {origin}")
            return origin
        events = sum(origins.values())
        signature = self._create(crash, origin, self.first_crash[fp])
        if origin is not None:
            self.summary.split.append(f"{origin} -> {signature.id} ({fp}, {events} events)")
        else:
            self.summary.created.append(f"{signature.id}: {fp} ({events} events)")
        return signature.id

    def _restamp(self, signature: Signature, crash: CrashSignature) -> None:
        if signature.fingerprint != crash.fingerprint:
            set_alias(self.session, signature.fingerprint, signature.id, REBUILD, "rebuild")
            signature.fingerprint = crash.fingerprint
        signature.algorithm_version = crash.algorithm_version
        for name, value in stored_names(crash).items():
            if name != "title" or not signature.title_by_hand:  # a triager's title stays
                setattr(signature, name, value)
        signature.kind = crash.kind
        signature.frames, signature.labels = list(crash.frames), list(crash.labels)
        self.session.flush()

    def _create(self, crash: CrashSignature, origin: int | None, first_seen: datetime) -> Signature:
        parent = self.session.get(Signature, origin) if origin is not None else None
        signature = Signature(
            fingerprint=crash.fingerprint, algorithm_version=crash.algorithm_version, kind=crash.kind,
            **stored_names(crash), frames=list(crash.frames), labels=list(crash.labels),
            first_seen=first_seen, status=parent.status if parent else "new",
            owner=parent.owner if parent else None,
        )
        self.session.add(signature)
        self.session.flush()
        return signature

    def _retarget_events(self, target: dict[str, int]) -> None:
        """Each new fingerprint's events onto its signature, a chunk of the written rows at a time."""
        for fp, signature_id in target.items():
            crash = self.crashes[fp]
            written, after = RebuildFingerprint, -1
            while events := list(self.session.scalars(
                    select(written.event_id)
                    .where(self._rows(), written.fingerprint == fp, written.event_id > after)
                    .order_by(written.event_id).limit(CHUNK))):
                after = events[-1]
                changed = self.session.execute(
                    update(Event)
                    .where(Event.id.in_(events))
                    .where((Event.signature_id != signature_id) | (Event.fingerprint != fp)
                           | (Event.signature_id.is_(None)) | (Event.fingerprint.is_(None))
                           | (Event.algorithm_version.is_(None))
                           | (Event.algorithm_version != crash.algorithm_version))
                    .values(signature_id=signature_id, fingerprint=fp, fingerprint_error=None,
                            algorithm_version=crash.algorithm_version, title=crash.title[:512])
                ).rowcount
                self.summary.refingerprinted += changed
                self.listeners.move_events(self.session, events, signature_id)

    def _fold(self, loser_id: int, survivor_id: int) -> None:
        """A merged-away old signature: alias rule, and its triage carried to the survivor."""
        loser = self.session.get_one(Signature, loser_id)
        survivor = self.session.get_one(Signature, survivor_id)
        if loser.id == survivor.id:
            return
        loser.merged_into_id = survivor.id
        set_alias(self.session, loser.fingerprint, survivor.id, REBUILD, "rebuild")
        statuses = {loser.status, survivor.status}
        survivor.status = next(s for s in STATUS_PRECEDENCE if s in statuses)
        survivor.owner = survivor.owner or loser.owner
        if loser.title_by_hand and not survivor.title_by_hand:  # a triager's title names the bug
            survivor.title, survivor.title_by_hand = loser.title, True
        carried = ""
        for outcome in self.listeners.fold(self.session, loser.id, survivor.id):
            carried += outcome.done
            if outcome.note:
                self.summary.notes.append(outcome.note)
        self.summary.merged.append(f"{loser.id} -> {survivor.id} ({survivor.fingerprint})"
                                   + (f": {carried}" if carried else ""))

    def _first_seen(self, signature_ids: set[int]) -> None:
        rows = self.session.execute(
            select(Event.signature_id, func.min(Event.crashed_at))
            .where(Event.signature_id.in_(signature_ids)).group_by(Event.signature_id)
        ).all()
        for sid, first in rows:
            signature = self.session.get_one(Signature, sid)
            if first < signature.first_seen:
                signature.first_seen = first
        self.session.flush()


def rebuild(
    database: Database,
    listeners: SignatureListeners,
    progress: Callable[[int], None] = lambda _: None,
    dry_run: bool = False,
    engine: Engine = identify,
    events_of: Select | None = None,
    chunk: int = CHUNK,
) -> RebuildSummary:
    """Re-fingerprint every event (those `events_of` selects, if given: the events whose
    symbols arrived) with `engine` (the wired one: symbolicating first); the changes commit
    together (or not at all: dry_run). The listeners carry other domains' rows (captures, Jira
    links, RCAs) in the same transaction. A rebuild of every event that stopped (killed, an
    error) is continued by the next one: `progress` is first told the events it had done.
    `chunk`: events fingerprinted a transaction."""
    summary = RebuildSummary()
    job = Rebuild(summary, listeners, dry_run, engine, events_of)
    try:
        with database.session() as session:
            progress(job.resume(session))
        while True:  # a transaction per chunk: on SQLite a transaction holds the write lock
            with database.session() as session:
                if not job.fingerprint_history(session, progress, chunk):
                    break
        with database.session() as session:
            job.apply_in(session, progress)
            if dry_run:
                session.rollback()
    finally:
        if job.scope != WHOLE_HISTORY:  # a dry run's or some events' rows: nothing to continue
            with database.session() as session:
                job.forget(session)
    return summary


def event_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Event)) or 0
