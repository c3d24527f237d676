"""How a signature's events are read for its analysis: every event counts, including those
too wide for PostgreSQL's covering index; the planner can use the partial indexes; a stored
sample plus the events since gives exactly what reading every event gives."""

from __future__ import annotations

import random
import re
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import delete, text

from registry.core.signatures import Signature
from registry.db import is_postgresql, utcnow
from registry.epidemiology import queries
from registry.epidemiology.models import SAMPLE_FITS, EpidemiologySample
from registry.epidemiology.queries import EventFilter, signature_events_sql, signature_sample
from registry.epidemiology.service import signature_epidemiology, store_samples
from registry.epidemiology.uptime import HOUR_S, histogram_outside_counts
from registry.pages.reads import marks, top_hosts
from registry.rollups.fold import fold
from testkit.reports import crash_report
from tests.support.http import auth

# 60 labels of ~90 bytes: about 5 kB of text, more than a btree entry may hold
WIDE_LABELS = {f"node.example.com/attribute-{i:02d}": f"value-{i:02d}-" + "x" * 40 for i in range(60)}


def _report(hostname: str, labels: dict[str, str]) -> dict:
    report = crash_report()
    report["host"] = {**report["host"], "hostname": hostname, "physical_host": hostname, "labels": labels}
    return report


def test_events_too_wide_for_the_covering_index_are_counted(client, make_token, database) -> None:  # type: ignore[no-untyped-def]
    token = make_token("report")
    hosts = [("narrow-1", {"pool": "train"}), ("narrow-2", {"pool": "train"}), ("wide-1", WIDE_LABELS)]
    hosts += [("wide-2", WIDE_LABELS)]
    signatures = set()
    for hostname, labels in hosts:
        response = client.post("/api/v1/reports", json=_report(hostname, labels), headers=auth(token))
        assert response.status_code in (200, 201), response.get_json()
        signatures.add(response.get_json()["signature"]["id"])
    assert len(signatures) == 1
    with database.session() as session:
        sample = signature_sample(session, [int(signatures.pop())])
        if is_postgresql(session):  # two of them live in the complement index only
            assert session.scalar(text(f"SELECT count(*) FROM events WHERE NOT ({SAMPLE_FITS})")) == 2
    assert sample.events == 4 and sample.hosts == 4  # physical hosts
    assert sample.counts[("labels", "pool=train")] == 2
    assert sample.counts[("labels", "node.example.com/attribute-07=value-07-" + "x" * 40)] == 2
    assert sample.counts[("hostname", "wide-2")] == 1


def test_postgresql_reads_a_signature_through_the_partial_indexes(database) -> None:  # type: ignore[no-untyped-def]
    with database.session() as session:
        if not is_postgresql(session):
            pytest.skip("the covering indexes are PostgreSQL's")
        # Only the partial indexes could serve the read (the signature's other indexes dropped
        # inside this transaction, rolled back below): the plan uses them only if the query's
        # conditions imply their predicates (migration 0014), whatever the data.
        session.execute(text("DROP INDEX ix_events_signature_crashed_report"))
        session.execute(text("SET LOCAL enable_seqscan = off"))
        selected = EventFilter.signature([1])
        plan = "\n".join(
            row[0]
            for row in session.execute(
                selected.statement(f"EXPLAIN {signature_events_sql(session, selected)}"), selected.params
            )
        )
        session.rollback()
    # on PostgreSQL events is partitioned (docs/partitioning.md): each partition's own copy
    scans = re.findall(r"using (?:events_p\d+_)?(ix_events_epidemiology\w*) on events", plan)
    assert {"ix_events_epidemiology", "ix_events_epidemiology_wide"} == set(scans), plan


