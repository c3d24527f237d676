"""The fleet's uptime histogram is cached per engine, never per URL (a database emptied and
refilled under one URL, as between tests or after a restore, must not answer stale data)."""

from __future__ import annotations

from datetime import date

from registry.db import Database
from registry.epidemiology.service import Fleet
from testkit.reports import crash_report
from tests.support.http import auth

WINDOW = (date(2026, 11, 1), date(2026, 11, 30))
HOUR = 3600


def test_uptime_histogram_is_cached_per_engine(client, make_token, database, db_url) -> None:
    token = make_token("report")
    client.post("/api/v1/reports", json=crash_report(uptime_s=5 * HOUR), headers=auth(token))
    with database.session() as session:
        assert Fleet(session, WINDOW).uptime_hours() == {5: 1}

    client.post("/api/v1/reports", json=crash_report(uptime_s=9 * HOUR), headers=auth(token))
    with database.session() as session:  # same engine: the cached histogram (slow to move)
        assert Fleet(session, WINDOW).uptime_hours() == {5: 1}
    other = Database(db_url)  # another engine on the same URL reads the database as it is
    try:
        with other.session() as session:
            assert Fleet(session, WINDOW).uptime_hours() == {5: 1, 9: 1}
    finally:
        other.dispose()
