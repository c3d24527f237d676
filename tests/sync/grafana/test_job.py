"""The scheduler's Grafana job keeps dashboards in place and pushes annotations as they happen."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from registry.config import GrafanaSettings, Settings
from registry.db import Database, utcnow
from sync.grafana.rollups import refresh_rollups, reporting_copy_path
from sync.leader import leader_lock
from sync.scheduler import JobContext, Scheduler, load_jobs
from tests.emulators.grafana import RunningGrafana

REPORT = {
    "report_id": "r-1",
    "source": "crash_kernel",
    "host": {"hostname": "gpu-a017", "kernel_version": "6.1.90-fleet.1"},
    "console_log": "BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
    "RIP: 0010:mlx5e_xmit+0x1a/0x300 [mlx5_core]\nCall Trace:\n <TASK>\n dev_hard_start_xmit+0x91/0x1f0\n",
}


def report_crash(client: Any, make_token: Callable[..., str]) -> None:
    """A new signature, seen an hour ago, through the ingest API."""
    crashed = (utcnow() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    answer = client.post(
        "/api/v1/reports",
        json={**REPORT, "crashed_at": crashed},
        headers={"Authorization": f"Bearer {make_token('report')}"},
    )
    assert answer.status_code == 201


def test_job_is_enabled_only_with_grafana_configured(settings: Settings) -> None:
    job = load_jobs()["grafana-sync"]
    assert not job.enabled(settings)
    assert job.enabled(dataclasses.replace(settings, grafana=GrafanaSettings(url="http://g", token="t")))


def test_rollup_job_refreshes_what_grafana_reads(
    settings: Settings, database: Database, client: Any, make_token: Callable[..., str]
) -> None:
    job = load_jobs()["grafana-rollups"]
    assert job.enabled(settings)  # with or without Grafana configured: file provisioning too
    # Start from an empty registry's rollups and reporting copy.
    refresh_rollups(database)
    report_crash(client, make_token)

    query = "SELECT COALESCE(SUM(events), 0) FROM rpt_daily_breakdown WHERE dimension = 'kind'"

    def crashes() -> int:
        """What Grafana sees: the rollup (PostgreSQL) or the reporting copy (SQLite)."""
        if settings.database_url.startswith("sqlite"):
            copy = reporting_copy_path(settings.database_url)
            if not copy.exists():
                return 0
            with sqlite3.connect(f"file:{copy}?mode=ro", uri=True) as conn:
                return conn.execute(query).fetchone()[0]
        with database.session() as session:
            return session.execute(text(query)).scalar_one()

    assert crashes() == 0  # stale until refreshed
    scheduler = Scheduler(JobContext(settings, database), leader_lock(database.engine), {"r": job})
    try:
        assert scheduler.run_job("r")
    finally:
        scheduler.lock.release()
    assert crashes() == 1


def test_job_provisions_and_pushes_new_sightings_then_survives_an_outage(
    grafana_settings: Settings,
    database: Database,
    grafana: RunningGrafana,
    client: Any,
    make_token: Callable[..., str],
) -> None:
    job = load_jobs()["grafana-sync"]
    scheduler = Scheduler(JobContext(grafana_settings, database), leader_lock(database.engine), {"g": job})
    try:
        assert scheduler.run_job("g")
        assert len(grafana.state.dashboards) == 5 and grafana.state.annotations == []

        report_crash(client, make_token)
        grafana.fail_next(503)
        assert scheduler.run_job("g")  # failed, logged, the scheduler lives on
        assert grafana.state.annotations == []
        scheduler.run_job("g")
        (mark,) = grafana.state.annotations
        assert mark["tags"][:2] == ["crashreg", "first-seen"] and mark["text"].startswith("First sighting: ")
        assert all(record.version == 1 for record in grafana.state.dashboards.values())
        scheduler.run_job("g")
        assert len(grafana.state.annotations) == 1
    finally:
        scheduler.lock.release()
