"""CRASHREG_READ_DATABASE_URL against a real streaming replica (tests/support/replica.py): pages,
Grafana's door and the epidemiology reads on the replica; writes and read-your-writes on the
primary; lag and a stopped replica send reads to the primary with no 5xx, and they come back.

What the replica serves is told apart from the primary's by pausing its replay: a write made
on the primary then is missing from the replica's answers only. The lag bound is driven by a
manual clock (the bound is time; the WAL positions are real), so no test waits for time.
PostgreSQL only: SQLite has no replica (the config refuses one; tests/foundation).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select

from dashboards import build_dashboards
from registry.app import create_app
from registry.auth.tokens import create_token
from registry.config import DumpStoreSettings, ReadReplicaSettings, Settings
from registry.db import REPLICA_APPLICATION_NAME, Database, utcnow
from registry.epidemiology.models import EpidemiologyVerdict
from registry.epidemiology.service import store_samples
from registry.migrate import upgrade
from registry.rollups.fold import fold
from sync.epidemiology.jobs import epidemiology_refresh
from sync.grafana.datasource import datasource_spec, grafana_db_url
from sync.grafana.role import ensure_readonly_role
from sync.scheduler import JobContext
from testkit.grafana_sql import TimeRange, Variable, expand_target
from testkit.pages import csrf_from, login
from tests.support.capture import post_capture, storm_report
from tests.support.databases import truncate_all
from tests.support.http import auth
from tests.support.rca import seed
from tests.support.replica import ReplicaPair, binaries_missing, replica_pair

pytestmark = pytest.mark.skipif(binaries_missing() is not None, reason=str(binaries_missing()))

MAX_LAG_S = 30
CRASHES = [("gpu-b1", "6.8.0-52", "us-east"), ("gpu-b2", "6.8.0-58", "eu-west")]


class Clock:
    """The monotonic clock the replica's checks read, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def past_the_bound(self) -> None:
        self.now += MAX_LAG_S + 1


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicaPair]:
    with replica_pair() as made:
        made.primary.execute("CREATE DATABASE crashreg")
        upgrade(made.primary.url("crashreg"))
        yield made


@dataclass
class Registry:
    app: Flask
    database: Database
    settings: Settings
    pair: ReplicaPair
    clock: Clock

    def client(self) -> FlaskClient:
        return self.app.test_client()

    def token(self, scope: str) -> str:
        with self.database.session() as session:
            return create_token(session, f"{scope}-{self.clock.now}-{id(session)}", scope, "human")[0]

    def state(self) -> dict[str, Any]:
        answer = self.client().get("/readyz")
        assert answer.status_code == 200, answer.json
        return answer.json["read_replica"]

    def caught_up(self) -> None:
        """A check samples the primary's position, the replica replays past it, and the bound
        passes: the replica is in use."""
        self.state()
        self.pair.wait_replayed()
        self.clock.past_the_bound()
        assert self.state()["state"] == "replica"


def registry_on(pair: ReplicaPair, tmp_path: Path, check_interval_s: float = 0) -> Registry:
    clock = Clock()
    settings = Settings(
        database_url=pair.primary.url("crashreg"),
        public_url="http://crashreg.test",
        dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")),
        read_replica=ReadReplicaSettings(pair.replica.url("crashreg"), MAX_LAG_S, check_interval_s),
    )
    database = Database(settings.database_url, settings.read_replica, clock=clock)
    app = create_app(settings, database)
    app.config["TESTING"] = True
    return Registry(app, database, settings, pair, clock)


@pytest.fixture
def registry(pair: ReplicaPair, tmp_path: Path) -> Iterator[Registry]:
    truncate_all(pair.primary.url("crashreg"))
    made = registry_on(pair, tmp_path)
    yield made
    made.database.dispose()
    pair.resume_replay()


