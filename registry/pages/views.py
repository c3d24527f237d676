"""Server-rendered pages, behind a token login: /signatures (search, trends, verdicts),
/signatures/{id} (what to triage from) and /events/{id} (the crash itself)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, g, redirect, render_template, request, url_for
from marshmallow import fields, validate
from sqlalchemy import select
from werkzeug.wrappers import Response

from registry.auth.tokens import caller_has_scope, refuse_agent
from registry.capture.models import Capture
from registry.capture.service import capture_dict
from registry.core.events import Event, event_summary
from registry.core.signatures import SIGNATURE_STATUSES, Signature
from registry.db import utcnow
from registry.epidemiology.service import signature_epidemiology
from registry.errors import ApiError
from registry.ingest.api import UnfingerprintedQuery, event_detail
from registry.ingest.unfingerprinted import CAUSE_NAMES, unfingerprinted_counts, unfingerprinted_events
from registry.pages import reads
from registry.pages.charts import chart_start, events_chart, sparkline
from registry.pages.console import excerpt
from registry.pages.login import (
    PAGES_BLUEPRINT,
    SharedSecretSessions,
    check_csrf,
    csrf_token,
    current_login,
    log_in,
    log_out,
    unopened_session,
)
from registry.pages.origins import origins
from registry.pages.verdict import verdict_statements
from registry.rca.bundle import jira_issue
from registry.rca.service import member_signature_ids, signature_rcas
from registry.requests import load, load_query
from registry.retention.api import PinRequestSchema
from registry.retention.pins import pin, standing_pins, unpin
from registry.signatures.api import (
    SignatureListQuery,
    decode_cursor,
    encode_cursor,
    signature_page,
    sort_names,
)
from registry.signatures.explanation import explanation_variants
from registry.signatures.service import detail, signature_or_404
from registry.storage.api import current_store
from registry.storage.service import download_link, stored_dump, stored_dumps
from registry.web import current_db, current_reads, current_settings, replica_fallback

blueprint = Blueprint(
    PAGES_BLUEPRINT,
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/static/pages",
)
PAGE_EVENTS = 50
# The Grafana dashboard a signature page links to (dashboards/signature.py; registry/ never
# imports dashboards/, tests/registry/pages checks the two agree).
GRAFANA_SIGNATURE_DASHBOARD = "crashreg-signature"
# Pages show crash data to a logged-in engineer: never cached, never framed, no foreign code.
SECURITY_HEADERS = {
    "Cache-Control": "private, no-store",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
PAGE_CAPTURES = 50
# The list's sort controls: key, label, and how each direction reads (ascending, descending).
SORT_CONTROLS: tuple[tuple[str, str, tuple[str, str]], ...] = (
    ("last_seen", "Last seen", ("oldest first", "newest first")),
    ("events", "Events", ("fewest first", "most first")),
    ("hosts", "Physical hosts", ("fewest first", "most first")),
    ("first_seen", "First seen", ("oldest first", "newest first")),
    ("verdict", "Verdict", ("not yet analysed, inconclusive, software, hardware-config, then single-host",
                            "single-host, hardware-config, software, inconclusive, then not yet analysed")),
)


class PageListQuery(SignatureListQuery):
    """The list page's query: the API's, sortable by what the page shows besides."""

    sort = fields.String(load_default="-last_seen", validate=validate.OneOf(sort_names(reads.PAGE_SORTS)))


def sort_controls(params: dict[str, str], sort: str) -> tuple[list[dict[str, Any]], str]:
    """A link per sort key (the current one turns its direction around) and the sentence that
    says how the list is sorted."""
    current, descending = sort.lstrip("-"), sort.startswith("-")
    controls, said = [], ""
    for key, label, words in SORT_CONTROLS:
        active = key == current
        target = (key if descending else f"-{key}") if active else f"-{key}"
        query = {k: v for k, v in params.items() if k not in ("sort", "cursor")} | {"sort": target}
        controls.append({"key": key, "label": label, "active": active, "descending": descending and active,
                         "url": f"{url_for('pages.signatures')}?{urlencode(query)}"})
        if active:
            said = f"Sorted by {label.lower()}, {words[descending]}."
    return controls, said


@blueprint.record_once
def _cookie_settings(state: Any) -> None:
    settings = state.app.extensions["crashreg.settings"]
    state.app.config.update(
        SESSION_COOKIE_NAME="crashreg_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.public_url.startswith("https://"),
    )
    state.app.session_interface = SharedSecretSessions()


blueprint.before_request(unopened_session)


@blueprint.after_request
def _security_headers(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


@blueprint.app_context_processor
def _template_globals() -> dict[str, Any]:
    return {"csrf_token": csrf_token}


@blueprint.errorhandler(ApiError)
def _error_page(error: ApiError) -> tuple[str, int]:
    return render_template("pages/error.html", error=error, user=getattr(g, "token", None)), error.status


def login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        g.token = current_login(current_db())
        if g.token is None:
            return redirect(url_for("pages.login", next=request.full_path.rstrip("?")))
        return view(*args, **kwargs)

    return guarded


def safe_next(target: str | None) -> str:
    """Only same-site paths: an open redirect after login would hand the session to phishers."""
    if not target or not target.startswith("/") or target.startswith("//") or urlsplit(target).netloc:
        return url_for("pages.signatures")
    return target


@blueprint.get("/")
def home() -> Response:
    return redirect(url_for("pages.signatures"))


@blueprint.route("/login", methods=["GET", "POST"])
def login() -> Any:
    next_page = safe_next(request.values.get("next"))
    if request.method == "GET":
        return render_template("pages/login.html", next_page=next_page, message=None)
    check_csrf(request.form.get("csrf_token"))
    try:
        log_in(current_db(), request.form.get("token", ""))
    except ApiError as error:
        if error.status not in (401, 403):
            raise
        page = render_template("pages/login.html", next_page=next_page, message=error.message)
        return page, error.status
    return redirect(next_page)


@blueprint.post("/logout")
def logout() -> Response:
    check_csrf(request.form.get("csrf_token"))
    log_out(current_db())
    return redirect(url_for("pages.login"))


@blueprint.get("/signatures")
@login_required
@replica_fallback
def signatures() -> str:
    # A search form sends every field; an empty one means "any", not an invalid value.
    args = load(PageListQuery(), {name: value for name, value in request.args.items() if value})
    controls, sorted_by = sort_controls(dict(request.args), args["sort"])
    today = utcnow().date()
    with current_reads() as session:
        items, next_cursor = signature_page(session, args, reads.PAGE_SORTS, reads.PAGE_CURSOR_VALUES)
        ids = [int(s["id"]) for s in items]
        daily = reads.daily_counts(session, ids, since=utcnow() - timedelta(days=31))
        verdicts = reads.stored_verdicts(session, ids)
        counted = [sid for sid in ids if sid not in verdicts]
        hosts = {sid: v.hosts for sid, v in verdicts.items()} | reads.physical_host_counts(session, counted)
        jira_urls = reads.jira_urls(session, ids)
        sources = reads.source_counts(session, ids)
    next_url = None
    if next_cursor:
        params = {k: v for k, v in request.args.items() if k != "cursor"} | {"cursor": next_cursor}
        next_url = f"{url_for('pages.signatures')}?{urlencode(params)}"
    rows = [
        {
            "signature": s,
            "trend": sparkline(daily[int(s["id"])], today),
            "hosts": hosts.get(int(s["id"]), 0),
            "verdict": verdicts.get(int(s["id"])),
            "jira_url": jira_urls.get(int(s["id"])),
            "origins": origins(sources.get(int(s["id"]), {})),
        }
        for s in items
    ]
    return render_template(
        "pages/signatures.html",
        user=g.token,
        rows=rows,
        q=args.get("q", ""),
        status=args.get("status", ""),
        statuses=SIGNATURE_STATUSES,
        next_url=next_url,
        sort=args["sort"],
        sort_controls=controls,
        sorted_by=sorted_by,
        # the verdicts and their physical hosts are the last refresh's, the events live
        refreshed=min((v.computed_at for v in verdicts.values()), default=None),
    )


def merged_sources(per_signature: dict[int, dict[str, tuple[int, int]]]) -> dict[str, tuple[int, int]]:
    """A merged signature's members' counts, summed per source."""
    merged: dict[str, tuple[int, int]] = {}
    for counts in per_signature.values():
        for source, (events, repeats) in counts.items():
            before = merged.get(source, (0, 0))
            merged[source] = (before[0] + events, before[1] + repeats)
    return merged


def grafana_link(signature_id: int) -> str | None:
    """The signature's Grafana dashboard with its variable set, when Grafana is configured."""
    base = current_settings().grafana.url
    if not base:
        return None
    return f"{base.rstrip('/')}/d/{GRAFANA_SIGNATURE_DASHBOARD}?{urlencode({'var-signature': signature_id})}"


