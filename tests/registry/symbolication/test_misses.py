"""The notes of reports that missed symbols: a note whose report was never stored is dropped
once a day has passed; the notes of stored reports stay until their symbols arrive."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from flask.testing import FlaskClient
from sqlalchemy import select

from registry.db import Database, utcnow
from registry.symbolication.misses import forget_unstored, note_misses
from registry.symbolication.models import SymbolMiss
from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.userspace import stack


def notes(database: Database) -> set[tuple[str, str]]:
    with database.session() as session:
        return {(row.build_id, row.report_id) for row in session.scalars(select(SymbolMiss))}


def test_only_the_notes_of_reports_never_stored_are_forgotten_and_only_after_a_day(
    client: FlaskClient, database: Database, make_token: Callable[..., str],
) -> None:
    build_id = "ab" * 20
    report = crash_report(source="userspace", console_log=None, stack=stack(build_id=build_id))
    assert client.post("/api/v1/reports", json=report, headers=auth(make_token("report"))).status_code == 201
    note_misses(database, report["report_id"], [build_id])
    note_misses(database, "refused-after-its-note", [build_id])
    noted = notes(database)
    assert noted >= {(build_id, report["report_id"]), (build_id, "refused-after-its-note")}

    assert forget_unstored(database, utcnow() + timedelta(hours=23)) == 0
    assert notes(database) == noted
    assert forget_unstored(database, utcnow() + timedelta(days=2)) == 1
    assert notes(database) == noted - {(build_id, "refused-after-its-note")}