def test_hourly_histogram_less_a_signature_is_the_per_uptime_subtraction() -> None:
    rng = random.Random(3)
    own = [float(rng.randrange(-7200, 400 * HOUR_S)) for _ in range(2000)] + [5.0 * HOUR_S, 17.5]
    others = [rng.randrange(0, 500 * HOUR_S) for _ in range(3000)]
    hours = Counter(u // HOUR_S for u in [*others, *(int(u) for u in own if u >= 0)])
    # the reference: each uptime of the signature subtracted from its hour, one by one
    remaining = Counter(hours)
    remaining.subtract(Counter(int(u // HOUR_S) for u in own if u >= 0))
    ordered = sorted((h, n) for h, n in remaining.items() if n > 0)
    count = histogram_outside_counts(dict(hours), minus=list(reversed(own)))
    for lowest, highest in [(0, 10**9), (3 * HOUR_S + 5, 250 * HOUR_S), (17.5, 17.5), (-1, 1e6)]:
        below = sum(n for h, n in ordered if h < int(lowest // HOUR_S))
        above = sum(n for h, n in ordered if h > int(highest // HOUR_S))
        assert count(lowest, highest) == (below, above, sum(n for _, n in ordered))


def test_a_stored_sample_gives_what_reading_every_event_gives(
    client, make_token, database
) -> None:  # type: ignore[no-untyped-def]
    token = make_token("report")

    def post(count: int, start: int) -> str:
        ids = set()
        for i in range(start, start + count):
            labels = {"pool": "train" if i % 2 else "infer", "rack": f"r{i % 3}"}
            report = _report(f"host-{i}", labels) | {"uptime_s": 3600 * (i + 1)}
            report["host"]["kernel_version"] = f"6.8.{i % 2}"
            response = client.post("/api/v1/reports", json=report, headers=auth(token))
            ids.add(response.get_json()["signature"]["id"])
        assert len(ids) == 1
        return ids.pop()

    sid = int(post(6, 0))

    def analyses(session) -> tuple[dict, dict]:  # type: ignore[no-untyped-def]
        """The analysis and the page's busiest hosts and kernels, from the stored sample (when
        it holds) and from every event (the stored sample gone meanwhile)."""
        signature = session.get_one(Signature, sid)

        def read() -> dict:
            return {
                **signature_epidemiology(session, signature, crash_view=True),
                "page_hosts": top_hosts(session, [sid], limit=4),
                "page_marks": marks(session, [sid], signature.first_seen),
            }

        served = read()
        savepoint = session.begin_nested()
        session.execute(delete(EpidemiologySample))
        live = read()
        savepoint.rollback()
        return served, live

    with database.session() as session:
        assert store_samples(session, utcnow()) == []  # every event is too recent to be settled
        # their changes still queued for the rollups: a sample would be taken for stale
        assert store_samples(session, utcnow(), settle=timedelta(0), least=1) == []
    fold(database)
    with database.session() as session:
        stored = store_samples(session, utcnow(), settle=timedelta(0), least=1)
    with database.session() as session:
        if not is_postgresql(session):
            assert stored == []  # SQLite reads every event
            return
        assert stored == [sid] and queries.stored_sample(session, [sid]) is not None
        served, live = analyses(session)
        assert served == live and served["events"] == 6

    post(3, 6)  # events after the watermark are read and added to the stored ones
    with database.session() as session:
        assert queries.stored_sample(session, [sid]) is not None
        served, live = analyses(session)
        assert served == live and served["events"] == 9
        hosts, hostnames = served["page_hosts"]
        assert hostnames == 9 and [h["events"] for h in hosts] == [1, 1, 1, 1]

    with database.session() as session:  # another column of an old event: it moves nothing
        first = session.scalar(text("SELECT min(id) FROM events WHERE signature_id = :s"), {"s": sid})
        session.execute(text("UPDATE events SET repeats = repeats + 1 WHERE id = :id"), {"id": first})
    with database.session() as session:
        assert queries.stored_sample(session, [sid]) is not None
    fold(database)
    with database.session() as session:
        assert queries.stored_sample(session, [sid]) is not None

    with database.session() as session:  # an event leaves the signature: the sample is stale
        session.execute(text("UPDATE events SET signature_id = NULL WHERE id = :id"), {"id": first})
    with database.session() as session:  # while its change is queued
        assert queries.stored_sample(session, [sid]) is None
        served, live = analyses(session)
        assert served == live and served["events"] == 8
    fold(database)
    with database.session() as session:  # and once folded: the fold deleted it
        assert session.get(EpidemiologySample, sid) is None
        served, live = analyses(session)
        assert served == live and served["events"] == 8


def test_a_stored_sample_is_stale_once_the_archive_took_its_first_events(
    client, make_token, database
) -> None:  # type: ignore[no-untyped-def]
    """The archive drops whole partitions from the oldest id up, queueing nothing."""
    token = make_token("report")
    for i in range(4):
        response = client.post("/api/v1/reports", json=_report(f"archived-{i}", {}), headers=auth(token))
        assert response.status_code == 201
    sid = int(response.get_json()["signature"]["id"])
    fold(database)
    with database.session() as session:
        if not is_postgresql(session):
            pytest.skip("samples are stored on PostgreSQL")
        assert store_samples(session, utcnow(), settle=timedelta(0), least=1) == [sid]
    with database.session() as session:
        first = session.scalar(text("SELECT min(id) FROM events"))
        session.execute(text("SET LOCAL session_replication_role = replica"))  # no trigger, no queue
        session.execute(text("DELETE FROM reports WHERE event_id = :id"), {"id": first})
        session.execute(text("DELETE FROM events WHERE id = :id"), {"id": first})
        assert session.scalar(text("SELECT count(*) FROM rollup_changes")) == 0
    with database.session() as session:
        assert queries.stored_sample(session, [sid]) is None
        assert signature_epidemiology(session, session.get_one(Signature, sid))["events"] == 3


def test_a_stored_samples_weight_against_the_inventory_follows_the_inventory(
    client, make_token, database
) -> None:  # type: ignore[no-untyped-def]
    """A stored sample keeps how many of its events lie on inventory hosts (and on hosts whose
    changing values moved without history) with the inventory's version: a request uses them
    while the inventory is unchanged, and counts again after any change."""
    admin = make_token("admin")
    inventory = [{"hostname": f"host-{i}", "physical_host": f"host-{i}", "kernel_version": "6.8.0"}
                 for i in range(4)]
    assert client.post("/api/v1/hosts", json={"hosts": inventory}, headers=auth(admin)).status_code == 200
    ids = set()
    for i in range(6):
        report = _report(f"host-{i}", {"pool": "train"})
        report["host"]["kernel_version"] = "6.8.0"
        answer = client.post("/api/v1/reports", json=report, headers=auth(admin)).get_json()
        ids.add(answer["signature"]["id"])
    sid = int(ids.pop())

    def weights(session) -> list[tuple[int | None, int]]:  # type: ignore[no-untyped-def]
        """(events on inventory hosts, events whose host changed since): served, then live."""
        served = signature_sample(session, [sid])
        savepoint = session.begin_nested()  # every event read
        session.execute(delete(EpidemiologySample))
        live = signature_sample(session, [sid])
        savepoint.rollback()
        return [(sample.inventory_events, sample.unrecorded_changes) for sample in (served, live)]

    fold(database)
    with database.session() as session:
        stored = store_samples(session, utcnow(), settle=timedelta(0), least=1)
    with database.session() as session:
        assert stored == ([sid] if is_postgresql(session) else [])
        assert weights(session) == [(4, 0), (4, 0)]
    with database.session() as session:  # a kernel changed in the inventory, without history
        session.execute(text("UPDATE hosts SET kernel_version = '6.9.0' WHERE hostname = 'host-1'"))
    with database.session() as session:
        assert weights(session) == [(4, 1), (4, 1)]
