"""Epidemiology over the registry's data: live analyses, the stored refresh, suspects."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from registry.core.events import Event
from registry.core.signatures import Signature
from registry.db import utcnow
from registry.signatures.service import summary

from .analysis import (
    Context,
    Controls,
    SignatureSample,
    analyse_signature,
    fleet_view,
    signature_window,
)
from .dialect import dialect_of
from .findings import Baseline
from .fleet_sql import current_inventory, rollout_steps
from .models import (
    EpidemiologyComponent,
    EpidemiologyFinding,
    EpidemiologySample,
    EpidemiologySetting,
    EpidemiologySuspectHost,
    EpidemiologyVerdict,
)
from .narrative import FLEET, Population
from .process import ProcessCrash, process_findings
from .queries import (
    STORED_SAMPLE_EVENTS,
    case_control_baseline,
    host_signature_counts,
    hosts_per_physical,
    moves_queued,
    observation_window,
    program_crashes,
    program_hosts,
    signature_ids,
    signature_programs,
    signature_sample,
    store_sample,
    uptime_hours,
)
from .shapes import EpidemiologyBody, SuspectHost, TimeFinding
from .suspects import suspect_hosts
from .uptime import histogram_outside_counts

SUSPECTS_STORED = 50
UPTIME_TTL = timedelta(minutes=5)
# A stored sample covers the events received at least this long before the refresh: a DPU's
# report fingerprinted later by the host's own (minutes after) then lands after its watermark.
SAMPLE_SETTLE = timedelta(minutes=15)
# Per engine (one per process in production, one per test database in tests), never per URL: a
# database emptied and refilled under the same URL must not be answered from the old histogram.
_UPTIMES: weakref.WeakKeyDictionary[Engine, tuple[float, dict[int, int]]] = weakref.WeakKeyDictionary()


class Fleet:
    """What every signature's analysis shares, computed once per request or refresh; the
    case-control baselines (scans of the events) and the uptime histogram only when needed,
    each once per window, population and uptime bound."""

    def __init__(self, session: Session, window: tuple[date, date], program_label: str | None = None) -> None:
        self.session = session
        self.window = window
        self.program_label = program_label
        self.inventory = current_inventory(session)
        self.exposure = self.inventory.exposure(*window)
        self.changes = rollout_steps(session)
        self.inventory_since = self.inventory.since
        self._controls: dict[tuple, Baseline | None] = {}
        self._uptime_hours: dict[int, int] | None = None

    def population(self, signature: Signature, ids: list[int]) -> tuple[Population, list[int] | None]:
        """Who could have had the crash: the fleet for a kernel crash; for a userspace one, the
        hosts running the program (None: the whole fleet)."""
        programs = signature_programs(self.session, ids) if signature.kind == "userspace" else []
        if not programs:
            return FLEET, None
        hosts, source = program_hosts(self.session, programs, self.program_label)
        name = ", ".join(sorted({p.rsplit("/", 1)[-1] for p in programs}))
        return Population("program", name, len(hosts), source), hosts

    def process_findings(self, ids: list[int]) -> list[TimeFinding]:
        """A userspace signature's processes (release, age, start week) against the
        program's other crashes of the window."""
        programs = signature_programs(self.session, ids)
        start = datetime.combine(self.window[0], datetime.min.time(), UTC)
        end = datetime.combine(self.window[1] + timedelta(days=1), datetime.min.time(), UTC)
        own: list[ProcessCrash] = []
        others: list[ProcessCrash] = []
        for signature_id, *process in program_crashes(self.session, programs, start, end):
            (own if signature_id in ids else others).append(ProcessCrash(*process))
        return process_findings(own, others)

    def view(self, sample: SignatureSample, population: list[int] | None) -> Baseline | None:
        """The population as it was over the signature's days, if the inventory covers it."""
        only = {
            name: [value for (attribute, value) in sample.counts if attribute == name]
            for name in ("hostname", "physical_host", "labels")
        }
        return fleet_view(sample, self.inventory.baseline(*signature_window(sample), only, population))

    def case_control(self, population: list[int] | None) -> Callable[[Controls], Baseline | None]:
        def baseline(controls: Controls) -> Baseline | None:
            key = (controls, tuple(population) if population is not None else None)
            if key not in self._controls:
                self._controls[key] = case_control_baseline(
                    self.session, controls.start, controls.end, controls.min_uptime_s, population
                )
            return self._controls[key]

        return baseline

    def uptime_hours(self) -> dict[int, int]:
        """All crashes' uptimes (hourly histogram): fleet-wide and slow to move, so shared by
        the requests of this process for UPTIME_TTL."""
        if self._uptime_hours is None:
            engine = self.session.get_bind().engine
            cached = _UPTIMES.get(engine)
            if cached is None or cached[0] < time.monotonic():
                cached = (time.monotonic() + UPTIME_TTL.total_seconds(), uptime_hours(self.session))
                _UPTIMES[engine] = cached
            self._uptime_hours = cached[1]
        return self._uptime_hours


