"""The capture budget of reports without a signature, in the database.

A report the engine found no crash in, or failed on, is decided by `decide_without_signature`
inside the ingest transaction: it claims a slot of its host's budget (`host:<id>`), then one of
the fleet's (`fleet`), each as a signature's capture slot is claimed (decide.claim_free_slot:
an insert or a compare-and-swap the database's row locks decide), in that order on every
report, so two reports never wait on each other crosswise. A host slot won with no fleet slot
left is given back in the same transaction (the row restored as it was seen, under the lock the
claim took), so a `skip` holds nothing. Captures settle these slots as they do a signature's
(registry.capture.service.settle_slot): completed keeps one held for the window, failed frees it.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from registry.capture.decide import claim_free_slot
from registry.capture.models import NoSignatureSlot
from registry.capture.policy import (
    FLEET_BUDGET,
    CaptureDecision,
    Limits,
    NoSignatureBudget,
    Slot,
    claimable_slots,
    host_budget,
    no_signature_decision,
    offline_no_signature,
)
from registry.config import Settings
from registry.core.hosts import Host
from registry.db import utcnow

SLOTS = NoSignatureSlot.__table__.c


def budget_of(settings: Settings) -> NoSignatureBudget:
    return NoSignatureBudget(
        settings.no_signature_full_per_host,
        settings.no_signature_full_per_fleet,
        timedelta(days=settings.capture_window_days),
    )


def read_budget_slots(session: Session, budgets: list[str]) -> dict[str, list[Slot]]:
    """The slot rows of these budgets, by budget (every one named, empty when unused)."""
    rows = session.execute(
        select(SLOTS.budget, SLOTS.slot, SLOTS.state, SLOTS.since, SLOTS.event_id).where(
            SLOTS.budget.in_(budgets)
        )
    )
    slots: dict[str, list[Slot]] = {budget: [] for budget in budgets}
    for row in rows:
        slots[row.budget].append(Slot(row.slot, row.state, row.since, row.event_id))
    return slots


def decide_without_signature(
    session: Session, settings: Settings, cause: str, event_id: int, host_id: int
) -> CaptureDecision:
    """The answer of a new event without a signature: full when a slot of its host's budget and
    one of the fleet's are won, else skip; claimed for the event inside the caller's transaction."""
    budget = budget_of(settings)
    host = host_budget(host_id)
    seen = read_budget_slots(session, [host, FLEET_BUDGET])
    now = utcnow()
    since = now - budget.window
    host_free = claimable_slots(seen[host], budget.limits(host), now, since)
    if host_free and not claimable_slots(seen[FLEET_BUDGET], budget.limits(FLEET_BUDGET), now, since):
        # the fleet's slots, as read, are all held: no claim of them can win, so none is made
        # (nor the host's, which would only be given back)
        return no_signature_decision(cause, budget, host_free[0], None)
    host_won = claim_free_slot(
        session, NoSignatureSlot, {"budget": host}, event_id, budget.limits(host), since, seen[host]
    )
    fleet_won = None
    if host_won is not None:
        fleet_won = claim_free_slot(
            session, NoSignatureSlot, {"budget": FLEET_BUDGET}, event_id, budget.limits(FLEET_BUDGET), since,
            seen[FLEET_BUDGET],
        )
        if fleet_won is None:
            give_back(session, host, *host_won)
    return no_signature_decision(
        cause, budget, host_won[0] if host_won else None, fleet_won[0] if fleet_won else None
    )


def give_back(session: Session, budget: str, number: int, replaced: Slot | None) -> None:
    """Undo this transaction's claim of a slot: the row as it was seen, or no row."""
    where = (SLOTS.budget == budget, SLOTS.slot == number)
    if replaced is None:
        session.execute(delete(NoSignatureSlot).where(*where).execution_options(synchronize_session=False))
        return
    session.execute(
        update(NoSignatureSlot)
        .where(*where)
        .values(event_id=replaced.event_id, state=replaced.state, since=replaced.since)
        .execution_options(synchronize_session=False)
    )


def offline_answer(session: Session, settings: Settings, hostname: str | None) -> CaptureDecision:
    """The policy bundle's answer for a report with no recognisable crash: as if slots were
    granted exactly when free: the fleet's, and the host's when the bundle is made for one (a
    host the registry has not seen yet holds none)."""
    budget = budget_of(settings)
    host_id = session.scalar(select(Host.id).where(Host.hostname == hostname)) if hostname else None
    host = host_budget(host_id) if host_id is not None else None
    slots = read_budget_slots(session, [FLEET_BUDGET, *([host] if host else [])])
    now = utcnow()

    def free(name: str | None, limits: Limits) -> int:
        return len(claimable_slots(slots.get(name, []) if name else [], limits, now, now - budget.window))

    free_host = free(host, budget.limits(host or "host")) if hostname else None
    return offline_no_signature(budget, free_host, free(FLEET_BUDGET, budget.limits(FLEET_BUDGET)))
