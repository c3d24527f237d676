"""One retention gc at a time: the scheduled job and `crashreg storage gc` take the same lock."""

from __future__ import annotations

from datetime import datetime

from registry.config import Settings
from registry.db import Database
from registry.retention.gc import Doomed, GcOutcome, Progress, collect
from registry.storage.store import open_store
from sync.leader import leader_lock

GC_LOCK = "storage-gc"


class GcBusy(Exception):
    """Another process is running retention's gc."""


def run_gc(
    settings: Settings,
    database: Database,
    dry_run: bool = False,
    progress: Progress = lambda line: None,
    now: datetime | None = None,
    doomed: Doomed = lambda dump: None,
) -> GcOutcome:
    lock = leader_lock(database.engine, GC_LOCK)
    if not lock.try_acquire():
        raise GcBusy("another retention gc is running (the scheduler's storage-gc job or a command)")
    try:
        store = open_store(settings.dump_store, settings.public_url)
        return collect(database, store, settings, dry_run=dry_run, now=now, progress=progress, doomed=doomed)
    finally:
        lock.release()
