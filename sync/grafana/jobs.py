"""The scheduler's Grafana jobs.

- `grafana-rollups`: bring what the dashboards read up to date (the rollups folded; SQLite:
  the reporting copy rebuilt), whether Grafana is provisioned through the API or from files.
- `grafana-sync` (when CRASHREG_GRAFANA_URL/_TOKEN are set): data source and dashboards kept
  in place, annotations pushed as they happen (first sightings, regressions, rollouts).
"""

from __future__ import annotations

from sync.grafana.rollups import refresh_rollups
from sync.grafana.service import scheduled_sync
from sync.scheduler import JobContext, register_job

SYNC_SECONDS = 300
ROLLUP_SECONDS = 300


@register_job("grafana-rollups", seconds=ROLLUP_SECONDS)
def grafana_rollups(context: JobContext) -> dict[str, list[str]]:
    return {"refreshed": refresh_rollups(context.database)}


@register_job("grafana-sync", seconds=SYNC_SECONDS, enabled=lambda settings: settings.grafana.enabled)
def grafana_sync(context: JobContext) -> dict[str, int]:
    return scheduled_sync(context.settings, context.database)