@blueprint.get("/signatures/<key>")
@login_required
@replica_fallback
def signature(key: str) -> str:
    with current_reads() as session:
        found = signature_or_404(session, key)
        members = member_signature_ids(session, found)
        events = reads.latest_events(session, members, PAGE_EVENTS)
        captures = session.scalars(  # captures follow their events' signature: its index, not every capture
            select(Capture)
            .join(Event, Event.id == Capture.event_id)
            .where(Capture.signature_id.in_(members), Event.signature_id.in_(members))
            .order_by(Capture.id.desc())
            .limit(PAGE_CAPTURES)
        ).all()
        epidemiology = signature_epidemiology(
            session, found, program_label=current_settings().epidemiology_program_label)
        daily = reads.merged_daily(reads.daily_counts(session, members))
        marks = reads.marks(session, members, found.first_seen, kernel_rollouts=found.kind != "userspace")
        start = chart_start(min([found.first_seen.date(), *daily]), marks)
        hosts, hostnames = reads.top_hosts(session, members)
        from_where = origins(merged_sources(reads.source_counts(session, members)))
        variants = explanation_variants((str(e.id), e.explanation) for e in events)
        context = {
            "signature": detail(session, found),
            "events": [event_summary(e) for e in events],
            "variants": variants,
            "variant_of": {event_id: v["label"] for v in variants for event_id in v["events"]},
            "variant_by_label": {v["label"]: v for v in variants},
            "hosts": hosts,
            "hostnames": hostnames,
            "captures": [capture_dict(c) for c in captures],
            "rcas": signature_rcas(session, found),
            "jira": jira_issue(session, found),
            "epidemiology": epidemiology,
            "statements": verdict_statements(epidemiology),
            "components": epidemiology.get("components") or [],
            "chart": events_chart(daily, start, utcnow().date(), marks),
            "grafana_url": grafana_link(found.id),
            "origins": from_where,
        }
    return render_template("pages/signature.html", user=g.token, **context)


