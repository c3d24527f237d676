"""Rows stored before the bounds existed (issue 14) must not break any read.

The hostile rows go in through the ingest and capture services themselves, below the API's
validation, just as the registry stored them before: a crash in year 9999 or 0001 and a capture
whose downtime is 1e308. Every read over them then answers valid JSON or text.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text

from registry.app import create_app
from registry.capture.service import record_capture
from registry.config import Settings
from registry.db import Database
from registry.domains import wiring
from registry.epidemiology.queries import host_signature_counts
from registry.epidemiology.suspects import suspect_hosts
from registry.ingest.api import REPORT_SCHEMA
from registry.ingest.service import ingest_report
from testkit.pages import login
from testkit.reports import crash_report
from tests.support.http import auth, closed_port


def strict_json(response: Any) -> Any:
    """The body parsed as JSON proper: Infinity and NaN are not JSON."""
    assert response.status_code == 200, (response.status_code, response.get_data(as_text=True)[:400])

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in a JSON answer")

    return json.loads(response.get_data(as_text=True), parse_constant=refuse)


def store_unchecked(database: Any, settings: Any, **overrides: Any) -> dict[str, Any]:
    """A report stored as the registry stored it before its crash-time bound."""
    raw = crash_report(**overrides)
    crashed_at = raw.pop("crashed_at")
    report = REPORT_SCHEMA.load(raw | {"crashed_at": "2026-11-29T12:00:00Z"}) | {"crashed_at": crashed_at}
    return ingest_report(database, settings, report, raw | {"crashed_at": crashed_at.isoformat()}).answer


@pytest.fixture
def hostile_rows(client, database, settings, make_token):  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    normal = client.post("/api/v1/reports", json=crash_report(), headers=auth(reporter)).json
    future = store_unchecked(database, settings, crashed_at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
                             host={"hostname": "gpu-future"})
    ancient = store_unchecked(database, settings, crashed_at=datetime(1, 1, 1, tzinfo=UTC),
                              host={"hostname": "gpu-ancient"})
    assert future["signature"]["id"] == ancient["signature"]["id"] == normal["signature"]["id"]
    with database.session() as session:
        for answer in (normal, future):
            record_capture(session, int(answer["event_id"]), {
                "method": "makedumpfile", "status": "completed", "bytes": 2**62, "downtime_s": 1e308,
                "duration_s": 1e308,
            })
    for when, host in ((datetime(9999, 12, 31, tzinfo=UTC), "gpu-blank-future"),
                       (datetime(1, 1, 1, tzinfo=UTC), "gpu-blank-ancient")):  # no crash in the log
        blank = store_unchecked(database, settings, crashed_at=when, host={"hostname": host},
                                console_log="[    1.0] \ufffd\x1b[0m\ufffd")
        assert blank["signature"] is None
    for index in range(3):  # known now: skipped, so the savings multiply the median
        skipped = client.post("/api/v1/reports", json=crash_report(host={"hostname": f"gpu-s{index}"}),
                              headers=auth(reporter))
        assert skipped.status_code == 201
    return normal["signature"]["id"]


def test_reads_answer_valid_json_over_hostile_rows(client, make_token, hostile_rows) -> None:
    reader = auth(make_token("read"))
    signature = hostile_rows
    detail = strict_json(client.get(f"/api/v1/signatures/{signature}", headers=reader))
    assert detail["last_seen"].startswith("2026-"), "a crash time past tomorrow must not pin last_seen"
    listing = strict_json(client.get("/api/v1/signatures?sort=-last_seen", headers=reader))
    assert listing["signatures"][0]["last_seen"].startswith("2026-")
    strict_json(client.get(f"/api/v1/signatures/{signature}/events", headers=reader))
    epidemiology = strict_json(client.get(f"/api/v1/signatures/{signature}/epidemiology", headers=reader))
    assert epidemiology["events"] >= 2
    strict_json(client.get(f"/api/v1/signatures/{signature}/epidemiology?crash_view=live", headers=reader))
    strict_json(client.get("/api/v1/epidemiology/hosts", headers=reader))
    facts = strict_json(client.get(f"/api/v1/signatures/{signature}/triage-bundle", headers=reader))["facts"]
    shown = [facts["first_crash"], facts["last_crash"]]
    shown += [when for kernel in facts["kernels"] for when in (kernel["first_seen"], kernel["last_seen"])]
    assert all(when.startswith("2026-") for when in shown), "first/last crash pinned by year 1 or 9999"
    savings = strict_json(client.get("/api/v1/captures/savings", headers=reader))
    assert all(math.isfinite(v) for v in savings["totals"].values() if isinstance(v, float))
    strict_json(client.get("/api/v1/policy-bundle", headers=reader))
    unsigned = strict_json(client.get("/api/v1/unfingerprinted", headers=reader))["events"]
    assert {event["crashed_at"][:4] for event in unsigned} == {"9999", "0001"}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert "Inf" not in metrics.get_data(as_text=True) .replace('le="+Inf"', "")
    assert "NaN" not in metrics.get_data(as_text=True)


def test_pages_render_over_hostile_rows(client, make_token, hostile_rows) -> None:
    login(client, make_token("read"))
    assert client.get("/signatures").status_code == 200
    assert "gpu-blank-ancient" in client.get("/unfingerprinted").get_data(as_text=True)
    page = client.get(f"/signatures/{hostile_rows}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    top_hosts = {host: re.search(rf"<tr><td>{host}</td>.*?</tr>", html)
                 for host in ("gpu-future", "gpu-ancient")}
    assert all(top_hosts.values()), "both hosts are in the top hosts table"
    for row in top_hosts.values():  # the events list shows each event's own time, as reported
        assert "9999-" not in row[0] and "0001-" not in row[0], f"a last crash of year 9999 or 1: {row[0]}"


def test_suspect_hosts_first_and_last_crash_leave_implausible_times_out(database, hostile_rows) -> None:
    with database.session() as session:
        counts = {row.physical_host: row for row in host_signature_counts(session)}
    assert counts["gpu-future"].last_crash is None and counts["gpu-ancient"].first_crash is None
    assert counts["gpu-future"].events == 1
    ranked = suspect_hosts(list(counts.values()), {host: 1 for host in counts})
    assert all(s["last_crash"] is None or s["last_crash"].startswith("2026-") for s in ranked)


def test_epidemiology_refresh_runs_over_hostile_rows(db_url, client, make_token, hostile_rows) -> None:
    env = os.environ | {"CRASHREG_DATABASE_URL": db_url}
    done = subprocess.run([sys.executable, "-m", "registry", "epidemiology", "refresh"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["signatures"] >= 1
    reader = auth(make_token("read"))
    strict_json(client.get(f"/api/v1/signatures/{hostile_rows}/epidemiology", headers=reader))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_metrics_answer_while_the_database_is_down(tmp_path, backend) -> None:
    """Process and request metrics are what an operator needs most during an outage: the
    scrape answers 200 and says which database figures it left out."""
    url = (f"sqlite:///{tmp_path}/missing-folder/crashreg.db" if backend == "sqlite"
           else f"postgresql://postgres@127.0.0.1:{closed_port()}/crashreg")
    app = create_app(Settings(database_url=url), Database(url))
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    scrape = client.get("/metrics")
    assert scrape.status_code == 200
    body = scrape.get_data(as_text=True)
    assert 'crashreg_http_requests_total{endpoint="/healthz",method="GET",status="200"}' in body
    assert f"crashreg_database_collectors_failed {float(len(wiring().collectors))}" in body
    assert "crashreg_capture_dumps_skipped" not in body


def test_grafanas_signature_view_leaves_implausible_times_out(database, hostile_rows) -> None:
    """rpt_signatures (the fleet and triage tables sort by it) is not pinned to year 9999."""
    with database.session() as session:
        last_seen = session.execute(text("SELECT last_seen FROM rpt_signatures WHERE signature_id = :id"),
                                    {"id": int(hostile_rows)}).scalar_one()
    assert str(last_seen).startswith("2026-"), last_seen
