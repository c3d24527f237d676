"""Proposing and reviewing RCAs: the lifecycle rules, the evidence checks' facts, the outbox.

proposed -> confirmed | rejected, by a human reviewer who is not the author. Confirming an
RCA supersedes the signature's previously confirmed one (kept, status `superseded`); the
database's partial unique index makes "one confirmed RCA per signature" hold under races.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NotRequired, TypedDict

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.auth.models import TokenHolder
from registry.capture.models import Capture
from registry.core.events import Event, Report
from registry.core.signatures import Signature
from registry.core.wiring import Carried
from registry.db import utcnow
from registry.errors import ApiError
from registry.outbox import publish
from registry.rca.checks import (
    CheckResultView,
    EventFacts,
    KernelCrashes,
    RcaClaims,
    SignatureFacts,
    passed,
    run_checks,
)
from registry.rca.models import Rca, RcaReview
from registry.signatures.identify import identify
from registry.signatures.service import canonical
from registry.signatures.userspace import frame_called, read_frames
from registry.storage.service import lock_dumps

RECENT_EVENTS_FOR_FRAMES = 50
_FRAME_DECORATION = re.compile(r"^\?\s*|\+0x[0-9a-f]+(/0x[0-9a-f]+)?.*$|\s*\[.*\]$")


def member_signature_ids(session: Session, signature: Signature) -> list[int]:
    """The signature and the signatures merged into it, and into those: their events and RCAs
    are its own."""
    members, merged = [signature.id], [signature.id]
    while merged:
        into = select(Signature.id).where(Signature.merged_into_id.in_(merged))
        merged = [found for found in session.scalars(into) if found not in members]
        members += merged
    return members


def frame_function(frame: Any) -> str | None:
    """`ext4_fill_super+0x1a/0x30 [ext4]` or {"function": ...} -> `ext4_fill_super`."""
    name = frame.get("function") if isinstance(frame, dict) else frame
    if not isinstance(name, str) or not name.strip():
        return None
    return _FRAME_DECORATION.sub("", name.strip()) or None


def functions_of(frames: Iterable[Any]) -> set[str]:
    return {name for name in map(frame_function, frames) if name}


def report_frames(report: Report) -> list[str]:
    """A report's frames: a core reader's every frame (a frame without a function as
    module+offset, the function read from the red zone among them), else the stack it sent,
    else every frame the fingerprint engine read in its log's trace (the frames it hashed
    first, then the ones it passed over or read beyond them: an RCA may cite any)."""
    stack = (report.payload or {}).get("stack") or {}
    if report.source == "userspace" and isinstance(stack, dict):
        return [frame_called(frame) for frame in read_frames(stack)]
    frames = [f for f in (frame_function(x) for x in stack.get("frames") or []) if f]
    if frames:
        return frames
    crash = identify(report.console_log, None) if report.console_log else None
    if crash is None:
        return []
    read = [*crash.frames, *(frame["function"] for frame in crash.explanation.get("frames") or [])]
    return list(dict.fromkeys(f for f in map(frame_function, read) if f))


def event_frames(session: Session, event_ids: Iterable[int]) -> dict[int, list[str]]:
    frames: dict[int, list[str]] = {}
    ids = list(event_ids)
    if not ids:
        return frames
    for report in session.scalars(select(Report).where(Report.event_id.in_(ids)).order_by(Report.id)):
        if not frames.get(report.event_id):
            frames[report.event_id] = report_frames(report)
    return frames


def load_facts(session: Session, signature: Signature, evidence: list[dict[str, Any]]) -> SignatureFacts:
    """What the checks compare an RCA's evidence with, read from the registry."""
    members = member_signature_ids(session, signature)
    cited_events = {int(i["event_id"]) for i in evidence if i["type"] == "event"}
    cited_captures = {int(i["capture_id"]) for i in evidence if i["type"] == "capture"}
    recent = session.scalars(
        select(Event.id)
        .where(Event.signature_id.in_(members))
        .order_by(Event.id.desc())
        .limit(RECENT_EVENTS_FOR_FRAMES)
    ).all()
    frames = event_frames(session, cited_events | set(recent))

    def owner(signature_id: int | None) -> str | None:
        if signature_id is None:
            return None
        return str(signature.id) if signature_id in members else str(signature_id)

    events = {
        str(e.id): EventFacts(
            str(e.id), owner(e.signature_id), e.kernel_version, frozenset(frames.get(e.id, []))
        )
        for e in session.scalars(select(Event).where(Event.id.in_(cited_events)))
    }
    captures = {
        str(capture_id): owner(signature_id)
        for capture_id, signature_id in session.execute(
            select(Capture.id, func.coalesce(Event.signature_id, Capture.signature_id))
            .join(Event, Event.id == Capture.event_id)
            .where(Capture.id.in_(cited_captures))
        )
    }
    kernels = [
        KernelCrashes(version, int(count), str(last_id), last_at.isoformat())
        for version, count, last_id, last_at in session.execute(
            select(Event.kernel_version, func.count(), func.max(Event.id), func.max(Event.crashed_at))
            .where(Event.signature_id.in_(members), Event.kernel_version.is_not(None))
            .group_by(Event.kernel_version)
            .order_by(Event.kernel_version)
        )
    ]
    known = functions_of(signature.frames or []) | ({signature.function} if signature.function else set())
    for event_id in recent:
        known |= set(frames.get(event_id, []))
    return SignatureFacts(str(signature.id), frozenset(known), kernels, events, captures)


