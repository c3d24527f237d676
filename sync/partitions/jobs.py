"""Partition maintenance as scheduler jobs: partitions kept ahead (registry/partitions.py), and
old ones archived when CRASHREG_ARCHIVE_AFTER_DAYS is set (registry/retention/archive.py)."""

from __future__ import annotations

from datetime import timedelta

from registry.partitions import maintain
from registry.retention.archive import archive
from registry.storage.store import open_store
from sync.scheduler import JobContext, register_job

# At 1,000 new events a second a width of 1,000,000 ids lasts 16 minutes: two partitions ahead
# checked every minute leave half an hour for a stopped scheduler (docs/partitioning.md).
ENSURE_SECONDS = 60
ARCHIVE_SECONDS = 3600  # a partition spans minutes to days: hourly finds each soon after it is due


@register_job("partitions", seconds=ENSURE_SECONDS)
def partitions_ahead(context: JobContext) -> dict[str, object]:
    return {"made": maintain(context.database.engine)}


@register_job("archive", seconds=ARCHIVE_SECONDS,
              enabled=lambda settings: settings.retention.archive_after_days > 0)
def archive_old_partitions(context: JobContext) -> dict[str, object]:
    """Archive the partitions past CRASHREG_ARCHIVE_AFTER_DAYS (PostgreSQL; nothing on SQLite)."""
    engine, settings = context.database.engine, context.settings
    if engine.dialect.name != "postgresql":
        return {"archived": [], "kept": {}}
    before = context.clock() - timedelta(days=settings.retention.archive_after_days)
    done = archive(engine, open_store(settings.dump_store, settings.public_url), before,
                   capture_window=timedelta(days=settings.capture_window_days))
    return {"archived": [p.name for p in done.archive], "kept": done.skipped}
