"""Server-rendered pages: /signatures (search) and /signatures/{id}, behind a token login."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, g, redirect, render_template, request, url_for
from sqlalchemy import func, select
from werkzeug.wrappers import Response

from registry.capture.models import Capture
from registry.epidemiology.service import signature_epidemiology
from registry.errors import ApiError
from registry.ingest.api import capture_dict, event_summary
from registry.ingest.models import Event
from registry.pages.login import (
    PAGES_BLUEPRINT,
    SharedSecretSessions,
    check_csrf,
    csrf_token,
    current_login,
    log_in,
    log_out,
)
from registry.rca.bundle import jira_issue
from registry.rca.service import member_signature_ids, signature_rcas
from registry.requests import load
from registry.signatures.api import SignatureListQuery, signature_or_404, signature_page
from registry.signatures.explanation import explanation_variants
from registry.signatures.models import SIGNATURE_STATUSES
from registry.signatures.service import detail
from registry.web import current_db

blueprint = Blueprint(
    PAGES_BLUEPRINT,
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/static/pages",
)
PAGE_EVENTS = 50
# Pages show crash data to a logged-in engineer: never cached, never framed, no foreign code.
SECURITY_HEADERS = {
    "Cache-Control": "private, no-store",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
PAGE_CAPTURES = 50


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
def signatures() -> str:
    # A search form sends every field; an empty one means "any", not an invalid value.
    args = load(SignatureListQuery(), {name: value for name, value in request.args.items() if value})
    items, next_cursor = signature_page(args)
    next_url = None
    if next_cursor:
        params = {k: v for k, v in request.args.items() if k != "cursor"} | {"cursor": next_cursor}
        next_url = f"{url_for('pages.signatures')}?{urlencode(params)}"
    return render_template(
        "pages/signatures.html",
        user=g.token,
        signatures=items,
        q=args.get("q", ""),
        status=args.get("status", ""),
        statuses=SIGNATURE_STATUSES,
        next_url=next_url,
    )


def signature_hosts(session: Any, members: list[int]) -> list[dict[str, Any]]:
    rows = session.execute(
        select(
            Event.hostname,
            func.count(),
            func.max(Event.crashed_at),
            func.max(Event.kernel_version),
            func.max(Event.region),
            func.max(Event.sku),
        )
        .where(Event.signature_id.in_(members))
        .group_by(Event.hostname)
        .order_by(func.count().desc(), Event.hostname)
        .limit(100)
    ).all()
    return [
        {
            "hostname": h,
            "events": n,
            "last_crash": last,
            "kernel_version": kernel,
            "region": region,
            "sku": sku,
        }
        for h, n, last, kernel, region, sku in rows
    ]


@blueprint.get("/signatures/<key>")
@login_required
def signature(key: str) -> str:
    with current_db().session() as session:
        found = signature_or_404(session, key)
        members = member_signature_ids(session, found)
        events = session.scalars(
            select(Event).where(Event.signature_id.in_(members)).order_by(Event.id.desc()).limit(PAGE_EVENTS)
        ).all()
        captures = session.scalars(
            select(Capture)
            .join(Event, Event.id == Capture.event_id)
            .where(Event.signature_id.in_(members))
            .order_by(Capture.id.desc())
            .limit(PAGE_CAPTURES)
        ).all()
        variants = explanation_variants((str(e.id), e.explanation) for e in events)
        context = {
            "signature": detail(session, found),
            "events": [event_summary(e) for e in events],
            "variants": variants,
            "variant_of": {event_id: v["label"] for v in variants for event_id in v["events"]},
            "hosts": signature_hosts(session, members),
            "captures": [capture_dict(c) for c in captures],
            "rcas": signature_rcas(session, found),
            "jira": jira_issue(session, found),
            "epidemiology": signature_epidemiology(session, found),
        }
    return render_template("pages/signature.html", user=g.token, **context)
