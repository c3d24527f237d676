"""Retention as a decision table: plain facts about stored dumps and console logs in, keep or
let go out. No database here (registry.retention.gc reads the facts and acts on the answers).

Per signature the capture policy promised K full dumps (its capture slots); those K exemplars
stay. Any other dump goes once it is older than the dump age. A resolved signature's dumps all
go once the grace after its resolution is over, unless it regresses (status `regressed`: the
ordinary rules apply again). Whatever an engineer pinned or an open RCA cites is never let go.
Console logs follow: beyond the log age only the exemplars' events (and whatever is kept
for a pin, an RCA or a kept dump) keep their whole log; the others are trimmed to the crash
report (registry.retention.trim), the event and its signature stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

KEEP, DELETE, TRIM = "keep", "delete", "trim"
RESOLVED = "resolved"


@dataclass(frozen=True)
class Ages:
    """How long things stay (Settings: CRASHREG_RETENTION_*)."""

    exemplars: int  # K: the capture policy's full dumps per signature
    dump: timedelta  # a dump that is not an exemplar goes after this long
    resolved_grace: timedelta  # a resolved signature's dumps go this long after the resolution
    log: timedelta  # beyond this, only exemplar events keep their whole console log


@dataclass(frozen=True)
class SignatureState:
    status: str  # new | triaged | resolved | regressed | ignored
    resolved_at: datetime | None


@dataclass(frozen=True)
class Dump:
    """A stored dump object, with what protects it."""

    capture_id: int
    event_id: int
    stored_at: datetime
    holds_slot: bool  # its event holds one of the signature's capture slots
    pinned: bool = False
    cited: bool = False  # an open RCA cites this capture or its event


@dataclass(frozen=True)
class EventLog:
    """An event whose console logs are whole, with what protects them."""

    event_id: int
    received_at: datetime
    holds_slot: bool  # the event holds one of the signature's capture slots
    dump_kept: bool = False  # a dump of this event is kept (for whatever reason)
    cited: bool = False  # an open RCA cites the event or one of its captures


@dataclass(frozen=True)
class DumpFacts:
    dump: Dump
    signature: SignatureState | None
    exemplar: bool
    now: datetime
    ages: Ages


@dataclass(frozen=True)
class LogFacts:
    log: EventLog
    now: datetime
    ages: Ages


F = TypeVar("F")


@dataclass(frozen=True)
class Rule(Generic[F]):
    """One row of a retention table: the first row that applies decides."""

    name: str
    applies: Callable[[F], bool]
    action: str  # keep | delete | trim
    reason: str  # str.format template over the facts (as `f`)


@dataclass(frozen=True)
class Decision:
    action: str
    rule: str
    reason: str

    @property
    def keep(self) -> bool:
        return self.action == KEEP


def _resolved_past_grace(f: DumpFacts) -> bool:
    signature = f.signature
    return (
        signature is not None
        and signature.status == RESOLVED
        and signature.resolved_at is not None
        and f.now >= signature.resolved_at + f.ages.resolved_grace
    )


DUMP_RULES: tuple[Rule[DumpFacts], ...] = (
    Rule("pinned", lambda f: f.dump.pinned, KEEP, "pinned by an engineer"),
    Rule("rca", lambda f: f.dump.cited, KEEP, "cited by an open RCA"),
    Rule(
        "resolved",
        _resolved_past_grace,
        DELETE,
        "signature resolved {f.signature.resolved_at:%Y-%m-%d}; "
        "its {f.ages.resolved_grace.days}-day grace is over",
    ),
    Rule("exemplar", lambda f: f.exemplar, KEEP, "one of the signature's {f.ages.exemplars} exemplar dumps"),
    Rule(
        "expired",
        lambda f: f.now - f.dump.stored_at >= f.ages.dump,
        DELETE,
        "not an exemplar and older than {f.ages.dump.days} days",
    ),
    Rule("recent", lambda f: True, KEEP, "younger than {f.ages.dump.days} days"),
)

LOG_RULES: tuple[Rule[LogFacts], ...] = (
    Rule("dump-kept", lambda f: f.log.dump_kept, KEEP, "a dump of this event is kept"),
    Rule("rca", lambda f: f.log.cited, KEEP, "cited by an open RCA"),
    Rule(
        "exemplar",
        lambda f: f.log.holds_slot,
        KEEP,
        "holds one of the signature's {f.ages.exemplars} capture slots: an exemplar",
    ),
    Rule(
        "recent",
        lambda f: f.now - f.log.received_at < f.ages.log,
        KEEP,
        "received less than {f.ages.log.days} days ago",
    ),
    Rule("trim", lambda f: True, TRIM, "not an exemplar and older than {f.ages.log.days} days"),
)


def decide(rules: Iterable[Rule[F]], facts: F) -> Decision:
    for rule in rules:
        if rule.applies(facts):
            return Decision(rule.action, rule.name, rule.reason.format(f=facts))
    raise AssertionError("every retention table ends with a rule that always applies")


def exemplar_dumps(dumps: Iterable[Dump], k: int) -> frozenset[int]:
    """The K dumps a signature keeps as exemplars: those of events holding its capture slots
    (the dumps the capture policy promised), then the newest; capture ids."""
    ranked = sorted(dumps, key=lambda d: (not d.holds_slot, -d.stored_at.timestamp(), -d.capture_id))
    return frozenset(d.capture_id for d in ranked[:k])


def decide_dumps(
    dumps: Iterable[Dump], signature: SignatureState | None, now: datetime, ages: Ages
) -> dict[int, Decision]:
    """One signature's stored dumps (signature None: dumps of unfingerprinted events, which have
    no exemplars) -> a decision per capture id."""
    dumps = list(dumps)
    chosen = exemplar_dumps(dumps, ages.exemplars) if signature is not None else frozenset()
    return {
        d.capture_id: decide(DUMP_RULES, DumpFacts(d, signature, d.capture_id in chosen, now, ages))
        for d in dumps
    }


def decide_log(log: EventLog, now: datetime, ages: Ages) -> Decision:
    """Keep an event's whole console logs, or trim them. Its exemplars are the events holding
    the signature's capture slots: the crashes the capture policy chose to keep."""
    return decide(LOG_RULES, LogFacts(log, now, ages))