def rca_input(rca: Rca) -> RcaClaims:
    """The plain data the checks read."""
    return {
        "author_kind": rca.author_kind,
        "evidence": list(rca.evidence or []),
        "fix": {"kernel_version": rca.fixed_in_kernel} if rca.fixed_in_kernel else {},
    }


def run_rca_checks(session: Session, signature: Signature, rca: Rca) -> bool:
    """Check the RCA against the registry now; store the results; True when newly flagged."""
    was_passing = rca.checks_passed is not False
    results = run_checks(rca_input(rca), load_facts(session, signature, list(rca.evidence or [])))
    rca.checks = [r.as_dict() for r in results]
    rca.checks_passed = passed(results)
    rca.checked_at = utcnow()
    return was_passing and not rca.checks_passed


def failed_checks(rca: Rca) -> list[CheckResultView]:
    return [c for c in rca.checks or [] if c["status"] == "fail"]


class RcaMessage(TypedDict, total=False):
    """The payload of an `rca.confirmed` or `rca.flagged` outbox message, which the Jira sync
    turns into a comment. Read with defaults: a pending message may be an older release's."""

    rca_id: int
    summary: str
    author: str
    author_kind: str
    checks_passed: bool
    url: str
    # rca.confirmed
    reviewer: str
    note: str | None
    fix_commit: str | None
    fixed_in_kernel: str | None
    superseded: list[int]
    # rca.flagged
    failed_checks: list[CheckResultView]


def publish_rca(session: Session, topic: str, rca: Rca, public_url: str, details: RcaMessage) -> None:
    """An outbox message about an RCA: what the Jira sync needs to comment on the issue."""
    message: RcaMessage = {
        "rca_id": rca.id,
        "summary": rca.summary,
        "author": rca.author,
        "author_kind": rca.author_kind,
        "checks_passed": rca.checks_passed,
        "url": f"{public_url}/signatures/{rca.signature_id}#rca-{rca.id}",
        **details,  # the topic's own keys
    }
    publish(session, topic, rca.signature_id, **message)


def publish_flagged(session: Session, rca: Rca, public_url: str) -> None:
    publish_rca(session, "rca.flagged", rca, public_url, {"failed_checks": failed_checks(rca)})


class AgentView(TypedDict):
    name: str
    model: str


class FixView(TypedDict, total=False):
    """Only the parts the RCA names."""

    commit: str
    kernel_version: str
    url: str


class RcaProposal(TypedDict):
    """POST /api/v1/signatures/{key}/rcas, as loaded."""

    summary: str
    body: str
    author: str
    author_kind: str
    agent: NotRequired[AgentView]  # an AI-written RCA's
    confidence: NotRequired[float | None]
    evidence: list[dict[str, Any]]  # items of EVIDENCE_TYPES, each with its own fields
    fix: NotRequired[FixView]


