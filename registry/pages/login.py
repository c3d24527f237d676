"""Browser logins with a read token: server-side sessions, the cookie secret, CSRF tokens.

The cookie (Flask's signed session: HttpOnly, SameSite=Lax, Secure behind https) carries a
random session id and the CSRF token; the database keeps only the id's SHA-256 and which
API token logged in, so logging out or revoking the token ends the session at once.

The signing secret is CRASHREG_SECRET_KEY when set; otherwise a random one is generated on
first use and stored in `app_secrets`, so every gunicorn worker (and restart) agrees on it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from flask import Flask, Request, request, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from sqlalchemy import delete, select
from sqlalchemy.exc import DBAPIError
from werkzeug.exceptions import HTTPException

from registry.auth.models import HOLDER_FIELDS, ApiToken, TokenHolder
from registry.auth.tokens import authenticate, caller_has_scope
from registry.core.secrets import shared_secret
from registry.db import Database, utcnow
from registry.errors import ApiError
from registry.pages.models import WebSession

SESSION_LIFETIME = timedelta(hours=12)
SECRET_NAME = "web_session_signing_key"
LOGIN_SCOPE = "read"
PAGES_BLUEPRINT = "pages"
API_PATH = "/api/"  # every API blueprint's url_prefix is under it


def ensure_secret_key(app: Flask, database: Database, configured: str | None) -> None:
    """Give the app its cookie-signing secret: configured, else shared through the database."""
    if app.secret_key:
        return
    if configured:
        app.secret_key = configured
        return
    with database.session() as db:
        app.secret_key = shared_secret(db, SECRET_NAME)


def is_page_request(app: Flask, request: Request) -> bool:
    adapter = app.create_url_adapter(request)
    try:
        endpoint, _ = adapter.match(return_rule=False) if adapter else ("", None)
    except HTTPException:
        return False
    return str(endpoint).startswith(f"{PAGES_BLUEPRINT}.")


class SharedSecretSessions(SecureCookieSessionInterface):
    """Signed-cookie sessions whose secret is loaded (or made) before the first page opens one.

    Flask opens the session before it even matches the URL, so the secret must be in place
    here. API requests (bearer tokens only) get no session: no cookie is read, no URL matched
    a second time, and the secret is never looked up for them.
    """

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        if request.path.startswith(API_PATH):
            return self.make_null_session(app)
        if not app.secret_key:
            if not is_page_request(app, request):
                return self.make_null_session(app)
            settings = app.extensions["crashreg.settings"]
            try:
                ensure_secret_key(app, app.extensions["crashreg.db"], settings.secret_key)
            except DBAPIError as error:  # raised again where its 503 is made (unopened_session)
                request.environ[SESSION_UNOPENED] = error
                return self.make_null_session(app)
        return super().open_session(app, request)


# Flask opens the session before the request's hooks and error handlers are in place: a database
# down then was a 500 and a traceback. The error waits in the environ until the page's request
# is dispatched, then answers as any view's lost database does (a 503).
SESSION_UNOPENED = "crashreg.session_unopened"


def unopened_session() -> None:
    """before_request of the pages: the database error that kept the session from opening."""
    error = request.environ.get(SESSION_UNOPENED)
    if error is not None:
        raise error


def hash_session_id(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf_token() -> str:
    """The CSRF token for forms rendered in this browser session (made on first use)."""
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return session["csrf"]


def check_csrf(submitted: str | None) -> None:
    expected = session.get("csrf")
    # as bytes: compare_digest refuses a str that is not ASCII, and a form may carry any text
    if not expected or not submitted or not hmac.compare_digest(
            expected.encode(), submitted.encode(errors="replace")):
        raise ApiError(400, "csrf", "the form's CSRF token is missing or stale: reload the page and retry")


def log_in(database: Database, token: str) -> TokenHolder:
    """Start a session for a valid token with read scope; raise 401/403 otherwise."""
    with database.session() as db:
        row = authenticate(db, token.strip())
        if row is None:
            raise ApiError(401, "unauthorized", "unknown or revoked token")
        if not caller_has_scope(row, LOGIN_SCOPE):
            raise ApiError(403, "forbidden", f"a '{row.scope}' token cannot read; log in with a read token")
        now = utcnow()
        db.execute(delete(WebSession).where(WebSession.expires_at < now))
        session_id = secrets.token_urlsafe(32)
        db.add(
            WebSession(
                id_hash=hash_session_id(session_id), token_id=row.id, expires_at=now + SESSION_LIFETIME
            )
        )
    session.clear()  # a fresh session id and CSRF token: no fixation across the login
    session["sid"] = session_id
    session["csrf"] = secrets.token_urlsafe(32)
    return row


def current_login(database: Database) -> TokenHolder | None:
    """The holder of the token behind this browser's live session, or None."""
    session_id = session.get("sid")
    if not session_id:
        return None
    with database.session() as db:
        row = db.execute(
            select(*(getattr(ApiToken, name) for name in HOLDER_FIELDS))
            .join(WebSession, WebSession.token_id == ApiToken.id)
            .where(
                WebSession.id_hash == hash_session_id(session_id),
                WebSession.expires_at > utcnow(),
                ApiToken.revoked_at.is_(None),
            )
        ).mappings().one_or_none()
    holder = TokenHolder.of(row) if row is not None else None
    return holder if holder is not None and caller_has_scope(holder, LOGIN_SCOPE) else None


def log_out(database: Database) -> None:
    session_id = session.get("sid")
    if session_id:
        with database.session() as db:
            db.execute(delete(WebSession).where(WebSession.id_hash == hash_session_id(session_id)))
    session.clear()
