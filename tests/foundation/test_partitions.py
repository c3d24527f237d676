"""events and reports partitioned on PostgreSQL (migration 0034, docs/partitioning.md): a
populated registry converted with its data, ids, keys and references intact; `crashreg db
upgrade` run while reporters post over HTTP loses and doubles nothing; partitions are kept
ahead of the ids. SQLite's tables stay plain (and the same ingest code serves both)."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
import requests
from alembic.script import ScriptDirectory

from registry.auth.tokens import create_token
from registry.config import DumpStoreSettings, Settings, SymbolSettings
from registry.core.events import hosts_marked, reports_keyed
from registry.db import Database
from registry.migrate import MIGRATIONS_DIR, upgrade
from registry.partitions import (
    AHEAD,
    Partition,
    maintain,
    missing_ranges,
    partitions,
    partitions_ahead,
    width_of,
)
from registry.rollups.fold import fold
from testkit.reports import crash_report
from tests.support.cli import crashreg
from tests.support.databases import BACKENDS, create_postgres_database, drop_postgres_database
from tests.support.http import auth, serving
from tests.support.migration_locks import alembic_config
from tests.support.rollups import scanned, stored

BEFORE = "0033_rollups"
POSTERS = 4

postgres_only = pytest.mark.skipif("postgresql" not in BACKENDS, reason="partitions are PostgreSQL's")


@pytest.fixture
def before_partitions() -> Iterator[str]:
    url = create_postgres_database()
    upgrade(url, BEFORE)
    yield url
    drop_postgres_database(url)


@contextmanager
def registry(url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The registry on a real HTTP socket over `url`, and a reporter's token."""
    settings = Settings(database_url=url, public_url="http://crashreg.test",
                        dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")),
                        symbols=SymbolSettings(cache_dir=str(tmp_path / "symbols")))
    with serving(settings) as (base, database):
        with database.session() as session:
            token, _ = create_token(session, f"reporter-{uuid.uuid4().hex[:6]}", "report", "agent")
        yield base, token


def post(base: str, token: str, report: dict[str, Any]) -> requests.Response:
    return requests.post(f"{base}/api/v1/reports", json=report, headers=auth(token), timeout=120)


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as connection:
        return connection.execute(query).fetchall()


def the_registry(url: str) -> dict[str, Any]:
    return {
        "events": rows(url, "SELECT id, host_id, boot_key, signature_id FROM events ORDER BY id"),
        "reports": rows(url, "SELECT id, report_id, event_id, answer FROM reports ORDER BY id"),
        "counts": rows(url, "SELECT signature_id, sum(events) FROM signature_counters GROUP BY 1 ORDER BY 1"),
    }


@postgres_only
def test_a_populated_registry_is_converted_whole(before_partitions: str, tmp_path: Path) -> None:
    url = before_partitions
    with registry(url, tmp_path) as (base, token):
        first = [crash_report(host={"hostname": f"gpu-{n % 7}"}) for n in range(40)]
        answers = [post(base, token, report) for report in first]
        assert {answer.status_code for answer in answers} == {201}
    before = the_registry(url)
    index_oids = rows(url, "SELECT indexrelid::int FROM pg_index WHERE indrelid = 'events'::regclass "
                           "AND indexrelid <> 'uq_events_host_id_boot_key'::regclass ORDER BY 1")

    assert crashreg(url, "db", "upgrade").returncode == 0

    assert the_registry(url) == before
    kinds = rows(url, "SELECT relkind FROM pg_class WHERE relname IN ('events', 'reports')")
    assert kinds == [("p",), ("p",)]
    # the old table is the first partition, its indexes attached as they were (none rebuilt),
    # with the natural key's (not unique) built concurrently beside them
    after = rows(url, "SELECT indexrelid::int, indexrelid::regclass::text FROM pg_index "
                      "WHERE indrelid = 'events_p0000'::regclass ORDER BY 1")
    assert [(oid,) for oid, _ in after if (oid,) in index_oids] == index_oids
    assert [name for oid, name in after if (oid,) not in index_oids] == ["events_p0000_ix_events_host_boot"]
    assert rows(url, "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND NOT convalidated "
                     "AND conparentid = 0") == [(0,)]
    assert rows(url, "SELECT count(*) FROM event_keys") == [(len(before["events"]),)]
    assert rows(url, "SELECT count(*) FROM report_keys") == [(len(before["reports"]),)]
    database = Database(url)
    with database.engine.connect() as connection:
        assert partitions_ahead(connection) == {"events": AHEAD, "reports": AHEAD}
    database.dispose()

    with registry(url, tmp_path) as (base, token):
        replay = post(base, token, first[0])
        assert replay.status_code == 200
        assert replay.json() == answers[0].json() | {"duplicate": True}
        # the same crash from a second source joins its event
        second = post(base, token, first[1] | {"report_id": f"r-{uuid.uuid4().hex}", "source": "dpu"})
        assert second.status_code == 201
        assert second.json()["event_id"] == answers[1].json()["event_id"]
        fresh = post(base, token, crash_report())
        assert fresh.status_code == 201
    assert int(fresh.json()["event_id"]) > max(event[0] for event in before["events"])
    assert len(the_registry(url)["events"]) == len(before["events"]) + 1
    # the rollups' triggers moved to the partitioned table: its rows in any partition are counted
    database = Database(url)
    fold(database)
    with database.session() as session:
        assert stored(session) == scanned(session)
    database.dispose()