class ReviewRequest(TypedDict):
    """POST /api/v1/rcas/{id}/review, as loaded."""

    verdict: str
    note: NotRequired[str | None]
    override_checks: bool


def propose(
    session: Session, signature: Signature, data: RcaProposal, token: TokenHolder, public_url: str
) -> Rca:
    if token.kind == "agent" and data["author_kind"] != "ai":
        raise ApiError(
            400,
            "invalid",
            "an agent token posts AI-written RCAs only",
            fields={"author_kind": ['must be "ai" when posted with an agent token']},
        )
    signature = canonical(session, signature)  # an RCA of a merged signature is its survivor's
    unversioned = [str(at) for at, item in enumerate(data["evidence"])
                   if item["type"] == "source" and not item.get("kernel_version")]
    if unversioned and signature.kind != "userspace":
        raise ApiError(400, "invalid", "a kernel signature's source lines name the kernel version they "
                       "are read at", fields={"evidence": {at: {"kernel_version": ["required for a kernel "
                                                                                "signature"]}
                                                           for at in unversioned}})
    hold_cited_dumps(session, data["evidence"])
    agent = data.get("agent") or {}
    fix = data.get("fix") or {}
    rca = Rca(
        signature_id=signature.id,
        status="proposed",
        summary=data["summary"],
        body=data["body"],
        author=data["author"],
        author_kind=data["author_kind"],
        agent_name=agent.get("name"),
        agent_model=agent.get("model"),
        confidence=data.get("confidence"),
        evidence=data["evidence"],
        fix_commit=fix.get("commit"),
        fix_url=fix.get("url"),
        fixed_in_kernel=fix.get("kernel_version"),
        token_id=token.id,
        token_name=token.name,
        checks_passed=True,
    )
    run_rca_checks(session, signature, rca)
    session.add(rca)
    session.flush()
    if not rca.checks_passed:
        publish_flagged(session, rca, public_url)
    return rca


def hold_cited_dumps(session: Session, evidence: list[dict[str, Any]]) -> None:
    """An open RCA keeps the dumps it cites from retention. Their rows are locked until this
    RCA commits, so retention's mark either waits and then sees the RCA, or marked them first:
    then the dump is already going and the RCA is refused (409), as a pin is. A deleted dump is
    history and may be cited."""
    captures = {int(item["capture_id"]) for item in evidence if item["type"] == "capture"}
    events = {int(item["event_id"]) for item in evidence if item["type"] == "event"}
    going = sorted(str(dump.capture_id) for dump in lock_dumps(session, captures, events)
                   if dump.state == "deleting")
    if going:
        raise ApiError(
            409,
            "conflict",
            f"the dumps of captures {', '.join(going)} are being deleted by retention: nothing left "
            "for this RCA to keep; propose it again once the gc run is over",
            fields={"evidence": [f"capture {capture}: dump being deleted by retention" for capture in going]},
        )


def refuse_reviewer(rca: Rca, token: TokenHolder) -> None:
    """Agents never review; nobody reviews an RCA they wrote or posted. An AI-written RCA's
    author is its agent, no reviewer: only a human author's name refuses the reviewer of that
    name (an agent naming itself after a reviewer kept that reviewer out)."""
    if token.kind == "agent":
        raise ApiError(
            403,
            "forbidden",
            "agent tokens may propose RCAs but never review them: a human with a triage token reviews",
        )
    reviewer = token.name.casefold()
    wrote = {rca.author.casefold()} if rca.author_kind == "human" else set()
    if token.id == rca.token_id or reviewer in wrote | {rca.token_name.casefold()}:
        raise ApiError(
            403,
            "forbidden",
            f"token {token.name!r} wrote or posted RCA {rca.id}: someone else must review it",
        )


