"""The engine never fails a report (Socorro's signature generator's rule): when fingerprinting
raises, the report is stored with its log and no signature, answered 201 as an unknown bug,
counted (/metrics), listed (/unfingerprinted), and `crashreg signatures rebuild` with a working
engine fingerprints it. The failing engine is the app's wiring's, the seam ingest calls."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import select

from registry.config import Settings
from registry.core.events import Event, Report
from registry.db import Database
from registry.signatures.identify import identify
from testkit.pages import login
from testkit.reports import crash_report
from tests.support.cli import crashreg
from tests.support.engines import app_with_a_failing_engine
from tests.support.http import auth


@pytest.fixture
def failing(settings: Settings, database: Database):  # type: ignore[no-untyped-def]
    """The registry with an engine that fails on every report on its wiring."""
    return app_with_a_failing_engine(settings, database).test_client()


def gauge(client: Any, name: str, labels: str = "") -> float:
    metrics = client.get("/metrics").get_data(as_text=True)
    found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_report_the_engine_fails_on_is_stored_answered_counted_listed_and_rebuilt(
    db_url: str, failing: Any, client: Any, database: Database, make_token: Any
) -> None:
    reporter, reader = make_token("report"), make_token("read")
    counted = 'crashreg_reports_unfingerprinted_total{source="crash_kernel"}'
    before = gauge(failing, counted)
    report = crash_report()
    first = failing.post("/api/v1/reports", json=report, headers=auth(reporter))
    assert first.status_code == 201, first.get_data(as_text=True)
    assert (first.json["signature"], first.json["known"]) == (None, False)
    assert first.json["capture"]["action"] == "full"
    assert "signature engine failed" in first.json["capture"]["reason"]
    replay = failing.post("/api/v1/reports", json=report, headers=auth(reporter))
    assert replay.status_code == 200 and replay.json == first.json | {"duplicate": True}
    assert gauge(failing, counted) == before + 1  # the replay is not a second failure
    assert gauge(failing, "crashreg_events_unfingerprinted") == 1

    event_id = int(first.json["event_id"])
    with database.session() as session:
        event = session.get_one(Event, event_id)
        assert event.signature_id is None and event.fingerprint_error is not None
        assert event.fingerprint_error.startswith("IndexError")
        stored_log = session.scalar(select(Report.console_log).where(Report.event_id == event_id))
    assert stored_log == report["console_log"]

    shown = client.get(f"/api/v1/events/{event_id}", headers=auth(reader)).json
    assert shown["signature_id"] is None and shown["fingerprint_error"].startswith("IndexError")
    login(client, reader)
    page = client.get("/unfingerprinted").get_data(as_text=True)
    assert f'href="/events/{event_id}"' in page and "IndexError" in page

    rebuilt = crashreg(db_url, "signatures", "rebuild")  # the registry's own engine, which works
    assert rebuilt.returncode == 0, rebuilt.stderr
    with database.session() as session:
        event = session.get_one(Event, event_id)
        assert event.signature_id is not None and event.fingerprint_error is None
        assert event.fingerprint == identify(report["console_log"], None).fingerprint  # type: ignore[union-attr]
    assert client.get(f"/api/v1/events/{event_id}", headers=auth(reader)).json["fingerprint_error"] is None
    assert gauge(failing, "crashreg_events_unfingerprinted") == 0
    assert "has fingerprinted every report" in client.get("/unfingerprinted").get_data(as_text=True)
    again = client.post("/api/v1/reports", json=crash_report(), headers=auth(reporter))
    assert again.status_code == 201 and again.json["known"] is True  # the rebuilt signature
