"""Bearer tokens: random, shown once, stored as SHA-256; scopes with implication rules."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, TypeVar

from flask import g, request
from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from registry.auth.models import ApiToken
from registry.db import utcnow
from registry.errors import ApiError
from registry.web import current_db

SCOPES = ("report", "read", "triage", "admin")
TOKEN_KINDS = ("human", "agent")
# What each scope may also do: admin implies all, triage implies read.
IMPLIED_SCOPES: dict[str, frozenset[str]] = {
    "report": frozenset({"report"}),
    "read": frozenset({"read"}),
    "triage": frozenset({"triage", "read"}),
    "admin": frozenset(SCOPES),
}
LAST_USED_RESOLUTION = timedelta(minutes=5)

F = TypeVar("F", bound=Callable[..., Any])


def hash_token(token: str) -> str:
    """Tokens carry 256 bits of randomness, so a fast unsalted hash is safe to store."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, name: str, scope: str, kind: str = "human") -> tuple[str, ApiToken]:
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; choose one of {', '.join(SCOPES)}")
    if kind not in TOKEN_KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose human or agent")
    prefix = secrets.token_hex(4)
    token = f"crs_{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiToken(name=name, scope=scope, kind=kind, prefix=prefix, token_hash=hash_token(token))
    session.add(row)
    session.flush()
    return token, row


TOKENS = ApiToken.__table__.c
# The per-request lookup: one indexed Core read, built once (no ORM query compile or load).
LIVE_TOKEN = select(*TOKENS).where(TOKENS.token_hash == bindparam("token_hash"), TOKENS.revoked_at.is_(None))
STAMP_LAST_USED = update(ApiToken.__table__).where(TOKENS.id == bindparam("token_id"))


def authenticate(session: Session, token: str) -> ApiToken | None:
    """The live (unrevoked) token, as a detached ApiToken; never cached, so revocation is immediate."""
    found = session.connection().execute(LIVE_TOKEN, {"token_hash": hash_token(token)}).one_or_none()
    if found is None:
        return None
    row = ApiToken(**found._mapping)
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        # Coarse last-use stamp: one write per token per few minutes, never per request.
        session.connection().execute(STAMP_LAST_USED, {"token_id": row.id, "last_used_at": now})
    return row


def token_from_request() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def caller_has_scope(token: ApiToken, scope: str) -> bool:
    return scope in IMPLIED_SCOPES.get(token.scope, frozenset())


def require_scope(*scopes: str) -> Callable[[F], F]:
    """Allow the view to callers whose token grants any of `scopes`; 401 or 403 otherwise."""

    def decorate(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            g.token = load_caller()
            if not any(caller_has_scope(g.token, scope) for scope in scopes):
                raise ApiError(
                    403,
                    "forbidden",
                    f"this token's scope '{g.token.scope}' does not allow this; needs {' or '.join(scopes)}",
                )
            return view(*args, **kwargs)

        guarded.required_scopes = scopes  # type: ignore[attr-defined]
        return guarded  # type: ignore[return-value]

    return decorate


def load_caller() -> ApiToken:
    token = token_from_request() or getattr(g, "session_token", None)
    if not token:
        raise ApiError(
            401,
            "unauthorized",
            "missing bearer token (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    with current_db().lookup() as session:
        row = authenticate(session, token)
    if row is None:
        raise ApiError(
            401,
            "unauthorized",
            "unknown or revoked token",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return row