def tune(session: Session) -> None:
    """Settings for analytic queries (the dialect's `analytic_settings`), transaction-local."""
    for setting in dialect_of(session).analytic_settings:
        session.execute(text(setting))


PROGRAM_LABEL = "program_label"


def stored_program_label(session: Session) -> str | None:
    """The program label stored in the database (`crashreg epidemiology program-label`)."""
    setting = session.get(EpidemiologySetting, PROGRAM_LABEL)
    return setting.value if setting is not None else None


def store_program_label(session: Session, label: str | None) -> None:
    """Store the program label every process on this database then analyses with (None: none)."""
    session.execute(delete(EpidemiologySetting).where(EpidemiologySetting.name == PROGRAM_LABEL))
    if label:
        session.add(EpidemiologySetting(name=PROGRAM_LABEL, value=label, updated_at=utcnow()))
    session.flush()


def load_fleet(session: Session, program_label: str | None = None) -> Fleet | None:
    """`program_label`: the inventory label whose value names the program a host runs (the
    setting CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL), else the one stored in the database."""
    tune(session)
    window = observation_window(session)
    if window is None:
        return None
    return Fleet(session, window, program_label or stored_program_label(session))


def analyse(
    session: Session, signature: Signature, fleet: Fleet | None, crash_view: bool = True
) -> EpidemiologyBody:
    """The contract's epidemiology body for one signature. Without `crash_view` the
    case-control baseline (a scan of the window's events) is computed only when the analysis
    needs it: no inventory to compare with, or values that changed since the inventory began."""
    ids = signature_ids(session, signature.id)
    sample = signature_sample(session, ids)
    described = summary(session, signature)
    if fleet is None or sample.events == 0:
        return {
            "signature": described,
            "events": 0,
            "hosts": 0,
            "verdict": "inconclusive",
            "findings": [],
            "components": [],
            "statements": ["no events yet"],
            "onset": {"first_seen": None, "change_point": None},
        }
    population, hosts = fleet.population(signature, ids)
    context = Context(
        window_start=fleet.window[0],
        window_end=fleet.window[1],
        fleet=fleet.view(sample, hosts),
        case_control=fleet.case_control(hosts),
        exposure=fleet.exposure,
        changes=fleet.changes,
        uptimes=histogram_outside_counts(fleet.uptime_hours(), sample.uptimes_s),
        inventory_since=fleet.inventory_since,
        population=population,
        crash_view=crash_view,
    )
    body: EpidemiologyBody = {"signature": described, **analyse_signature(sample, context)}
    if population.kind == "program":
        processes = fleet.process_findings(ids)
        body["time_findings"] = [*body.get("time_findings", []), *processes]
        body["statements"] = [*body.get("statements", []), *(f["statement"] for f in processes)]
    return body


def signature_epidemiology(
    session: Session, signature: Signature, crash_view: bool = False, program_label: str | None = None
) -> EpidemiologyBody:
    """One signature, now (the case-control view, a scan, only when asked for or needed)."""
    return analyse(session, signature, load_fleet(session, program_label), crash_view)


def suspects(session: Session, limit: int = 20) -> list[SuspectHost]:
    return suspect_hosts(host_signature_counts(session), hosts_per_physical(session), limit)


def _day(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value + "T00:00:00+00:00") if value else None


def store(session: Session, signature_id: int, body: EpidemiologyBody, when: datetime) -> None:
    """Replace one signature's stored verdict and findings."""
    for table in (EpidemiologyFinding, EpidemiologyComponent, EpidemiologyVerdict):
        session.execute(delete(table).where(table.signature_id == signature_id))
    findings = body.get("findings", [])
    components = body.get("components", [])
    detail = body.get("verdict_detail", {})
    # the headline: the finding that carries the verdict, else (spread, inconclusive) the strongest
    top = detail.get("finding") or (findings[0] if findings else {})
    onset = body.get("onset", {})
    session.add(
        EpidemiologyVerdict(
            signature_id=signature_id,
            verdict=body["verdict"],
            reason=detail.get("reason", ""),
            baseline=body.get("baseline", "crashes"),
            events=body["events"],
            hosts=body["hosts"],
            top_attribute=top.get("attribute"),
            top_value=top.get("value"),
            top_in_signature=top.get("in_signature"),
            top_overall=top.get("overall"),
            top_lift=top.get("lift"),
            top_p_value=top.get("p_value"),
            more_events_needed=detail.get("more_events_needed"),
            first_seen=_day(onset.get("first_seen")),
            change_point=_day(onset.get("change_point")),
            onset_shape=onset.get("shape"),
            uptime_statement=(body.get("uptime") or {}).get("statement"),
            analysis=body,
            computed_at=when,
            concentrated=sum(1 for c in components if c["kind"] == "concentrated"),
            summary="\n".join(body.get("statements", [])),
        )
    )
    for rank, component in enumerate(components, start=1):
        uptime = component.get("uptime") or {}
        session.add(
            EpidemiologyComponent(
                signature_id=signature_id,
                rank=rank,
                kind=component["kind"],
                attribute=component.get("attribute"),
                value=(component.get("value") or "")[:255] or None,
                events=component["events"],
                share=component.get("share", round(component["events"] / max(body["events"], 1), 4)),
                expected_events=component.get("expected_events"),
                hosts=component["hosts"],
                first_seen=_day(component.get("first_seen")),
                since=_day(component.get("since")),
                uptime_median_days=uptime.get("median_days"),
                uptime_statement=uptime.get("statement"),
                verdict=component.get("verdict"),
                statement=component["statement"],
                computed_at=when,
            )
        )
    views = [(body.get("baseline", "crashes"), findings), ("timing", body.get("time_findings", []))]
    views += [(name, view["findings"]) for name, view in body.get("views", {}).items()]
    for baseline, rows in views:
        for rank, finding in enumerate(rows, start=1):
            session.add(
                EpidemiologyFinding(
                    signature_id=signature_id,
                    baseline=baseline,
                    rank=rank,
                    attribute=finding["attribute"],
                    value=finding["value"][:255],
                    in_signature=finding["in_signature"],
                    overall=finding["overall"],
                    lift=finding["lift"] or 0.0,
                    p_value=finding["p_value"],
                    log10_p=finding["log10_p"],
                    events=finding["events"],
                    explained_by=finding.get("explained_by"),
                    computed_at=when,
                )
            )


