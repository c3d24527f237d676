"""Retention's gc as a scheduled job (registry/retention/gc.py says what a run does)."""

from __future__ import annotations

from sync.retention.run import GcBusy, run_gc
from sync.scheduler import JobContext, register_job

GC_SECONDS = 3600


@register_job("storage-gc", seconds=GC_SECONDS)
def storage_gc(context: JobContext) -> dict[str, object]:
    try:
        outcome = run_gc(context.settings, context.database, now=context.clock())
    except GcBusy as busy:
        return {"skipped": str(busy)}
    return {
        "dumps_deleted": outcome.dumps_deleted,
        "bytes_freed": outcome.bytes_freed,
        "logs_trimmed": outcome.logs_trimmed,
        "log_bytes_freed": outcome.log_bytes_freed,
    }