@postgres_only
def test_the_upgrade_while_reporters_post_loses_and_doubles_nothing(
    before_partitions: str, tmp_path: Path
) -> None:
    url = before_partitions
    acknowledged: dict[str, str] = {}  # report_id -> event_id
    failures: list[str] = []
    stop = threading.Event()

    def reporter(base: str, token: str, number: int) -> None:
        sent = 0
        while not stop.is_set() or sent < 20:
            report = crash_report(host={"hostname": f"gpu-{number}-{sent % 5}"})
            for attempt in (report, report, report | {"report_id": f"r-{uuid.uuid4().hex}", "source": "dpu"}):
                response = post(base, token, attempt)
                if response.status_code not in (200, 201):
                    failures.append(f"{response.status_code} {response.text[:200]}")
                    continue
                event_id = response.json()["event_id"]
                if acknowledged.setdefault(attempt["report_id"], event_id) != event_id:
                    failures.append(f"{attempt['report_id']} answered two events")
            sent += 1

    with registry(url, tmp_path) as (base, token):
        threads = [threading.Thread(target=reporter, args=(base, token, n)) for n in range(POSTERS)]
        for thread in threads:
            thread.start()
        upgraded = crashreg(url, "db", "upgrade")
        stop.set()
        for thread in threads:
            thread.join()

    assert upgraded.returncode == 0, upgraded.stderr
    assert failures == []
    stored = dict(rows(url, "SELECT report_id, event_id::text FROM reports"))
    assert stored == acknowledged  # every acknowledged report, once, with the event it was told
    # each crash (its first report, a resend, its DPU report) is one event
    assert rows(url, "SELECT count(*) FROM events") == [(len(acknowledged) // 2,)]
    assert rows(url, "SELECT count(*) FROM (SELECT host_id, boot_key FROM events GROUP BY 1, 2 "
                     "HAVING count(*) > 1) AS doubled") == [(0,)]
    assert rows(url, "SELECT count(*) FROM event_keys") == rows(url, "SELECT count(*) FROM events")


def migration(url: str, revision: str) -> ModuleType:
    return ScriptDirectory.from_config(alembic_config(MIGRATIONS_DIR, url)).get_revision(revision).module


def waits_on(url: str, table: str) -> bool:
    waiting = f"SELECT count(*) FROM pg_locks WHERE relation = '{table}'::regclass AND NOT granted"
    return rows(url, waiting) != [(0,)]


@postgres_only
def test_a_writer_that_read_events_is_not_deadlocked_by_reports_conversion(before_partitions: str) -> None:
    """Ingest's `store` reads events, then inserts into it; reports' conversion re-points
    reports' key into events, which takes events' locks. Taken with reports' at the start (the
    writer holding events: the conversion waits, and the writer goes first), not midway (the
    conversion holding events against the insert while it waits for the writer's read: a
    deadlock, the writer its victim when its own check runs first, as here)."""
    url = before_partitions
    steps = migration(url, "0034_partitions")
    engine = Database(url).engine.execution_options(isolation_level="AUTOCOMMIT")
    failures: list[BaseException] = []
    with engine.connect() as migrating, psycopg.connect(url) as writer:
        steps.partition(migrating, steps.EVENTS, steps.prepare(migrating, steps.EVENTS))
        steps.validate_references(migrating, "events")
        bound = steps.prepare(migrating, steps.REPORTS)
        writer.execute("SELECT count(*) FROM events")  # the read, in the writer's transaction

        def convert_reports() -> None:
            try:
                steps.partition(migrating, steps.REPORTS, bound)
            except BaseException as error:  # asserted below
                failures.append(error)

        converting = threading.Thread(target=convert_reports)
        converting.start()
        waited = False
        while not waited and converting.is_alive():
            waited = waits_on(url, "events")
        writer.execute("SET LOCAL deadlock_timeout = '1ms'")
        writer.execute("LOCK TABLE events IN ROW EXCLUSIVE MODE")  # the insert's lock
        writer.commit()
        converting.join()
    engine.dispose()
    assert waited, "the conversion never waited for the writer's read of events"
    assert failures == []
    assert rows(url, "SELECT relkind FROM pg_class WHERE relname = 'reports'") == [("p",)]


@postgres_only
def test_report_ids_are_read_from_their_keys_once_reports_are_partitioned(
    before_partitions: str, tmp_path: Path
) -> None:
    """A lookup by report_id reads report_keys (one index, not one per partition) once 0034 has
    partitioned reports; before, `reports` itself. A resend of a report stored before the
    conversion is answered from its backfilled key."""
    url = before_partitions
    report = crash_report(host={"hostname": "gpu-0"})
    with registry(url, tmp_path) as (base, token):
        first = post(base, token, report)
        assert first.status_code == 201
    database = Database(url)
    try:
        with database.engine.connect() as connection:
            assert (reports_keyed(connection), hosts_marked(connection)) == (False, False)
        upgrade(url)
        with database.engine.connect() as connection:
            # asked once per connection: it stays right
            assert (reports_keyed(connection), hosts_marked(connection)) == (False, False)
        database.engine.dispose()
        with database.engine.connect() as connection:
            assert (reports_keyed(connection), hosts_marked(connection)) == (True, True)
    finally:
        database.dispose()
    new = crash_report(host={"hostname": "gpu-1"})
    with registry(url, tmp_path) as (base, token):
        again = post(base, token, report)
        answers = [post(base, token, new) for _ in range(2)]
    assert again.status_code == 200 and again.json()["event_id"] == first.json()["event_id"]
    assert [answer.status_code for answer in answers] == [201, 200]
    assert answers[0].json()["event_id"] == answers[1].json()["event_id"]


# A report's natural-key reads, as a worker's prepared statement runs them: its generic plan.
NATURAL_KEY_READS = (
    "SELECT id FROM reports WHERE report_id = $1", "SELECT id FROM events WHERE host_id = $1",
)


def generic_plans(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET plan_cache_mode = force_generic_plan")
        plans = []
        for number, query in enumerate(NATURAL_KEY_READS):
            connection.execute(f"PREPARE read_{number} AS {query}")
            plans += [line for line, in connection.execute(f"EXPLAIN EXECUTE read_{number}(NULL)")]
        return "\n".join(plans)


@postgres_only
@pytest.mark.parametrize("populated", [False, True], ids=["fresh", "populated"])
def test_natural_key_reads_are_planned_on_the_indexes_as_partitions_fill(
    before_partitions: str, tmp_path: Path, populated: bool
) -> None:
    """A partition analysed while empty is planned as empty: the generic plan a worker cached
    scanned it whole for every report as it filled (each report of a storm slower than the last)."""
    url = before_partitions
    with registry(url, tmp_path) as (base, token):
        for number in range(12 if populated else 0):
            assert post(base, token, crash_report(host={"hostname": f"gpu-{number}"})).status_code == 201
    upgrade(url)
    with registry(url, tmp_path) as (base, token):
        for number in range(12):
            assert post(base, token, crash_report(host={"hostname": f"new-{number}"})).status_code == 201

    plans = generic_plans(url)
    scanned_whole = set(re.findall(r"Seq Scan on (\w+)", plans))
    # the first partition of a populated registry holds its rows and was analysed as it was
    assert scanned_whole <= ({"events_p0000", "reports_p0000"} if populated else set()), plans
    assert "Index" in plans


@postgres_only
def test_partitions_are_kept_ahead_of_the_ids(before_partitions: str) -> None:
    url = before_partitions
    upgrade(url)
    database = Database(url)
    try:
        with database.engine.connect() as connection:
            events = [p for p in partitions(connection) if p.table == "events"]
        top = events[-1].upper
        # the ids handed out up to the last partition's first id: one ahead is left
        rows(url, f"SELECT setval('events_id_seq', {events[-1].lower})")
        with database.engine.connect() as connection:
            assert partitions_ahead(connection)["events"] == 0
        made = maintain(database.engine)
        with database.engine.connect() as connection:
            assert partitions_ahead(connection)["events"] == AHEAD
            after = [p for p in partitions(connection) if p.table == "events"]
        assert len(made) == AHEAD and after[-1].lower == top + (AHEAD - 1) * (top - events[-1].lower)
        assert maintain(database.engine) == []  # nothing more while the ids stand still
    finally:
        database.dispose()
    listed = crashreg(url, "db", "partitions")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[1] for line in listed.stdout.splitlines()] == [p.name for p in after] + [
        p.name for p in partitions_of(url, "reports")]
    assert f"events: {AHEAD} empty partition(s) ahead" in listed.stderr


@postgres_only
def test_reports_past_the_last_partition_are_stored_once_and_the_command_says_so(
    before_partitions: str, tmp_path: Path
) -> None:
    """No scheduler for a while: the ids run past the last partition. Reporters retry a 500
    forever, and every report was refused until an operator noticed; ingest makes the
    partitions instead, and `db partitions` (exit 1) and the gauge say what happened."""
    url = before_partitions
    upgrade(url)
    for table in ("events", "reports"):
        top = partitions_of(url, table)[-1].upper
        rows(url, f"SELECT setval('{table}_id_seq', {top - 3})")  # two ids left in the last one
    listed = crashreg(url, "db", "partitions")
    assert listed.returncode == 0 and "events: 0 empty partition(s) ahead, 2 id(s) left" in listed.stderr
    with registry(url, tmp_path) as (base, token):
        reports = [crash_report(report_id=f"past-{n}") for n in range(5)]
        answers = [post(base, token, report) for report in reports]
        again = post(base, token, reports[-1])
        metrics = requests.get(f"{base}/metrics", timeout=60).text
    assert [a.status_code for a in answers] == [201] * 5 and again.status_code == 200
    assert rows(url, "SELECT count(*) FROM reports WHERE report_id LIKE 'past-%'") == [(5,)]
    assert re.search(r'crashreg_partition_ids_left\{table="events"\} [1-9]', metrics)
    rows(url, f"SELECT setval('events_id_seq', {partitions_of(url, 'events')[-1].upper})")
    exhausted = crashreg(url, "db", "partitions")
    assert exhausted.returncode == 1 and "the next id has no partition" in exhausted.stderr


def partitions_of(url: str, table: str) -> list[Any]:
    database = Database(url)
    try:
        with database.engine.connect() as connection:
            return [p for p in partitions(connection) if p.table == table]
    finally:
        database.dispose()


def test_sqlite_keeps_plain_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    upgrade(url)
    database = Database(url)
    try:
        assert maintain(database.engine) == []
        refused = crashreg(url, "db", "partitions")
        assert refused.returncode == 1 and "SQLite's tables are not partitioned" in refused.stderr
        with database.engine.connect() as connection:
            assert partitions(connection) == []
            names = {row[0] for row in connection.exec_driver_sql("SELECT name FROM sqlite_master")}
        assert "event_keys" not in names and "uq_events_host_id_boot_key" not in names
        assert "sqlite_autoindex_events_1" in names  # the natural key, unique as it always was
    finally:
        database.dispose()


@pytest.mark.parametrize(("upcoming", "expected"), [
    (1_500_000, []),  # in p0 ... with two ahead of it
    (2_000_001, [(4_000_000, 5_000_000)]),  # into the first ahead: one more
    (3_999_999, [(4_000_000, 5_000_000), (5_000_000, 6_000_000)]),
    (6_500_000, [(4_000_000, 5_000_000), (5_000_000, 6_000_000), (6_000_000, 7_000_000),
                 (7_000_000, 8_000_000), (8_000_000, 9_000_000)]),  # overran: its own and two more
])
def test_missing_ranges_keep_two_ahead_of_the_next_id(upcoming: int, expected: list[tuple[int, int]]) -> None:
    made = [Partition("events", "events_p0000", None, 2_000_000),
            Partition("events", "events_p0002", 2_000_000, 3_000_000),
            Partition("events", "events_p0003", 3_000_000, 4_000_000)]
    assert missing_ranges(made, upcoming, width_of(made)) == expected
