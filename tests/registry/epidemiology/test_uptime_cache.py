"""The fleet's uptime histogram is cached per engine, never per URL (a database emptied and
refilled under one URL, as between tests or after a restore, must not answer stale data); a
stored sample's uptimes per engine and sample, read again once the refresh replaced it; uptimes
known to be ascending are not sorted again."""

from __future__ import annotations

import statistics
from datetime import date, timedelta

import pytest
from sqlalchemy import text

from registry.db import Database, is_postgresql, utcnow
from registry.epidemiology import queries
from registry.epidemiology.service import Fleet, store_samples
from registry.epidemiology.uptime import Ascending, ascending, median, uptime_profile, with_added
from registry.rollups.fold import fold
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


def test_a_stored_samples_uptimes_are_read_once_and_again_after_the_refresh_replaces_it(
    client, make_token, database
) -> None:  # type: ignore[no-untyped-def]
    token = make_token("report")
    for hours in (3, 1, 2):
        client.post("/api/v1/reports", json=crash_report(uptime_s=hours * HOUR), headers=auth(token))
    fold(database)
    with database.session() as session:
        if not is_postgresql(session):
            pytest.skip("samples are stored on PostgreSQL")
        [sid] = store_samples(session, utcnow(), settle=timedelta(0), least=1)
    with database.session() as session:
        stored = queries.stored_sample(session, [sid])
        assert list(queries.stored_uptimes(session, stored)) == [HOUR, 2 * HOUR, 3 * HOUR]
        # kept: what the row says now is not read again while the sample is the same one
        session.execute(text("UPDATE epidemiology_samples SET uptimes = '{7}'"))
        assert list(queries.stored_uptimes(session, stored)) == [HOUR, 2 * HOUR, 3 * HOUR]
        session.rollback()
    client.post("/api/v1/reports", json=crash_report(uptime_s=4 * HOUR), headers=auth(token))
    fold(database)
    with database.session() as session:  # the refresh stores it anew: read anew
        assert store_samples(session, utcnow(), settle=timedelta(0), least=1) == [sid]
    with database.session() as session:
        stored = queries.stored_sample(session, [sid])
        assert list(queries.stored_uptimes(session, stored)) == [HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR]
        sample = queries.signature_sample(session, [sid])
        assert list(sample.uptimes_s) == [HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR]


def test_ascending_uptimes_are_neither_sorted_nor_copied_again() -> None:
    ordered = Ascending([-5.0, 1.0, 3.0, 3.0, 9.0])
    assert list(ascending(ordered)) == [1.0, 3.0, 3.0, 9.0]
    positive = Ascending([1.0, 2.0])
    assert ascending(positive) is positive
    assert with_added(positive, []) is positive
    assert list(with_added(positive, [1.5, 0.5])) == [0.5, 1.0, 1.5, 2.0] and list(positive) == [1.0, 2.0]
    many = Ascending(float(i) for i in range(0, 200, 2))
    assert list(with_added(many, [float(i) for i in range(1, 200, 2)])) == [float(i) for i in range(200)]
    for values in ([4.0, 1.0, 2.0], [4.0, 1.0, 2.0, 8.0], [7.0]):
        ordered_values = sorted(values)
        assert median(ordered_values) == statistics.median(values)
        assert uptime_profile(Ascending(ordered_values), lambda low, high: (0, 0, 0)) == uptime_profile(
            values, lambda low, high: (0, 0, 0))
