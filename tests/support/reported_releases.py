"""Releases reported to a registry app (tests/support/releases.py): the report posted, the
symbol work it started waited for, the signatures it left; shared by the symbolication tests."""

from __future__ import annotations

from typing import Any

from flask import Flask
from sqlalchemy import func, select

from registry.core.events import Event
from registry.core.signatures import Signature
from registry.db import Database
from registry.symbolication.service import APP_SYMBOLICATOR, Symbolicator
from registry.symbols.api import SOURCES
from tests.support.http import auth
from tests.support.releases import Release


def post(client: Any, token: str, release: Release, report_id: str | None = None) -> dict[str, Any]:
    body = dict(release.report)
    if report_id:
        body["report_id"] = report_id
    response = client.post("/api/v1/reports", json=body, headers=auth(token))
    assert response.status_code == 201, response.json
    return response.json


def settle(app: Flask) -> None:
    """Wait for the asks the misses queued, the fetches they started, what their arrival started."""
    symbolicator: Symbolicator = app.extensions[APP_SYMBOLICATOR]
    symbolicator.drain()
    app.extensions[SOURCES].settle()
    symbolicator.drain()


def reported_without_symbols(app: Flask, database: Database, token: str,
                             pair: tuple[Release, Release]) -> Any:
    """Both releases reported to a registry that has none of their symbols: a signature each,
    named by offsets. The app's test client."""
    client = app.test_client()
    for release in pair:
        assert "+0x" in post(client, token, release)["signature"]["title"]
    settle(app)
    assert len(signatures_of(database)) == 2
    return client


def signatures_of(database: Database) -> dict[str, tuple[str | None, int]]:
    """Standing signatures (not merged away) with events: title -> (function, events)."""
    with database.session() as session:
        rows = session.execute(
            select(Signature.title, Signature.function, func.count(Event.id))
            .join(Event, Event.signature_id == Signature.id)
            .where(Signature.merged_into_id.is_(None)).group_by(Signature.id)).all()
    return {title: (function, count) for title, function, count in rows}