@blueprint.get("/events/<id:event_id>")
@login_required
@replica_fallback
def event(event_id: int) -> str:
    with current_reads() as session:
        found = session.get(Event, event_id)
        if found is None:
            raise ApiError(404, "not_found", f"no event {event_id}")
        signature = session.get(Signature, found.signature_id) if found.signature_id else None
        logged = reads.console_log(session, event_id)
        shown = event_detail(session, found)
        context = {
            "event": shown,
            "pins": standing_pins(session, [int(c["id"]) for c in shown["captures"]]),
            "function": signature.function if signature else None,
            "stored": set(stored_dumps(session, [int(c["id"]) for c in shown["captures"]])),
            "console": excerpt(logged[1], found.explanation) if logged else None,
            "console_source": logged[0] if logged else None,
        }
    return render_template("pages/event.html", user=g.token, **context)


@blueprint.get("/unfingerprinted")
@login_required
@replica_fallback
def unfingerprinted() -> str:
    """Reports stored without a signature, with their text: those the engine found no crash in
    (what it missed) and those it failed on (waiting for `crashreg signatures rebuild`)."""
    args = load_query(UnfingerprintedQuery())
    before = decode_cursor(args["cursor"], "id")[1] if args.get("cursor") else None
    with current_reads() as session:
        rows, more = unfingerprinted_events(session, args.get("cause"), before, PAGE_EVENTS)
        counts = unfingerprinted_counts(session)
    older = encode_cursor([None, int(rows[-1]["id"])]) if more else None
    return render_template("pages/unfingerprinted.html", user=g.token, rows=rows, counts=counts,
                           cause=args.get("cause"), older=older, causes=CAUSE_NAMES)

@blueprint.get("/events/<id:event_id>/captures/<id:capture_id>/download")
@login_required
def download_dump(event_id: int, capture_id: int) -> Response:
    """A short-lived link to the capture's dump, recorded with who asked; redirects to it."""
    with current_db().session() as session:
        capture = session.get(Capture, capture_id)
        if capture is None or capture.event_id != event_id:
            raise ApiError(404, "not_found", f"event {event_id} has no capture {capture_id}")
        link = download_link(session, current_store(), current_settings().dump_store.download_ttl_s,
                             stored_dump(session, capture_id), g.token.name, g.token.id, "page")
    return redirect(link["url"], code=303)


@blueprint.post("/captures/<id:capture_id>/pin")
@login_required
def capture_pin(capture_id: int) -> Response:
    """The event page's Pin / Unpin button (scope triage), as PUT/DELETE /captures/{id}/pin."""
    check_csrf(request.form.get("csrf_token"))
    if not caller_has_scope(g.token, "triage"):
        raise ApiError(403, "forbidden", "pinning a dump needs a token with the triage scope")
    with current_db().session() as session:
        if request.form.get("action") == "unpin":
            refuse_agent(g.token, "unpin a dump")
            unpin(session, capture_id, g.token.name, g.token.id)
        else:
            note = load(PinRequestSchema(), {"note": request.form.get("note") or None})["note"]  # as the API
            pin(session, capture_id, note, g.token.name, g.token.id)
        event_id = session.scalar(select(Capture.event_id).where(Capture.id == capture_id))
    return redirect(url_for("pages.event", event_id=event_id, _anchor="capture"))


@blueprint.get("/events/<id:event_id>/console.txt")
@login_required
@replica_fallback
def event_console(event_id: int) -> Response:
    """The whole stored console log, as text (the event page shows the part around the oops)."""
    with current_reads() as session:
        logged = reads.console_log(session, event_id)
    if logged is None:
        raise ApiError(404, "not_found", f"no console log stored for event {event_id}")
    return Response(logged[1], content_type="text/plain; charset=utf-8")
