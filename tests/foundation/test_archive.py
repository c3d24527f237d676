"""Archiving old partitions (docs/partitioning.md, "Archive"): a registry of several small
partitions served over HTTP, its old partitions written to the dump store, read back and
dropped, with every count, rollup and page as it was; later reports count on; a rebuild does
not count the archived history away; an archive can be loaded back for reading. Console trims
and spent capture slots go with their partitions and come back with them; the natural keys stay,
so a resend of an archived report is answered as a duplicate, never stored again. The history
figures read from rows the archive takes (the dump store's deleted dumps, the trimmed console
logs: /metrics and Grafana's rpt_dumps) stay as they were through an archive, a put-back and a
restore."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from dashboards import build_dashboards
from registry.auth.tokens import create_token
from registry.config import DumpStoreSettings, RetentionSettings, Settings, SymbolSettings
from registry.db import Database
from registry.migrate import upgrade
from registry.partitions import maintain, partitions
from registry.rca.models import Rca
from registry.retention.archive import write
from registry.retention.gc import collect
from registry.rollups.fold import fold
from registry.signatures.merging import recount
from registry.storage.store import open_store
from sync.scheduler import JobContext, load_jobs
from testkit.grafana_sql import TimeRange, expand_target
from testkit.pages import csrf_from
from testkit.reports import NULL_DEREF_LOG, crash_report
from tests.support.cli import crashreg
from tests.support.databases import BACKENDS, create_postgres_database, drop_postgres_database
from tests.support.http import auth, serving
from tests.support.retention import store_dump
from tests.support.rollups import stored

WIDTH = 4
CSRF = re.compile(r'name="csrf_token" value="[^"]*"')  # a new one each sign-in
WHOLE = "SELECT id, host_id, boot_key, signature_id, crashed_at, received_at, first_source"
postgres_only = pytest.mark.skipif("postgresql" not in BACKENDS, reason="partitions are PostgreSQL's")
SLOTS_COUNT = "capture_slots.event_id points into it (a slot that still counts)"
# The history figures read from rows the archive takes: Prometheus's (the counters must never
# drop: a drop reads as a reset) and the captures dashboard's dump store panels over rpt_dumps.
HISTORY = ("crashreg_dump_store_objects", "crashreg_dump_store_bytes",
           "crashreg_retention_dumps_deleted_total", "crashreg_retention_dump_bytes_freed_total",
           "crashreg_retention_console_logs_trimmed_total",
           "crashreg_retention_console_log_bytes_freed_total")
DUMP_PANELS = ("Dump store by state", "Dump bytes freed by retention per day")


@pytest.fixture
def small_partitions(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("CRASHREG_PARTITION_WIDTH", str(WIDTH))
    url = create_postgres_database()
    upgrade(url)
    yield url
    drop_postgres_database(url)


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as connection:
        return connection.execute(query).fetchall()


def run(url: str, statement: str) -> None:
    with psycopg.connect(url) as connection:
        connection.execute(statement)


def history(base: str, url: str) -> dict[Any, Any]:
    """The history figures as their consumers read them: a scrape of /metrics, and the panels'
    SQL as Grafana expands it for the last 30 days."""
    scraped = text_string_to_metric_families(requests.get(f"{base}/metrics", timeout=60).text)
    figures: dict[Any, Any] = {(sample.name, sample.labels.get("state")): sample.value
                               for family in scraped for sample in family.samples if sample.name in HISTORY}
    now = datetime.now(UTC)
    month = TimeRange(now - timedelta(days=30), now + timedelta(days=1))
    board = next(b for b in build_dashboards("postgresql", "x") if b["uid"] == "crashreg-captures")
    return figures | {panel["title"]: rows(url, expand_target(panel["targets"][0], {}, month))
                      for panel in board["panels"] if panel["title"] in DUMP_PANELS}


def counts(url: str) -> list[tuple[Any, ...]]:
    return rows(url, "SELECT signature_id, sum(events), max(last_seen) FROM signature_counters "
                     "GROUP BY 1 ORDER BY 1")


def rollups(url: str) -> Any:
    database = Database(url)
    try:
        fold(database)
        with database.session() as session:
            return stored(session)
    finally:
        database.dispose()


def event_partitions(url: str) -> list[str]:
    return [name for (name,) in rows(url, "SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                                         "ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass "
                                         "ORDER BY 1")]


class Served:
    def __init__(self, base: str, reporter: str, reader: str) -> None:
        self.base, self.reporter, self.reader = base, reporter, reader

    def send(self, report: dict[str, Any]) -> requests.Response:
        return requests.post(f"{self.base}/api/v1/reports", json=report, headers=auth(self.reporter),
                             timeout=60)

    def post(self, report: dict[str, Any]) -> dict[str, Any]:
        answer = self.send(report)
        assert answer.status_code == 201, answer.text
        return answer.json()

    def get(self, path: str) -> Any:
        answer = requests.get(f"{self.base}{path}", headers=auth(self.reader), timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def pages(self, signature_id: str) -> list[str]:
        """The list page and the signature page, as an engineer signed in sees them."""
        browser = requests.Session()
        form = browser.get(f"{self.base}/login", timeout=30)
        signed_in = browser.post(f"{self.base}/login", timeout=30, data={
            "token": self.reader, "next": "/signatures", "csrf_token": csrf_from(form.text)})
        assert signed_in.status_code == 200, signed_in.text[:300]
        page = browser.get(f"{self.base}/signatures/{signature_id}", timeout=30)
        assert page.status_code == 200
        return [CSRF.sub("", signed_in.text), CSRF.sub("", page.text)]

    def signatures(self) -> list[dict[str, Any]]:
        return sorted(self.get("/api/v1/signatures")["signatures"], key=lambda s: s["id"])


def settings(url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=url, public_url="http://crashreg.test",
                    dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")),
                    symbols=SymbolSettings(cache_dir=str(tmp_path / "symbols")))


def serve(url: str, tmp_path: Path) -> Any:
    return serving(settings(url, tmp_path))


def tokens(database: Database) -> tuple[str, str]:
    with database.session() as session:
        reporter, _ = create_token(session, f"reporter-{uuid.uuid4().hex[:6]}", "report", "agent")
        reader, _ = create_token(session, f"reader-{uuid.uuid4().hex[:6]}", "read", "human")
    return reporter, reader


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@postgres_only
def test_old_partitions_are_archived_and_every_count_stays(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    store = tmp_path / "dumps" / "archive"
    with serve(url, tmp_path) as (base, database):
        served = Served(base, *tokens(database))
        posted = []
        for n in range(22):  # ids 1..22: [MINVALUE, 8), [8, 12), [12, 16), [16, 20), [20, 24) current
            # the latest crash is in a partition that goes: last seen must not go back
            crashed_at = "2026-12-01T08:00:00Z" if n == 9 else "2026-11-29T12:00:00Z"
            posted.append(served.post(crash_report(host={"hostname": f"gpu-{n % 3}"}, crashed_at=crashed_at)))
            maintain(database.engine)
        partitions_before = event_partitions(url)
        first_archived = rows(url, f"{WHOLE} FROM events WHERE id >= 8 AND id < 12 ORDER BY id")
        signatures, counted, rolled = served.signatures(), counts(url), rollups(url)
        signature = served.get(f"/api/v1/signatures/{signatures[0]['id']}")
        pages = served.pages(signatures[0]["id"])

        dry = crashreg(url, "db", "archive", "--before", "2100-01-01", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == [
            "would archive reports_p0002", "would archive reports_p0003", "would archive reports_p0004",
            "would archive events_p0002", "would archive events_p0003", "would archive events_p0004",
            f"kept events_p0000: {SLOTS_COUNT}",
            "kept reports_p0000: reports of events in events_p0000, which stay",
        ]
        assert event_partitions(url) == partitions_before and not store.exists()
        not_yet = crashreg(url, "db", "archive", "--before", "2000-01-01")
        assert not_yet.returncode == 0 and not_yet.stdout == ""

        archived = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert archived.returncode == 0, archived.stderr
        assert "events_p0002: 4 rows written to" in archived.stderr

        # the files and their manifests, as the manifests say
        for table in ("events", "reports"):
            for number, lower in ((2, 8), (3, 12), (4, 16)):
                manifest = json.loads((store / table / f"{table}_p000{number}.manifest.json").read_text())
                data = tmp_path / "dumps" / manifest["file"]
                lines = [json.loads(line) for line in gzip.decompress(data.read_bytes()).splitlines()]
                assert manifest["rows"] == len(lines) == WIDTH and manifest["sha256"] == sha256(data)
                assert [row["id"] for row in lines] == list(range(lower, lower + WIDTH))
                assert manifest["id_range"] == [lower, lower + WIDTH] and "id" in manifest["columns"]
                assert manifest["migration"] == rows(url, "SELECT version_num FROM alembic_version")[0][0]
        events_manifest = json.loads((store / "events" / "events_p0002.manifest.json").read_text())
        assert events_manifest["crashed_at"][1].startswith("2026-12-01T08:00:00")

        # gone from the database but for their natural keys; what stays is whole
        assert event_partitions(url) == ["events_p0000", "events_p0005", "events_p0006", "events_p0007"]
        assert rows(url, "SELECT count(*) FROM events") == [(10,)]
        assert rows(url, "SELECT count(*) FROM event_keys WHERE event_id >= 8 AND event_id < 20") == [(12,)]
        assert rows(url, "SELECT count(*) FROM report_keys WHERE id >= 8 AND id < 20") == [(12,)]
        assert served.signatures() == signatures and counts(url) == counted
        assert served.get(f"/api/v1/signatures/{signatures[0]['id']}") == signature
        listed, signature_page = served.pages(signatures[0]["id"])
        assert listed == pages[0]  # the list page: the same counts, last seen, everything
        # the signature page counts every event, and lists (and weighs) the stored ones
        assert "(10 of 22, newest crash first)" in signature_page and "(22 of 22," in pages[1]
        assert rollups(url) == rolled  # no trigger counted the dropped rows as deletions
        for kept in (posted[0], posted[-1]):
            assert served.get(f"/api/v1/events/{kept['event_id']}")["id"] == kept["event_id"]
        assert requests.get(f"{base}/api/v1/events/{posted[9]['event_id']}",
                            headers=auth(served.reader), timeout=60).status_code == 404

        # a later report of the archived signature counts on
        served.post(crash_report(host={"hostname": "gpu-late"}))
        after = served.signatures()
        assert after[0]["event_count"] == signatures[0]["event_count"] + 1 == 23
        assert after[0]["last_seen"] == signatures[0]["last_seen"]

    # a rebuild and a recount do not count the archived history away
    later = counts(url)
    rebuilt = crashreg(url, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    database = Database(url)
    try:
        with database.session() as session:
            recount(session, [int(signatures[0]["id"])])
    finally:
        database.dispose()
    assert counts(url) == later

    # an archive loaded back into a side table, for reading
    restored = crashreg(url, "db", "restore-archive", "archive/events/events_p0002.manifest.json",
                        "--into", "old_events")
    assert restored.returncode == 0, restored.stderr
    assert rows(url, f"{WHOLE} FROM old_events ORDER BY id") == first_archived
    again = crashreg(url, "db", "restore-archive", "archive/events/events_p0002.manifest.json",
                     "--into", "old_events")
    assert again.returncode == 1 and "table old_events exists" in again.stderr
    missing = crashreg(url, "db", "restore-archive", "archive/events/events_p9999.manifest.json",
                       "--into", "other")
    assert missing.returncode == 1 and "no archive manifest at" in missing.stderr


@postgres_only
def test_the_scheduled_archive_follows_the_setting(small_partitions: str, tmp_path: Path) -> None:
    url = small_partitions
    job = load_jobs()["archive"]
    assert not job.enabled(Settings())  # off unless CRASHREG_ARCHIVE_AFTER_DAYS is set
    configured = replace(settings(url, tmp_path), retention=RetentionSettings(archive_after_days=30))
    assert job.enabled(configured)
    with serve(url, tmp_path) as (base, database):
        served = Served(base, *tokens(database))
        for n in range(14):  # ids 1..14: [MINVALUE, 8), [8, 12) old, [12, 16) current
            served.post(crash_report(host={"hostname": f"gpu-{n % 3}"}))
            maintain(database.engine)
        counted = counts(url)
        now = datetime.now(UTC)
        assert job.run(JobContext(configured, database, clock=lambda: now)) == {"archived": [], "kept": {}}
        # an earlier run stopped between a detach and its drop: this run finishes it
        store = open_store(configured.dump_store, configured.public_url)
        with database.engine.connect() as connection:
            stopped = next(p for p in partitions(connection) if p.name == "reports_p0002")
        write(database.engine, store, stopped, tmp_path)
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("ALTER TABLE reports DETACH PARTITION reports_p0002")
        later = now + timedelta(days=31)
        assert job.run(JobContext(configured, database, clock=lambda: later)) == {
            "archived": ["reports_p0002", "events_p0002"],
            "kept": {"events_p0000": SLOTS_COUNT,
                     "reports_p0000": "reports of events in events_p0000, which stay"},
        }
    assert "events_p0002" not in event_partitions(url) and counts(url) == counted
    assert rows(url, "SELECT count(*) FROM pg_class WHERE relname LIKE '%_p0002'") == [(0,)]
    assert rows(url, "SELECT count(*) FROM event_keys WHERE event_id >= 8 AND event_id < 12") == [(4,)]
    assert (tmp_path / "dumps" / "archive" / "events" / "events_p0002.manifest.json").is_file()


NOISE = "".join(f"[    {i / 1000:.6f}] pci 0000:{i % 256:02x}:00.0: reg 0x10: [mem 0x{i:08x}]\n"
                for i in range(2000))  # boot noise before the crash: what a trim cuts
SLOTS = "SELECT signature_id, slot, event_id, state, since FROM capture_slots ORDER BY 1, 2"
TRIMS = "SELECT report_id, event_id, first_line, total_lines, whole_bytes, kept_bytes FROM console_trims"


def loaded(url: str, manifest: str, table: str) -> None:
    restored = crashreg(url, "db", "restore-archive", manifest, "--into", table)
    assert restored.returncode == 0, restored.stderr


def trimmed(base: str, database: Database, url: str, tmp_path: Path) -> tuple[Served, dict[Any, Any]]:
    """A year on: 14 crashes (ids 1..14: [MINVALUE, 8) with the slots, [8, 12) old, [12, 16)
    current) whose logs the gc has trimmed but the exemplars', their capture window long over;
    and the history figures then."""
    served = Served(base, *tokens(database))
    for n in range(14):
        served.post(crash_report(host={"hostname": f"gpu-{n % 3}"}, console_log=NOISE + NULL_DEREF_LOG))
        maintain(database.engine)
    aged = (("events", "received_at"), ("reports", "received_at"), ("capture_slots", "since"))
    for table, column in aged:
        run(url, f"UPDATE {table} SET {column} = {column} - interval '400 days'")
    outcome = collect(database, open_store(settings(url, tmp_path).dump_store, "http://crashreg.test"),
                      settings(url, tmp_path))
    assert outcome.logs_trimmed == 11 and outcome.logs_kept_by_rule == {"exemplar": 3}
    figures = history(base, url)
    assert figures[("crashreg_retention_console_logs_trimmed_total", None)] == 11
    assert figures[("crashreg_retention_console_log_bytes_freed_total", None)] == outcome.log_bytes_freed > 0
    return served, figures


@postgres_only
def test_trims_and_spent_slots_go_to_the_archive_with_their_partitions(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A year on, the gc has trimmed every old log but the exemplars' and the capture window is
    long over: the console trims and the capture slots pointing into the old partitions go to
    the archive with them (and come back with restore-archive) instead of keeping them for ever;
    the trimmed logs' figures stay."""
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    with serve(url, tmp_path) as (base, database):
        served, figures = trimmed(base, database, url, tmp_path)
        slots, trims = rows(url, SLOTS), rows(url, f"{TRIMS} WHERE report_id < 12 ORDER BY 1")
        assert [slot[2] for slot in slots] == [1, 2, 3] and len(trims) == 8
        old_reports = rows(url, "SELECT id, report_id, console_log FROM reports WHERE id >= 8 AND id < 12")

        dry = crashreg(url, "db", "archive", "--before", "2100-01-01", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == [
            "would archive reports_p0000", "would archive reports_p0002",
            "would archive events_p0000", "would archive events_p0002",
        ]
        archived = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert archived.returncode == 0, archived.stderr
        assert "reports_p0002: 4 rows of console_trims archived with it, deleted" in archived.stderr
        assert event_partitions(url) == ["events_p0003", "events_p0004", "events_p0005"]
        assert rows(url, SLOTS) == [] and rows(url, f"{TRIMS} WHERE report_id < 12") == []
        assert rows(url, "SELECT count(*) FROM console_trims") == [(3,)]  # the current partition's
        assert history(base, url) == figures
        # the slots are free: the next crash of the bug gets its full capture as a first one did
        assert served.post(crash_report(host={"hostname": "gpu-late"}))["capture"]["action"] == "full"

        loaded(url, "archive/reports/reports_p0002.manifest.json", "old_reports")
        loaded(url, "archive/reports/reports_p0000.manifest.json", "older_reports")
        loaded(url, "archive/events/events_p0000.manifest.json", "old_events")
        assert history(base, url) == figures  # a side table counts nowhere
    assert rows(url, "SELECT id, report_id, console_log FROM old_reports ORDER BY id") == old_reports
    assert rows(url, f"{TRIMS.replace('console_trims', 'older_reports_console_trims')} UNION ALL "
                     f"{TRIMS.replace('console_trims', 'old_reports_console_trims')} ORDER BY 1") == trims
    assert rows(url, SLOTS.replace("capture_slots", "old_events_capture_slots")) == slots
    assert rows(url, "SELECT count(*) FROM old_events_no_signature_slots") == [(0,)]


@postgres_only
def test_trims_are_put_back_when_the_detach_is_refused(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gc trims a log of an archived report again after the archive deleted its trim (a
    trigger does it in the deleting transaction, as the gc would: the log is its crash report
    already, nothing freed): the detach is refused and the other trims are back. The figures
    stay through it all: the trim written meanwhile is there instead of the archived one, which
    stays counted; and the next run archives them."""
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    with serve(url, tmp_path) as (base, database):
        _, figures = trimmed(base, database, url, tmp_path)
        trims = rows(url, f"{TRIMS} WHERE report_id >= 8 AND report_id < 12 ORDER BY 1")
        run(url, "CREATE FUNCTION trimmed_again() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "INSERT INTO console_trims (report_id, event_id, trimmed_at, first_line, total_lines, "
                 "whole_bytes, kept_bytes) SELECT report_id, event_id, now(), 1, total_lines, kept_bytes, "
                 "kept_bytes FROM gone WHERE report_id = 9; RETURN NULL; END $$")
        run(url, "CREATE TRIGGER trimmed_again AFTER DELETE ON console_trims REFERENCING OLD TABLE AS gone "
                 "FOR EACH STATEMENT EXECUTE FUNCTION trimmed_again()")
        refused = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert refused.returncode != 0
        assert ("reports_p0002: its detach was refused; its archived rows of console_trims are back"
                in refused.stderr)
        run(url, "DROP TRIGGER trimmed_again ON console_trims")
        back = rows(url, f"{TRIMS} WHERE report_id >= 8 AND report_id < 12 ORDER BY 1")
        assert [t for t in back if t[0] != 9] == [t for t in trims if t[0] != 9]
        assert [t[4] == t[5] for t in back if t[0] == 9] == [True]  # the trim written meanwhile
        assert history(base, url) == figures

        again = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert again.returncode == 0, again.stderr
        assert "archived reports_p0002" in again.stdout.splitlines()
        assert rows(url, f"{TRIMS} WHERE report_id < 12") == []
        assert history(base, url) == figures


@postgres_only
def test_a_resend_of_an_archived_report_is_its_duplicate(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The natural keys of archived rows stay: a resend of an archived report (a spool's, an
    import re-run's) is answered 200 as a duplicate and stored nowhere, and a further source of
    an archived crash opens no event of its own (409)."""
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    sent = [crash_report(report_id=f"a-{n}", boot_id=f"boot-{n}", host={"hostname": f"gpu-{n % 3}"})
            for n in range(14)]  # ids 1..14: [MINVALUE, 8) kept (its slots count), [8, 12) archived
    with serve(url, tmp_path) as (base, database):
        served = Served(base, *tokens(database))
        first = []
        for report in sent:
            first.append(served.post(report))
            maintain(database.engine)
        archived = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert archived.returncode == 0, archived.stderr
        assert "archived events_p0002" in archived.stdout.splitlines()
        signatures, counted = served.signatures(), counts(url)

        for n, report in enumerate(sent):  # every one again: the archived ones too
            again = served.send(report)
            assert again.status_code == 200, again.text
            if 8 <= int(first[n]["event_id"]) < 12:
                assert again.json() == {
                    "event_id": first[n]["event_id"], "duplicate": True, "known": True, "signature": None,
                    "capture": {"action": "skip", "dump_level": None, "reason": "a resend of a report that "
                                "was archived: its event is in the archive, not stored again"},
                    "archived": True, "warnings": []}
            else:
                assert again.json() == {**first[n], "duplicate": True}
        late = served.send(crash_report(source="dpu", boot_id="boot-9", host={"hostname": "gpu-0"}))
        assert late.status_code == 409, late.text
        assert late.json()["error"]["fields"] == {"boot_id": [f"its crash's event ({first[9]['event_id']}) "
                                                              f"is in the archive"]}
        assert rows(url, "SELECT count(*) FROM events") == [(10,)]
        assert rows(url, "SELECT count(*) FROM reports") == [(10,)]
        assert served.signatures() == signatures and counts(url) == counted

    # the kept keys are no hindrance to reading an archive back
    loaded(url, "archive/reports/reports_p0002.manifest.json", "old_reports")
    assert [r for (r,) in rows(url, "SELECT report_id FROM old_reports ORDER BY id")] == [
        f"a-{n}" for n in range(7, 11)]


def test_sqlite_has_no_partitions_to_archive(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    upgrade(url)
    refused = crashreg(url, "db", "archive", "--before", "2026-01-01")
    assert refused.returncode == 1
    assert "archiving: PostgreSQL only, SQLite's tables are not partitioned" in refused.stderr


CAPTURES = "SELECT id, event_id, method, status, processing_state, bytes FROM captures"
CHILDREN = {  # a capture's rows that go with it, as read back
    "dumps": "SELECT id, capture_id, key, state, bytes, deleted_at FROM dumps",
    "dump_downloads": "SELECT id, dump_id, actor, via, object_uri FROM dump_downloads",
    "dump_pins": "SELECT id, capture_id, pinned_by, pinned_at, unpinned_at FROM dump_pins",
}


def captured(url: str, table: str = "captures") -> dict[str, list[tuple[Any, ...]]]:
    """The captures of events_p0002's events and their children (those of `table`, a side table's prefix)."""
    prefix = "" if table == "captures" else table.removesuffix("captures")
    return {name: rows(url, f"{query.replace(f'FROM {name}', f'FROM {prefix}{name}')} ORDER BY id")
            for name, query in (("captures", CAPTURES), *CHILDREN.items())}


class Captured(Served):
    """A registry whose events 8..11 (events_p0002) have captures, recorded through the API."""

    def __init__(self, base: str, database: Database, url: str, tmp_path: Path) -> None:
        super().__init__(base, *tokens(database))
        with database.session() as session:
            self.triage, _ = create_token(session, f"triage-{uuid.uuid4().hex[:6]}", "triage", "human")
        self.database, self.url, self.tmp_path = database, url, tmp_path
        self.store = open_store(settings(url, tmp_path).dump_store, "http://crashreg.test")
        for n in range(14):  # ids 1..14: [MINVALUE, 8) with the slots, [8, 12) old, [12, 16) current
            self.post(crash_report(host={"hostname": f"gpu-{n % 3}"}))
            maintain(database.engine)

    def capture(self, event_id: int, **fields: Any) -> str:
        body = {"method": "makedumpfile", "status": "completed", "bytes": 1000} | fields
        answer = requests.post(f"{self.base}/api/v1/events/{event_id}/captures", json=body,
                               headers=auth(self.reporter), timeout=60)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def call(self, method: str, path: str, token: str, **body: Any) -> requests.Response:
        return requests.request(method, f"{self.base}{path}", json=body or None, headers=auth(token),
                                timeout=60)

    def finished(self) -> list[str]:
        """Captures retention and engineers are done with: a dump downloaded, pinned, unpinned and
        deleted by the gc once its bug was fixed; a failed capture; a completed one never uploaded."""
        kept = self.capture(8)
        store_dump(self.database, self.store, kept)
        assert self.call("GET", f"/api/v1/captures/{kept}/download", self.reader).status_code == 200
        assert self.call("PUT", f"/api/v1/captures/{kept}/pin", self.triage, note="look").status_code == 201
        assert self.call("DELETE", f"/api/v1/captures/{kept}/pin", self.triage).status_code == 200
        run(self.url, "UPDATE signatures SET status = 'resolved', resolved_at = now() - interval '400 days'")
        assert collect(self.database, self.store, settings(self.url, self.tmp_path)).dumps_deleted == 1
        return [kept, self.capture(9, status="failed", bytes=None), self.capture(10)]


@postgres_only
def test_finished_captures_go_to_the_archive_with_their_partition(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every old partition holds captures: those whose evidence is finished go with it (their
    dumps' rows, downloads and pins too), history counts them as before, and they come back
    with restore-archive without being counted twice."""
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    store = tmp_path / "dumps" / "archive"
    with serve(url, tmp_path) as (base, database):
        served = Captured(base, database, url, tmp_path)
        ids = served.finished()
        before, rolled, figures = captured(url), rollups(url), history(base, url)
        assert [len(before[name]) for name in before] == [3, 1, 1, 1]
        assert before["dumps"][0][3] == "deleted" and before["dump_pins"][0][4] is not None
        assert figures[("crashreg_dump_store_objects", "deleted")] == 1
        assert figures[("crashreg_retention_dump_bytes_freed_total", None)] == 1000
        assert figures["Dump store by state"] == [("deleted", 1000)]

        archived = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert archived.returncode == 0, archived.stderr
        assert archived.stdout.splitlines() == [
            "archived reports_p0002", "archived events_p0002", f"kept events_p0000: {SLOTS_COUNT}",
            "kept reports_p0000: reports of events in events_p0000, which stay"]
        assert "events_p0002: 3 rows of captures archived with it, deleted" in archived.stderr
        assert rows(url, "SELECT count(*) FROM rollup_capture_changes") == [(0,)]  # nothing counted out
        assert rollups(url) == rolled and history(base, url) == figures
        assert captured(url) == {name: [] for name in before}
        partition = json.loads((store / "events" / "events_p0002.manifest.json").read_text())
        assert partition["dependents"] == [f"archive/{table}/events_p0002.manifest.json" for table in (
            "capture_slots", "no_signature_slots", "captures", "dumps", "dump_downloads", "dump_pins")]
        for table, count in (("captures", 3), *((name, 1) for name in CHILDREN)):
            manifest = json.loads((store / table / "events_p0002.manifest.json").read_text())
            data = tmp_path / "dumps" / manifest["file"]
            lines = [json.loads(line) for line in gzip.decompress(data.read_bytes()).splitlines()]
            assert (manifest["table"], manifest["partition"]) == (table, "events_p0002")
            assert manifest["rows"] == count
            assert len(lines) == count and manifest["sha256"] == sha256(data)
        for path in (f"/api/v1/captures/{ids[0]}/dump", f"/api/v1/captures/{ids[0]}/pins",
                     f"/api/v1/captures/{ids[1]}/download"):
            assert served.call("GET", path, served.reader).status_code == 404
        assert served.call("PATCH", f"/api/v1/captures/{ids[2]}", served.reporter,
                           status="failed").status_code == 404
        assert served.call("PUT", f"/api/v1/captures/{ids[2]}/pin", served.triage).status_code == 404
        gc = collect(database, served.store, settings(url, tmp_path))  # nothing of theirs to trip on
        assert gc.dumps_deleted == 0 and history(base, url) == figures

        loaded(url, "archive/events/events_p0002.manifest.json", "old_events")
        assert captured(url, "old_events_captures") == before
        assert rollups(url) == rolled and history(base, url) == figures  # a side table counts nowhere


@postgres_only
def test_captures_in_use_keep_their_partition(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture cited by an RCA, under way, its dump being triaged, pinned or in the store keeps
    its event's partition, and the run says which capture and why."""
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    with serve(url, tmp_path) as (base, database):
        served = Captured(base, database, url, tmp_path)
        cited = served.finished()[1]

        def kept() -> str:
            dry = crashreg(url, "db", "archive", "--before", "2100-01-01", "--dry-run")
            assert dry.returncode == 0, dry.stderr
            return next(line for line in dry.stdout.splitlines() if line.startswith("kept events_p0002"))

        with database.session() as session:
            session.add(Rca(signature_id=int(served.signatures()[0]["id"]), status="rejected", summary="s",
                            body="b", author="bob", author_kind="human", token_name="t", checks=[],
                            checks_passed=True, evidence=[{"type": "capture", "capture_id": cited}]))
        assert kept() == "kept events_p0002: an RCA's evidence names a capture of one of its events"
        run(url, "DELETE FROM rcas")
        held = served.capture(11, status="started")

        def change(path: str, method: str = "PATCH", token: str = served.reporter, **body: Any) -> None:
            assert served.call(method, path, token, **body).status_code in (200, 201)

        why = f"kept events_p0002: captures.event_id points into it (capture {held}: "
        assert kept() == why + "under way)"
        change(f"/api/v1/captures/{held}", status="completed", processing_state="processing")
        assert kept() == why + "its dump being triaged)"
        change(f"/api/v1/captures/{held}", processing_state="done")
        change(f"/api/v1/captures/{held}/pin", "PUT", served.triage)
        assert kept() == why + "pinned)"
        change(f"/api/v1/captures/{held}/pin", "DELETE", served.triage)
        store_dump(database, served.store, held)
        assert kept() == why + "its dump in the store)"
        archived = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert archived.returncode == 0, archived.stderr
        assert kept() in archived.stdout.splitlines() and "events_p0002" in event_partitions(url)


@postgres_only
def test_captures_are_put_back_when_the_detach_is_refused(
    small_partitions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late capture of an archived event written after the archive deleted the captures (a
    trigger writes one in the deleting transaction): the detach is refused, the captures and
    their children are back as they were, counted once, and the next run archives them all."""
    url = small_partitions
    monkeypatch.setenv("CRASHREG_DUMP_STORE", str(tmp_path / "dumps"))
    with serve(url, tmp_path) as (base, database):
        served = Captured(base, database, url, tmp_path)
        served.finished()
        before, rolled, figures = captured(url), rollups(url), history(base, url)
        run(url, "CREATE FUNCTION late_capture() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "INSERT INTO captures (event_id, signature_id, method, status, created_at, updated_at) "
                 "SELECT id, signature_id, 'drgn', 'failed', now(), now() FROM events WHERE id = 11; "
                 "RETURN NULL; END $$")
        run(url, "CREATE TRIGGER late_capture AFTER DELETE ON captures FOR EACH STATEMENT "
                 "EXECUTE FUNCTION late_capture()")
        refused = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert refused.returncode != 0
        assert ("events_p0002: its detach was refused; its archived rows of capture_slots, "
                "no_signature_slots, captures, dumps, dump_downloads, dump_pins are back") in refused.stderr
        run(url, "DROP TRIGGER late_capture ON captures")
        late = captured(url)
        assert late["captures"][:-1] == before["captures"]
        assert late["captures"][-1][1:4] == (11, "drgn", "failed")
        assert {name: late[name] for name in CHILDREN} == {name: before[name] for name in CHILDREN}
        assert "events_p0002" in event_partitions(url)
        assert rollups(url) == rolled  # neither their delete nor their putting back was counted
        assert history(base, url) == figures

        again = crashreg(url, "db", "archive", "--before", "2100-01-01")
        assert again.returncode == 0, again.stderr
        assert "archived events_p0002" in again.stdout.splitlines() and captured(url)["captures"] == []
        assert rollups(url) == rolled and history(base, url) == figures
