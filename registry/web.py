"""Flask-side access to the app's database and settings, for the domain blueprints; and which
database a request's reads go to when a read replica is configured (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import wraps
from typing import Any

from flask import Response, current_app, g, request, session
from flask.sessions import NullSession
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from registry.config import Settings
from registry.db import Database, on_replica

# Requests that write nothing: only their reads may go to the replica.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# In a browser's session: the primary's WAL position after its last write. Its reads go to the
# primary until the replica has replayed that far (read-your-writes across requests).
WROTE_AT = "wrote_at_wal"


def current_db() -> Database:
    return current_app.extensions["crashreg.db"]


def current_settings() -> Settings:
    return current_app.extensions["crashreg.settings"]


@contextmanager
def current_reads() -> Iterator[Session]:
    """Reads for a view that may serve them up to the replica's lag bound stale (pages, the
    epidemiology reads): on the replica when it is in use, the request writes nothing and the
    browser's last write has been replayed there; else on the primary."""
    database = current_db()
    on_primary = request.method not in READ_METHODS or g.get("reads_on_primary", False)
    replayed = session.get(WROTE_AT)
    with database.reads(on_primary, replayed) as reading:
        if on_replica(reading):
            g.read_on_replica = True
            if replayed is not None:
                session.pop(WROTE_AT)  # replayed: the replica shows this browser its writes now
        yield reading


def replica_fallback(view: Callable[..., Any]) -> Callable[..., Any]:
    """A read-only view served again on the primary when a read on the replica fails during it
    (the replica stopped, or cancelled a query in conflict with its replay): no 5xx."""

    @wraps(view)
    def serve(*args: Any, **kwargs: Any) -> Any:
        try:
            return view(*args, **kwargs)
        except DBAPIError as error:
            replica = current_db().replica
            if replica is None or not g.pop("read_on_replica", False):
                raise
            replica.failed(error)
            current_app.logger.warning("a read on the replica failed, served from the primary: %s",
                                       type(error.orig).__name__)
            g.reads_on_primary = True
            return view(*args, **kwargs)

    return serve


def remember_writes(response: Response) -> Response:
    """After a browser's request that may have written, note the primary's WAL position in its
    session, so that its next pages show what it wrote (installed with a read replica only)."""
    if request.method in READ_METHODS or isinstance(session, NullSession):
        return response
    with suppress(DBAPIError):  # the primary is down: nothing was written, reads go there anyway
        session[WROTE_AT] = current_db().wal_position()
    return response