def review(session: Session, rca: Rca, data: ReviewRequest, token: TokenHolder, public_url: str) -> Rca:
    refuse_reviewer(rca, token)
    if rca.status != "proposed":
        raise ApiError(409, "conflict", f"RCA {rca.id} is {rca.status}; only proposed RCAs are reviewed")
    # The bug the RCA is about now: its signature, or the one it was merged into since.
    standing = canonical(session, session.get_one(Signature, rca.signature_id))
    signature = session.scalars(select(Signature).where(Signature.id == standing.id).with_for_update()).one()
    if run_rca_checks(session, signature, rca):
        publish_flagged(session, rca, public_url)
    if data["verdict"] == "confirmed" and not rca.checks_passed and not data["override_checks"]:
        names = ", ".join(c["name"] for c in failed_checks(rca))
        raise ApiError(
            409,
            "checks_failed",
            f"RCA {rca.id} fails evidence checks ({names}); fix the RCA, or confirm with "
            "override_checks and a note saying why the checks are wrong",
            fields={"checks": failed_checks(rca)},
        )
    now = utcnow()
    rca.reviewed_at, rca.reviewed_by, rca.review_note = now, token.name, data.get("note")
    session.add(
        RcaReview(
            rca_id=rca.id,
            verdict=data["verdict"],
            note=data.get("note"),
            reviewer=token.name,
            reviewer_token_id=token.id,
            checks_passed=rca.checks_passed,
        )
    )
    if data["verdict"] == "rejected":
        rca.status = "rejected"
        session.flush()
        return rca
    confirm(session, signature, rca, token, public_url)
    return rca


def confirm(session: Session, signature: Signature, rca: Rca, token: TokenHolder, public_url: str) -> None:
    """`rca` is the bug's one confirmed RCA: any other confirmed one of the signature or of a
    signature merged into it is superseded by it."""
    previous = session.scalars(
        select(Rca).where(Rca.signature_id.in_(member_signature_ids(session, signature)),
                          Rca.status == "confirmed", Rca.id != rca.id)
    ).all()
    for old in previous:
        old.status, old.superseded_by_id, old.superseded_at = "superseded", rca.id, utcnow()
    try:
        session.flush()
        rca.status = "confirmed"
        session.flush()
    except IntegrityError:
        raise ApiError(
            409, "conflict", f"another RCA of signature {signature.id} was confirmed at the same time; retry"
        ) from None
    # The confirmed RCA's fix version is what regression detection compares new crashes with.
    if rca.fixed_in_kernel or signature.fixed_in_kernel in {old.fixed_in_kernel for old in previous}:
        signature.fixed_in_kernel = rca.fixed_in_kernel
    signature.updated_at = utcnow()
    publish_rca(
        session,
        "rca.confirmed",
        rca,
        public_url,
        {
            "reviewer": token.name,
            "note": rca.review_note,
            "fix_commit": rca.fix_commit,
            "fixed_in_kernel": rca.fixed_in_kernel,
            "superseded": [old.id for old in previous],
        },
    )


def reviews_of(session: Session, rca_ids: list[int]) -> dict[int, list[RcaReview]]:
    grouped: dict[int, list[RcaReview]] = {i: [] for i in rca_ids}
    if rca_ids:
        query = select(RcaReview).where(RcaReview.rca_id.in_(rca_ids)).order_by(RcaReview.id)
        for row in session.scalars(query):
            grouped[row.rca_id].append(row)
    return grouped


class ReviewView(TypedDict):
    verdict: str
    note: str | None
    reviewer: str
    checks_passed: bool
    created_at: str


class RcaView(TypedDict):
    """An RCA as the API returns it, with its checks and reviews."""

    id: str
    signature_id: str
    status: str
    summary: str
    body: str
    author: str
    author_kind: str
    agent: AgentView | None
    confidence: float | None
    evidence: list[dict[str, Any]]  # as posted: each item carries its type's fields
    fix: FixView | None
    posted_by: str
    checks_passed: bool
    flagged: bool
    checks: list[CheckResultView]
    checked_at: str
    reviews: list[ReviewView]
    superseded_by: str | None
    superseded_at: str | None
    created_at: str


