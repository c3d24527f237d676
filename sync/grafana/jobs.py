"""The Grafana job the scheduler runs: data source and dashboards kept in place, annotations
pushed as they happen (first sightings, regressions, kernel rollouts)."""

from __future__ import annotations

from sync.grafana.service import scheduled_sync
from sync.scheduler import JobContext, register_job

SYNC_SECONDS = 300


@register_job("grafana-sync", seconds=SYNC_SECONDS, enabled=lambda settings: settings.grafana_enabled)
def grafana_sync(context: JobContext) -> dict[str, int]:
    return scheduled_sync(context.settings, context.database)
