"""Epidemiology over the registry's data: live analyses, the stored refresh, suspects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from registry.db import utcnow
from registry.ingest.models import Event
from registry.signatures.models import Signature
from registry.signatures.service import summary

from .analysis import (
    HostState,
    analyse_signature,
    crash_baseline,
    exposure_by_day,
    inventory_changes,
    make_context,
)
from .findings import Baseline
from .models import EpidemiologyFinding, EpidemiologySuspectHost, EpidemiologyVerdict
from .onset import InventoryChange
from .queries import (
    EventFilter,
    fleet_states,
    host_signature_counts,
    hosts_per_physical,
    joint_counts,
    observation_window,
    signature_ids,
    signature_sample,
    uptime_outside,
    value_counts,
)
from .suspects import suspect_hosts

SUSPECTS_STORED = 50


@dataclass(frozen=True)
class Fleet:
    """What every signature's analysis shares: computed once per request or refresh."""

    window: tuple[date, date]
    states: list[HostState]
    exposure: dict[date, float] | None
    changes: list[InventoryChange]
    crashes: Baseline


def load_fleet(session: Session) -> Fleet | None:
    window = observation_window(session)
    if window is None:
        return None
    states = fleet_states(session)
    everything = EventFilter.everything()
    counts = value_counts(session, everything)
    total = session.scalar(select(func.count()).select_from(Event)) or 0
    return Fleet(
        window=window,
        states=states,
        exposure=exposure_by_day(states, *window) if states else None,
        changes=inventory_changes(states),
        crashes=crash_baseline(counts, total, joint_counts(session, everything)),
    )


def analyse(session: Session, signature: Signature, fleet: Fleet | None) -> dict[str, Any]:
    """The contract's epidemiology body for one signature."""
    ids = signature_ids(session, signature.id)
    sample = signature_sample(session, ids)
    head = {"signature": summary(session, signature)}
    if fleet is None or sample.events == 0:
        return head | {
            "events": 0,
            "hosts": 0,
            "verdict": "inconclusive",
            "findings": [],
            "onset": {"first_seen": None, "change_point": None},
        }
    context = make_context(
        sample,
        fleet.states,
        fleet.crashes,
        fleet.window,
        fleet.exposure,
        fleet.changes,
        uptime_outside(session, EventFilter.others(ids)),
    )
    return head | analyse_signature(sample, context)


def signature_epidemiology(session: Session, signature: Signature) -> dict[str, Any]:
    return analyse(session, signature, load_fleet(session))


def suspects(session: Session, limit: int = 20) -> list[dict[str, Any]]:
    return suspect_hosts(host_signature_counts(session), hosts_per_physical(session), limit)


def _day(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value + "T00:00:00+00:00") if value else None


def store(session: Session, signature_id: int, body: dict[str, Any], when: datetime) -> None:
    """Replace one signature's stored verdict and findings."""
    session.execute(delete(EpidemiologyFinding).where(EpidemiologyFinding.signature_id == signature_id))
    session.execute(delete(EpidemiologyVerdict).where(EpidemiologyVerdict.signature_id == signature_id))
    findings = body.get("findings", [])
    top = findings[0] if findings else {}
    detail = body.get("verdict_detail", {})
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
        )
    )
    views = [(body.get("baseline", "crashes"), findings)] + [
        (name, view["findings"]) for name, view in body.get("views", {}).items()
    ]
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
                    lift=finding["lift"],
                    p_value=finding["p_value"],
                    log10_p=finding["log10_p"],
                    events=finding["events"],
                    explained_by=finding.get("explained_by"),
                    computed_at=when,
                )
            )


def store_suspects(session: Session, ranked: list[dict[str, Any]], when: datetime) -> None:
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


@dataclass
class RefreshOutcome:
    signatures: int = 0
    suspects: int = 0
    verdicts: dict[str, int] | None = None


def refresh(session: Session, progress: Callable[[int, int], None] | None = None) -> RefreshOutcome:
    """Recompute and store every signature's epidemiology and the fleet-wide suspects."""
    when = utcnow()
    outcome = RefreshOutcome(verdicts={})
    fleet = load_fleet(session)
    ids = session.scalars(
        select(Signature.id).where(Signature.merged_into_id.is_(None)).order_by(Signature.id)
    ).all()
    for done, signature_id in enumerate(ids, start=1):
        body = analyse(session, session.get_one(Signature, signature_id), fleet)
        store(session, signature_id, body, when)
        outcome.signatures += 1
        outcome.verdicts[body["verdict"]] = outcome.verdicts.get(body["verdict"], 0) + 1
        if progress:
            progress(done, len(ids))
    ranked = suspects(session, SUSPECTS_STORED)
    store_suspects(session, ranked, when)
    outcome.suspects = len(ranked)
    return outcome
