"""Keep AHEAD empty partitions of events and reports above their next ids (PostgreSQL)."""

from __future__ import annotations

from registry.partitions import maintain
from sync.scheduler import JobContext, register_job

# At 1,000 new events a second a width of 1,000,000 ids lasts 16 minutes: two partitions ahead
# checked every minute leave half an hour for a stopped scheduler (docs/partitioning.md).
ENSURE_SECONDS = 60


@register_job("partitions", seconds=ENSURE_SECONDS)
def partitions_ahead(context: JobContext) -> dict[str, object]:
    return {"made": maintain(context.database.engine)}