def test_pages_read_from_the_replica_until_it_lags_then_from_the_primary_then_from_it_again(
    registry: Registry,
) -> None:
    client, report = registry.client(), registry.token("report")
    seed(client, registry.database, report, "ext4_evict_inode", CRASHES)
    login(client, registry.token("read"))
    registry.caught_up()
    registry.pair.pause_replay()
    seed(client, registry.database, report, "tcp_sendmsg_locked", [("net-1", "6.8.0-52", "us-east")])

    page = client.get("/signatures")
    assert page.status_code == 200
    assert "ext4_evict_inode" in page.text and "tcp_sendmsg_locked" not in page.text  # the replica's view
    readers = registry.pair.replica.execute(
        f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{REPLICA_APPLICATION_NAME}'"
        " AND datname = 'crashreg'", "crashreg")
    assert readers[0][0] >= 1

    registry.clock.past_the_bound()  # the write is now older than the bound, still not replayed
    page = client.get("/signatures")
    assert page.status_code == 200 and "tcp_sendmsg_locked" in page.text  # from the primary
    state = registry.state()
    assert (state["state"], state["in_use"]) == ("lagging", False) and state["lag_bytes"] > 0
    metrics = client.get("/metrics").text
    assert 'crashreg_read_replica_state{state="lagging"} 1.0' in metrics
    assert 'crashreg_read_replica_state{state="replica"} 0.0' in metrics

    registry.pair.resume_replay()
    registry.caught_up()  # back on the replica, which now has the write
    assert "tcp_sendmsg_locked" in client.get("/signatures").text
    assert 'crashreg_read_replica_state{state="replica"} 1.0' in client.get("/metrics").text


def test_a_browser_reads_its_own_write_while_others_read_the_replica(registry: Registry) -> None:
    reporter = registry.token("report")
    api = registry.client()
    event_id = api.post("/api/v1/reports", json=storm_report("pinned_bug"), headers=auth(reporter)).json[
        "event_id"]
    capture = post_capture(api, reporter, event_id, bytes=1 << 30).json["id"]
    triager, watcher = registry.client(), registry.client()
    login(triager, registry.token("triage"))
    login(watcher, registry.token("read"))
    registry.caught_up()
    registry.pair.pause_replay()

    page = triager.get(f"/events/{event_id}").text
    pinned = triager.post(f"/captures/{capture}/pin",
                          data={"csrf_token": csrf_from(page), "note": "RCA in progress"})
    assert pinned.status_code == 302  # written on the primary, the replica paused
    assert "pinned by" in triager.get(f"/events/{event_id}").text  # its own write: from the primary
    assert "pinned by" not in watcher.get(f"/events/{event_id}").text  # the replica, within the bound

    registry.pair.resume_replay()
    registry.pair.wait_replayed()
    assert "pinned by" in triager.get(f"/events/{event_id}").text  # replayed: the replica again
    assert "pinned by" in watcher.get(f"/events/{event_id}").text
    assert registry.state()["in_use"] is True


def test_api_reads_and_writes_stay_on_the_primary(registry: Registry) -> None:
    client, report, read = registry.client(), registry.token("report"), registry.token("read")
    registry.caught_up()
    registry.pair.pause_replay()
    seeded = seed(client, registry.database, report, "ext4_evict_inode", CRASHES)
    listed = client.get("/api/v1/signatures", headers=auth(read)).json["signatures"]
    assert [s["id"] for s in listed] == [seeded.signature_id]
    assert registry.pair.replica.execute("SELECT count(*) FROM events", "crashreg")[0][0] == 0


def test_a_stopped_replica_degrades_to_the_primary_without_a_5xx_and_comes_back(
    registry: Registry, pair: ReplicaPair, tmp_path: Path
) -> None:
    client = registry.client()
    seed(client, registry.database, registry.token("report"), "ext4_evict_inode", CRASHES)
    login(client, registry.token("read"))
    # a registry that checks seldom: its pooled replica connection dies under a page
    seldom = registry_on(pair, tmp_path, check_interval_s=3600)
    seldom_client = seldom.client()
    login(seldom_client, seldom.token("read"))
    registry.caught_up()
    pair.wait_replayed()
    assert "ext4_evict_inode" in seldom_client.get("/signatures").text  # first check: in use
    assert seldom.state()["state"] == "replica"
    pair.replica.stop()
    try:
        for page in ("/signatures", "/unfingerprinted"):
            answer = client.get(page)
            assert answer.status_code == 200, page
        assert "ext4_evict_inode" in client.get("/signatures").text
        state = registry.state()
        assert (state["state"], state["in_use"]) == ("unreachable", False)
        again = seldom_client.get("/signatures")  # no check due: the read fails, the page is served again
        assert again.status_code == 200 and "ext4_evict_inode" in again.text
        assert seldom.state()["state"] == "unreachable"
    finally:
        pair.replica.start()
        seldom.database.dispose()
    pair.wait_streaming()
    registry.caught_up()
    assert client.get("/signatures").status_code == 200


