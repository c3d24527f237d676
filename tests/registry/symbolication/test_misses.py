"""The notes of reports that missed symbols: a note whose report was never stored is dropped
once a day has passed; the notes of stored reports stay until their symbols arrive. After a
replacement, the reports naming the build-id are noted alike."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from flask.testing import FlaskClient
from sqlalchemy import delete, select, text

from registry.db import Database, utcnow
from registry.symbolication.misses import forget_unstored, note_misses, note_reports_naming, reports_naming
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


def test_the_reports_naming_a_build_id_are_its_userspace_stacks_frames_in_every_thread_either_case(
    client: FlaskClient, database: Database, make_token: Callable[..., str],
) -> None:
    """After DWARF replaced a build's symbol table, the reports to symbolicate again: the
    userspace reports whose stack names the build-id, in the crashing thread's frames or
    another thread's, spelled in either case; not one naming another build, nor a kernel
    report whose log happens to print it. On PostgreSQL the statement is one the build-ids'
    index serves, as a partial index must be proved: by the statement's own text."""
    build_id, other = "c0ffee" * 6 + "abcd", "ab" * 20
    token = make_token("report")

    def reported(**changes: object) -> str:
        report = crash_report(**changes)
        assert client.post("/api/v1/reports", json=report, headers=auth(token)).status_code == 201
        return report["report_id"]

    def frame(named: str) -> dict[str, str]:
        return {"function": "serve", "module": "/opt/app/bin/store", "offset": "0x132f", "build_id": named}

    crashing = reported(source="userspace", console_log=None, stack=stack(frames=[frame(build_id)]))
    in_a_thread = reported(source="userspace", console_log=None, stack=stack(
        frames=[frame(other)], threads=[{"tid": 7, "frames": [frame(build_id)]}]))
    upper = reported(source="userspace", console_log=None, stack=stack(frames=[frame(build_id.upper())]))
    reported(source="userspace", console_log=None, stack=stack(frames=[frame(other)]))
    reported(console_log=f"{build_id}\n" + crash_report()["console_log"])

    with database.session() as session:  # the misses ingest noted (no symbols for either build)
        session.execute(delete(SymbolMiss))
    note_reports_naming(database, build_id)
    assert notes(database) == {(build_id, crashing), (build_id, in_a_thread), (build_id, upper)}

    if database.engine.dialect.name == "postgresql":
        statement = reports_naming("postgresql", build_id)
        with database.session() as session:
            session.execute(text("SET LOCAL enable_seqscan = off"))
            plan = "\n".join(session.scalars(text("EXPLAIN " + str(statement.compile(
                dialect=session.get_bind().dialect, compile_kwargs={"literal_binds": True})))))
        assert "ix_reports_build_ids" in plan, plan