def rca_dict(rca: Rca, reviews: list[RcaReview]) -> RcaView:
    fix = {
        k: v
        for k, v in {
            "commit": rca.fix_commit,
            "kernel_version": rca.fixed_in_kernel,
            "url": rca.fix_url,
        }.items()
        if v
    }
    return {
        "id": str(rca.id),
        "signature_id": str(rca.signature_id),
        "status": rca.status,
        "summary": rca.summary,
        "body": rca.body,
        "author": rca.author,
        "author_kind": rca.author_kind,
        "agent": {"name": rca.agent_name, "model": rca.agent_model} if rca.agent_name else None,
        "confidence": rca.confidence,
        "evidence": list(rca.evidence or []),
        "fix": fix or None,
        "posted_by": rca.token_name,
        "checks_passed": rca.checks_passed,
        "flagged": not rca.checks_passed,
        "checks": list(rca.checks or []),
        "checked_at": rca.checked_at.isoformat(),
        "reviews": [
            {
                "verdict": r.verdict,
                "note": r.note,
                "reviewer": r.reviewer,
                "checks_passed": r.checks_passed,
                "created_at": r.created_at.isoformat(),
            }
            for r in reviews
        ],
        "superseded_by": str(rca.superseded_by_id) if rca.superseded_by_id else None,
        "superseded_at": rca.superseded_at.isoformat() if rca.superseded_at else None,
        "created_at": rca.created_at.isoformat(),
    }


def signature_rcas(session: Session, signature: Signature) -> list[RcaView]:
    """Every RCA of the signature (and of signatures merged into it), newest first."""
    members = member_signature_ids(session, signature)
    rcas = session.scalars(
        select(Rca).where(Rca.signature_id.in_(members)).order_by(Rca.created_at.desc(), Rca.id.desc())
    ).all()
    reviews = reviews_of(session, [r.id for r in rcas])
    return [rca_dict(r, reviews[r.id]) for r in rcas]


def recheck(session: Session, signature: Signature, public_url: str) -> int:
    """Re-run the checks of open and confirmed RCAs (new crashes can contradict a fix); count flagged."""
    flagged = 0
    members = member_signature_ids(session, signature)
    query = select(Rca).where(
        Rca.signature_id.in_(members), or_(Rca.status == "proposed", Rca.status == "confirmed")
    )
    for rca in session.scalars(query):
        if run_rca_checks(session, signature, rca):
            publish_flagged(session, rca, public_url)
            flagged += 1
    return flagged


def keep_one_confirmed(session: Session, survivor: Signature, signature_ids: Iterable[int]) -> list[int]:
    """Signatures that became one bug (a merge, a rebuild) keep one confirmed RCA: the
    survivor's own, else the one reviewed last; the others are superseded by it (their ids
    returned). Its fix version becomes the survivor's when the survivor has none."""
    confirmed = session.scalars(
        select(Rca).where(Rca.signature_id.in_(list(signature_ids)), Rca.status == "confirmed")
    ).all()
    if not confirmed:
        return []
    standing = max(confirmed, key=lambda r: (r.signature_id == survivor.id, r.reviewed_at or r.created_at,
                                             r.id))
    superseded = [rca for rca in confirmed if rca is not standing]
    for rca in superseded:
        rca.status, rca.superseded_by_id, rca.superseded_at = "superseded", standing.id, utcnow()
    if survivor.fixed_in_kernel is None and standing.fixed_in_kernel:
        survivor.fixed_in_kernel = standing.fixed_in_kernel
    session.flush()
    return [rca.id for rca in superseded]


def settle_merged_rcas(session: Session, merged_id: int, survivor_id: int) -> None:
    """A signature merged by hand: its RCAs stay its own (an unmerge gives them back) and count
    as the survivor's; the bug keeps one confirmed RCA (a superseded one stays so after an unmerge)."""
    survivor = canonical(session, session.get_one(Signature, survivor_id))
    keep_one_confirmed(session, survivor, member_signature_ids(session, survivor))


def carry_rcas(session: Session, loser_id: int, survivor_id: int) -> Carried:
    """A signature merged away in a rebuild: its RCAs move to the survivor, which keeps one
    confirmed RCA (keep_one_confirmed)."""
    survivor = session.get_one(Signature, survivor_id)
    keep_one_confirmed(session, survivor, {loser_id, *member_signature_ids(session, survivor)})
    ids = session.scalars(select(Rca.id).where(Rca.signature_id == loser_id)).all()
    if ids:
        session.execute(update(Rca).where(Rca.id.in_(ids)).values(signature_id=survivor_id))
    return Carried(done=f"{len(ids)} RCA(s) carried" if ids else "")
