"""The rollups job: the queued event changes folded into the rollups (registry/rollups/fold.py).
Its period is the rollups' staleness: what Grafana and alert rules read is at most this old,
plus the fold's own time (docs/rollups.md)."""

from __future__ import annotations

from registry.rollups.fold import fold
from sync.scheduler import JobContext, register_job

FOLD_SECONDS = 30


@register_job("rollups", seconds=FOLD_SECONDS)
def rollups(context: JobContext) -> dict[str, object]:
    outcome = fold(context.database)
    return {"changes": outcome.changes, "rebuilt": outcome.rebuilt}
