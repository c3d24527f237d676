"""Bearer tokens: random, shown once, stored as SHA-256; scopes with implication rules."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import wraps
from typing import Any, TypeVar

from flask import g, request
from sqlalchemy import ColumnElement, Connection, and_, bindparam, or_, select, update
from sqlalchemy.orm import Session

from registry.auth.models import HOLDER_FIELDS, ApiToken, TokenHolder
from registry.db import utcnow
from registry.errors import ApiError
from registry.web import current_db

SCOPES = ("report", "read", "triage", "symbols", "admin")
TOKEN_KINDS = ("human", "agent")
# What each scope may also do: admin implies all, triage implies read; symbols (a build
# pipeline's) uploads symbol files and reads what the symbol store holds, nothing else.
IMPLIED_SCOPES: dict[str, frozenset[str]] = {
    "report": frozenset({"report"}),
    "read": frozenset({"read"}),
    "triage": frozenset({"triage", "read"}),
    "symbols": frozenset({"symbols"}),
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


def live_token(token_hash: Any) -> ColumnElement[bool]:
    """The condition on a presented token's live (unrevoked) row: for a read of its own, or
    inside a bigger read that needs the caller anyway (ingest's one read)."""
    return and_(TOKENS.token_hash == token_hash, TOKENS.revoked_at.is_(None))


# The per-request lookup: one indexed Core read, built once (no ORM query compile or load).
LIVE_TOKEN = select(*(TOKENS[name] for name in HOLDER_FIELDS)).where(live_token(bindparam("token_hash")))
# Conditional, so reports racing on a stale stamp inside their own transactions wait for the
# first one's commit at most, then write nothing.
STAMP_LAST_USED = update(ApiToken.__table__).where(
    TOKENS.id == bindparam("token_id"),
    or_(TOKENS.last_used_at.is_(None), TOKENS.last_used_at < bindparam("stale_before")),
)


def authenticate(session: Session, token: str) -> TokenHolder | None:
    """The live (unrevoked) token's holder; never cached, so revocation is immediate."""
    found = session.connection().execute(LIVE_TOKEN, {"token_hash": hash_token(token)}).one_or_none()
    return accepted(session.connection(), found._mapping if found is not None else None)


def accepted(connection: Connection, found: Mapping[str, Any] | None) -> TokenHolder | None:
    """The holder of the live token row read for a presented token (None: unknown or revoked),
    its last use stamped on the connection now and then."""
    if found is None:
        return None
    row = TokenHolder.of(found)
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        # Coarse last-use stamp: one write per token per few minutes, never per request.
        stale_before = now - LAST_USED_RESOLUTION
        connection.execute(
            STAMP_LAST_USED, {"token_id": row.id, "last_used_at": now, "stale_before": stale_before}
        )
    return row


def token_from_request() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def caller_has_scope(token: TokenHolder, scope: str) -> bool:
    return scope in IMPLIED_SCOPES.get(token.scope, frozenset())


def require_scope(*scopes: str, checked_by_view: bool = False) -> Callable[[F], F]:
    """Allow the view to callers whose token grants any of `scopes`; 401 or 403 otherwise.

    `checked_by_view`: here only a missing token is refused; the view checks the token with
    `accepted` and `admit` on the connection of its own transaction (ingest reads it in its one
    read), saving a pool checkout and a round trip per request, and must check it (`load_caller`)
    before it refuses a request for anything else."""

    def decorate(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if checked_by_view:
                presented_token()
            else:
                admit(load_caller(scopes), scopes)
            return view(*args, **kwargs)

        guarded.required_scopes = scopes  # type: ignore[attr-defined]
        return guarded  # type: ignore[return-value]

    return decorate


def refuse_agent(token: TokenHolder, what: str) -> None:
    """A write that changes the record by judgement (a signature's status, title or capture
    policy, a merge, an unpin) is refused to agent tokens, whatever their scope: an AI agent
    proposes an RCA, which a human reviews; nothing it concludes enters the record unreviewed."""
    if token.kind == "agent":
        raise ApiError(403, "forbidden", f"agent tokens may not {what}: that is a human's decision (an "
                       "agent proposes an RCA, POST /api/v1/signatures/{key}/rcas, which a human reviews)")


def human_decision(what: str) -> Callable[[F], F]:
    """refuse_agent on a view, below require_scope (which sets g.token)."""

    def decorate(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            refuse_agent(g.token, what)
            return view(*args, **kwargs)

        return guarded  # type: ignore[return-value]

    return decorate


def admit(row: TokenHolder | None, scopes: tuple[str, ...]) -> TokenHolder:
    """The request's caller (g.token) if its token is live and grants any of `scopes`."""
    if row is None:
        raise ApiError(
            401,
            "unauthorized",
            "unknown or revoked token",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    g.token = row
    if not any(caller_has_scope(row, scope) for scope in scopes):
        raise ApiError(
            403,
            "forbidden",
            f"this token's scope '{row.scope}' does not allow this; a token of scope "
            f"{' or '.join(scopes_granting(scopes))} does",
        )
    return row


def scopes_granting(scopes: tuple[str, ...]) -> list[str]:
    """Every scope whose tokens may do what any of `scopes` may (admin may do all)."""
    return [scope for scope in SCOPES if IMPLIED_SCOPES[scope] & set(scopes)]


def presented_token() -> str:
    token = token_from_request()
    if not token:
        raise ApiError(
            401,
            "unauthorized",
            "missing bearer token (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token


def load_caller(scopes: tuple[str, ...]) -> TokenHolder | None:
    """The presented token's live row, read on a lookup connection of its own (None: unknown or
    revoked; a missing token is a 401). For a request reporters make (`scopes`, the ones it
    admits, hold theirs), the lookup waits for a lock no longer than their writes do
    (registry.db.Database): on SQLite it takes the write lock."""
    token = presented_token()
    with current_db().lookup(bounded="report" in scopes) as session:
        return authenticate(session, token)
