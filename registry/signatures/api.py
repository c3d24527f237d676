"""Reading and triaging signatures."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, g, jsonify
from marshmallow import Schema, fields, validate
from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.orm import Session

from registry.auth.tokens import human_decision, require_scope
from registry.core.events import Event, event_summary
from registry.core.jira_links import JiraLink
from registry.core.schemas import SignatureSummarySchema
from registry.core.signatures import CAPTURE_POLICIES, SIGNATURE_STATUSES, Signature
from registry.db import utcnow
from registry.errors import ApiError
from registry.ids import ID_MAX
from registry.openapi import documented
from registry.outbox import publish
from registry.requests import WholeNumber, json_body, load, load_query
from registry.signatures.service import SignatureSummary, detail, signature_or_404, stats_subquery, summary
from registry.web import current_db

blueprint = Blueprint("signatures", __name__, url_prefix="/api/v1")

# sort key -> column expression builder over (Signature, stats subquery)
Sorts = dict[str, Callable[[Any], Any]]
SORTS: Sorts = {
    "last_seen": lambda stats: func.coalesce(stats.c.last_seen, Signature.first_seen),
    "first_seen": lambda stats: Signature.first_seen,
    "events": lambda stats: func.coalesce(stats.c.event_count, 0),
    "id": lambda stats: Signature.id,
}


def sort_names(sorts: Sorts) -> list[str]:
    """Each key ascending and, with a leading `-`, descending."""
    return [*sorts, *(f"-{name}" for name in sorts)]


class SignatureListQuery(Schema):
    status = fields.String(validate=validate.OneOf(SIGNATURE_STATUSES))
    q = fields.String(
        validate=validate.Length(max=200),
        metadata={"description": "substring of title, function or fingerprint"},
    )
    kind = fields.String(validate=validate.Length(max=64))
    sort = fields.String(
        load_default="-last_seen", validate=validate.OneOf(sort_names(SORTS))
    )
    limit = WholeNumber(load_default=50, validate=validate.Range(min=1, max=500))
    cursor = fields.String(validate=validate.Length(max=400))


class SignatureSchema(SignatureSummarySchema):
    """A signature: the summary fields always, the detail fields in single-signature answers."""

    function = fields.String(allow_none=True)
    module = fields.String(allow_none=True)
    frames = fields.List(fields.String())
    algorithm_version = fields.Integer(allow_none=True)
    owner = fields.String(allow_none=True)
    resolved_at = fields.AwareDateTime(allow_none=True)
    resolution = fields.String(allow_none=True)
    fix_versions = fields.List(fields.String())
    fixed_in_kernel = fields.String(allow_none=True)
    capture_policy = fields.Dict(metadata={"description": "mode, dump_level, extra_full_captures"})
    aliases = fields.List(fields.String(), metadata={"description": "fingerprints merged into this one"})


class SignaturePageSchema(Schema):
    signatures = fields.List(fields.Nested(SignatureSchema))
    next_cursor = fields.String(allow_none=True)


class CapturePolicySchema(Schema):
    mode = fields.String(validate=validate.OneOf(CAPTURE_POLICIES))
    dump_level = WholeNumber(validate=validate.Range(min=0, max=31), allow_none=True)
    extra_full_captures = WholeNumber(
        validate=validate.Range(min=0, max=1000), metadata={"description": "N more full captures"}
    )


class SignaturePatchSchema(Schema):
    status = fields.String(validate=validate.OneOf(SIGNATURE_STATUSES))
    title = fields.String(validate=[validate.Length(min=1, max=512),
                                    validate.Regexp(r".*\S", error="a title needs more than spaces")])
    owner = fields.String(validate=validate.Length(max=255), allow_none=True)
    notes = fields.String(validate=validate.Length(max=100_000), allow_none=True)
    capture_policy = fields.Nested(CapturePolicySchema)


class EventPageSchema(Schema):
    events = fields.List(fields.Dict())
    next_cursor = fields.String(allow_none=True)


class EventListQuery(Schema):
    limit = WholeNumber(load_default=50, validate=validate.Range(min=1, max=500))
    cursor = fields.String(validate=validate.Length(max=100))


def encode_cursor(values: list[Any]) -> str:
    plain = [v.isoformat() if isinstance(v, datetime) else v for v in values]
    return base64.urlsafe_b64encode(json.dumps(plain).encode()).decode()


def _cursor_time(value: Any) -> datetime:
    """An aware time the database can hold in UTC (the cursors issued are such)."""
    if not isinstance(value, str):
        raise TypeError("not a time")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise TypeError("not an aware time")
    return moment.astimezone(UTC)  # OverflowError past year 1 or 9999 in UTC: not one issued


def _cursor_count(value: Any) -> int:
    """A count the sort compares as a 32-bit integer (PostgreSQL's `integer`)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ID_MAX:
        raise TypeError("not a count")
    return value


def _cursor_none(value: Any) -> None:
    """Sorted by id, a cursor's id is all there is: `[null, id]`."""
    if value is not None:
        raise TypeError("not empty")


# What the first element of a cursor must be, by sort key: the sort column's own type, so a
# forged cursor never compares a text with a count in SQL.
CursorValues = dict[str, Callable[[Any], Any]]
CURSOR_VALUES: CursorValues = {
    "last_seen": _cursor_time,
    "first_seen": _cursor_time,
    "events": _cursor_count,
    "id": _cursor_none,
}


def decode_cursor(cursor: str, sort: str, cursor_values: CursorValues = CURSOR_VALUES) -> tuple[Any, int]:
    try:
        value, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if isinstance(last_id, bool) or not isinstance(last_id, int) or not 0 < last_id <= ID_MAX:
            raise TypeError("not an id")
        return cursor_values[sort.lstrip("-")](value), last_id
    except (ValueError, TypeError, OverflowError, json.JSONDecodeError, RecursionError):
        raise ApiError(
            400, "invalid", "cursor is not one this server issued", fields={"cursor": ["invalid cursor"]}
        ) from None


def signature_query(args: dict[str, Any], sorts: Sorts = SORTS,
                    cursor_values: CursorValues = CURSOR_VALUES) -> tuple[Select[Any], Any, bool]:
    """The list's query; `sorts` and `cursor_values` may add sort keys (the pages sort by what
    the epidemiology stored)."""
    stats = stats_subquery()
    descending = args["sort"].startswith("-")
    key = sorts[args["sort"].lstrip("-")](stats)
    query = (
        select(Signature, stats.c.event_count, stats.c.last_seen, key.label("sort_key"))
        .outerjoin(stats, stats.c.signature_id == Signature.id)
        .where(Signature.merged_into_id.is_(None))
    )
    if "status" in args:
        query = query.where(Signature.status == args["status"])
    if "kind" in args:
        query = query.where(Signature.kind == args["kind"])
    if args.get("q"):
        pattern = f"%{args['q'].lower()}%"
        query = query.where(
            or_(
                func.lower(Signature.title).like(pattern),
                func.lower(Signature.function).like(pattern),
                Signature.fingerprint.like(pattern),
            )
        )
    if args.get("cursor"):
        value, last_id = decode_cursor(args["cursor"], args["sort"], cursor_values)
        if value is None:  # sorted by id
            after = Signature.id < last_id if descending else Signature.id > last_id
        else:
            after = (
                or_(key < value, and_(key == value, Signature.id < last_id))
                if descending
                else or_(key > value, and_(key == value, Signature.id > last_id))
            )
        query = query.where(after)
    order = (key.desc(), Signature.id.desc()) if descending else (key.asc(), Signature.id.asc())
    return query.order_by(*order), key, descending


@blueprint.get("/signatures")
@require_scope("read")
@documented(
    "List signatures: filter, search, sort, cursor pagination",
    query=SignatureListQuery,
    responses={200: SignaturePageSchema},
    tag="signatures",
)
def list_signatures() -> Any:
    args = load_query(SignatureListQuery())
    with current_db().read_only() as session:
        items, next_cursor = signature_page(session, args)
    return jsonify({"signatures": items, "next_cursor": next_cursor})


def signature_page(session: Session, args: dict[str, Any], sorts: Sorts = SORTS,
                   cursor_values: CursorValues = CURSOR_VALUES) -> tuple[list[SignatureSummary], str | None]:
    """One page of the signature list (summaries) and the cursor of the next, if any."""
    query, _, _ = signature_query(args, sorts, cursor_values)
    rows = session.execute(query.limit(args["limit"] + 1)).all()
    page = rows[: args["limit"]]
    keys = dict(
        session.execute(
            select(JiraLink.signature_id, JiraLink.issue_key).where(
                JiraLink.signature_id.in_([r[0].id for r in page])
            )
        ).all()
    )
    items = [
        summary(session, row[0], (int(row[1] or 0), row[2]), jira_key=keys.get(row[0].id)) for row in page
    ]
    next_cursor = None
    if len(rows) > len(page):
        last = page[-1]
        by_id = args["sort"].lstrip("-") == "id"  # the id is the cursor: `[null, id]`, as every list by id
        next_cursor = encode_cursor([None if by_id else last.sort_key, last[0].id])
    return items, next_cursor


@blueprint.get("/signatures/<key>")
@require_scope("read")
@documented(
    "One signature, by id or fingerprint (merged fingerprints too)",
    responses={200: SignatureSchema},
    errors=(401, 403, 404),
    tag="signatures",
)
def get_signature(key: str) -> Any:
    with current_db().read_only() as session:
        return jsonify(detail(session, signature_or_404(session, key)))


@blueprint.get("/signatures/<key>/events")
@require_scope("read")
@documented(
    "A signature's events, newest first",
    query=EventListQuery,
    responses={200: EventPageSchema},
    errors=(400, 401, 403, 404),
    tag="signatures",
)
def signature_events(key: str) -> Any:
    args = load_query(EventListQuery())
    with current_db().session() as session:
        signature = signature_or_404(session, key)
        merged = select(Signature.id).where(Signature.merged_into_id == signature.id)
        query = select(Event).where(or_(Event.signature_id == signature.id, Event.signature_id.in_(merged)))
        if args.get("cursor"):
            _, before_id = decode_cursor(args["cursor"], "id")
            query = query.where(Event.id < before_id)
        events = session.scalars(query.order_by(Event.id.desc()).limit(args["limit"] + 1)).all()
        page = events[: args["limit"]]
        more = len(events) > len(page)
        return jsonify(
            {
                "events": [event_summary(e) for e in page],
                "next_cursor": encode_cursor([None, page[-1].id]) if more else None,
            }
        )


@blueprint.patch("/signatures/<key>")
@require_scope("triage")
@human_decision("change a signature's status, title, owner, notes or capture policy")
@documented(
    "Triage a signature: status, title, owner, notes, capture policy",
    request=SignaturePatchSchema,
    responses={200: SignatureSchema},
    errors=(400, 401, 403, 404),
    tag="signatures",
)
def patch_signature(key: str) -> Any:
    changes = load(SignaturePatchSchema(), json_body())
    with current_db().session() as session:
        signature = signature_or_404(session, key)
        old_status = signature.status
        for name in ("status", "title", "owner", "notes"):
            if name in changes:
                setattr(signature, name, changes[name])
        if "title" in changes:
            signature.title_by_hand = True
        policy = changes.get("capture_policy", {})
        if "mode" in policy:
            signature.capture_policy = policy["mode"]
        if "dump_level" in policy:
            signature.capture_dump_level = policy["dump_level"]
        if "extra_full_captures" in policy:
            signature.extra_full_captures = policy["extra_full_captures"]
        if signature.capture_policy == "filtered" and signature.capture_dump_level is None:
            raise ApiError(
                400,
                "invalid",
                "a filtered capture policy needs a dump_level",
                fields={"capture_policy": {"dump_level": ["required for filtered"]}},
            )
        if changes.get("status") == "resolved" and old_status != "resolved":
            signature.resolved_at = utcnow()
        if changes.get("status", old_status) != old_status:
            publish(
                session,
                "signature.status",
                signature.id,
                old=old_status,
                new=signature.status,
                by=g.token.name,
            )
        signature.updated_at = utcnow()
        session.flush()
        return jsonify(detail(session, signature))