def test_grafana_reads_the_replica_through_its_read_only_role(registry: Registry) -> None:
    seeded = seed(registry.client(), registry.database, registry.token("report"), "ext4_evict_inode", CRASHES)
    door = grafana_db_url(registry.settings, registry.database)
    spec = datasource_spec(registry.settings, registry.database)
    assert spec.body["url"] == f"127.0.0.1:{registry.pair.replica.port}"
    assert spec.body["jsonData"]["database"] == "crashreg"
    assert spec.body["user"] == "crashreg_grafana_crashreg"  # the primary database's own role
    report = ensure_readonly_role(registry.database.engine, door)  # made on the primary
    assert report.ok, report.problems
    registry.pair.wait_replayed()
    with psycopg.connect(door, autocommit=True) as grafana:
        assert grafana.execute("SELECT pg_is_in_recovery(), current_user").fetchone() == (
            True, "crashreg_grafana_crashreg")
        ran = 0
        for board in build_dashboards("postgresql", "http://crashreg.test"):
            variables = {v["name"]: Variable.from_model(v, str(seeded.signature_id))
                         for v in board["templating"]["list"] if v["name"] == "signature"}
            for panel in board["panels"]:
                for target in panel["targets"]:  # every panel's query, as Grafana expands it
                    grafana.execute(expand_target(target, variables, TimeRange.last(365))).fetchall()
                    ran += 1
        assert ran > 0
        assert grafana.execute("SELECT count(*) FROM rpt_signatures").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            grafana.execute("SELECT * FROM api_tokens")


def test_epidemiology_reads_the_replica_and_the_refresh_writes_the_primary(registry: Registry) -> None:
    client, read, report = registry.client(), registry.token("read"), registry.token("report")
    seeded = seed(client, registry.database, report, "ext4_evict_inode", CRASHES)
    fold(registry.database)  # their changes folded into the rollups (the scheduler's every 30 s)
    with registry.database.session() as session:  # its events so far kept as a stored sample
        assert store_samples(session, utcnow(), settle=timedelta(0), least=1) == [int(seeded.signature_id)]
    login(client, read)
    registry.caught_up()
    registry.pair.pause_replay()
    seed(client, registry.database, report, "ext4_evict_inode", [("gpu-b3", "6.8.0-52", "us-east")])
    logged = registry.pair.replica.log_size()
    path = f"/api/v1/signatures/{seeded.signature_id}/epidemiology"
    assert client.get(path, headers=auth(read)).json["events"] == 2  # the replica's, before the third
    assert client.get("/api/v1/epidemiology/hosts", headers=auth(read)).status_code == 200
    page = client.get(f"/signatures/{seeded.signature_id}")  # its verdict part too
    assert page.status_code == 200 and "gpu-b3" not in page.text
    ran = registry.pair.replica.statements_since(logged, REPLICA_APPLICATION_NAME)
    assert any("epidemiology_suspect_hosts" in statement for statement in ran), ran
    assert registry.state()["in_use"] is True  # no read failed on the replica

    epidemiology_refresh(JobContext(registry.settings, registry.database))
    with registry.database.session() as session:
        stored = session.scalars(select(EpidemiologyVerdict)).all()
    assert [str(v.signature_id) for v in stored] == [seeded.signature_id]  # written on the primary...
    assert stored[0].analysis["events"] == 2  # ...analysed from the replica's two events

    registry.clock.past_the_bound()  # lagging: the primary's three
    on_primary = client.get(path, headers=auth(read)).json
    assert on_primary["events"] == 3
    registry.pair.resume_replay()
    registry.caught_up()  # the replica's analysis (no temporary table) is the primary's
    assert client.get(path, headers=auth(read)).json == on_primary