def store_suspects(session: Session, ranked: list[SuspectHost], when: datetime) -> None:
    session.execute(delete(EpidemiologySuspectHost))
    for rank, suspect in enumerate(ranked, start=1):
        session.add(
            EpidemiologySuspectHost(
                rank=rank,
                physical_host=suspect["physical_host"],
                crashes=suspect["crashes"],
                signatures=suspect["signatures"],
                expected_signatures=suspect["expected_signatures"],
                p_value=suspect["p_value"],
                log10_p=suspect["log10_p"],
                evidence=suspect["evidence"],
                detail=suspect,
                computed_at=when,
            )
        )


def store_samples(
    session: Session, when: datetime, settle: timedelta = SAMPLE_SETTLE, least: int = STORED_SAMPLE_EVENTS
) -> list[int]:
    """PostgreSQL: store the sample of every signature with at least `least` events (its
    events received before `when - settle`; see `queries.stored_sample`); drop the others'.
    Returns the signatures stored."""
    if not dialect_of(session).stored_samples:
        return []
    watermark = session.scalar(
        select(Event.id).where(Event.received_at < when - settle).order_by(Event.id.desc()).limit(1)
    )
    canonical = func.coalesce(Signature.merged_into_id, Signature.id)
    large = (
        []
        if watermark is None
        else session.scalars(
            select(canonical)
            .join(Event, Event.signature_id == Signature.id)
            .group_by(canonical)
            .having(func.count() >= least)
            .order_by(canonical)
        ).all()
    )
    members = {sid: signature_ids(session, sid) for sid in large
               if session.get_one(Signature, sid).merged_into_id is None}
    stored = [sid for sid, ids in members.items() if not moves_queued(session, ids, watermark)]
    for sid in stored:
        store_sample(session, members[sid], watermark, when)
    session.execute(delete(EpidemiologySample).where(EpidemiologySample.signature_id.not_in(stored)))
    # statistics of what was just written: a request joins a signature's groups with the hosts
    # (planned on a table believed empty, that is 100,000 index probes instead of one hash)
    session.execute(text("ANALYZE epidemiology_sample_groups, epidemiology_sample_counts"))
    return stored


@dataclass
class RefreshOutcome:
    signatures: int = 0
    suspects: int = 0
    verdicts: dict[str, int] | None = None


def refresh(
    session: Session,
    progress: Callable[[int, int], None] | None = None,
    program_label: str | None = None,
    reads: Session | None = None,
) -> RefreshOutcome:
    """Recompute and store every signature's epidemiology and the fleet-wide suspects. The
    analysis reads `reads` (the read replica's session, when there is one); the results are
    written through `session`."""
    reads = reads or session
    when = utcnow()
    outcome = RefreshOutcome(verdicts={})
    fleet = load_fleet(reads, program_label)
    ids = reads.scalars(
        select(Signature.id).where(Signature.merged_into_id.is_(None)).order_by(Signature.id)
    ).all()
    for done, signature_id in enumerate(ids, start=1):
        body = analyse(reads, reads.get_one(Signature, signature_id), fleet)
        store(session, signature_id, body, when)
        outcome.signatures += 1
        outcome.verdicts[body["verdict"]] = outcome.verdicts.get(body["verdict"], 0) + 1
        if progress:
            progress(done, len(ids))
    ranked = suspects(reads, SUSPECTS_STORED)
    store_suspects(session, ranked, when)
    outcome.suspects = len(ranked)
    store_samples(session, when)
    return outcome
