"""Retention on /metrics, read from the database at scrape time (the gc runs in the scheduler,
so a process counter in the web workers would never see it). The history figures (deleted
dumps, trimmed logs) add what the archive took of their rows (its tallies: archived_dumps,
archived_console_trims), so an archive run moves none of them, and no counter seems reset."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from registry.retention.models import ArchivedConsoleTrims, ArchivedDumps, ConsoleTrim, DumpPin
from registry.storage.models import DUMP_STATES
from registry.storage.models import Dump as StoredDump


def _archived(session: Session, count: ColumnElement[int], size: ColumnElement[int]) -> tuple[int, int]:
    """What an archive tally holds: rows, bytes."""
    rows, total = session.execute(
        select(func.coalesce(func.sum(count), 0), func.coalesce(func.sum(size), 0))
    ).one()
    return int(rows), int(total)


def retention_metrics(session: Session) -> Iterable[Metric]:
    by_state = {state: (0, 0) for state in DUMP_STATES}
    for state, objects, stored in session.execute(
        select(StoredDump.state, func.count(), func.coalesce(func.sum(StoredDump.bytes), 0)).group_by(
            StoredDump.state
        )
    ):
        by_state[state] = (int(objects), int(stored))
    archived = _archived(session, ArchivedDumps.dumps, ArchivedDumps.bytes)
    by_state["deleted"] = (by_state["deleted"][0] + archived[0], by_state["deleted"][1] + archived[1])
    objects = GaugeMetricFamily(
        "crashreg_dump_store_objects", "Dumps in the dump store by state", labels=["state"]
    )
    stored = GaugeMetricFamily(
        "crashreg_dump_store_bytes", "Dump bytes in the dump store by state", labels=["state"]
    )
    for state, (count, size) in sorted(by_state.items()):
        objects.add_metric([state], count)
        stored.add_metric([state], size)
    yield objects
    yield stored
    deleted, freed = by_state["deleted"]
    yield CounterMetricFamily("crashreg_retention_dumps_deleted", "Dumps retention deleted", value=deleted)
    yield CounterMetricFamily(
        "crashreg_retention_dump_bytes_freed", "Dump bytes retention freed", value=freed
    )
    trimmed, log_freed = session.execute(
        select(
            func.count(), func.coalesce(func.sum(ConsoleTrim.whole_bytes - ConsoleTrim.kept_bytes), 0)
        ).where(ConsoleTrim.kept_bytes < ConsoleTrim.whole_bytes)
    ).one()
    archived_logs, archived_freed = _archived(session, ArchivedConsoleTrims.logs, ArchivedConsoleTrims.bytes)
    yield CounterMetricFamily(
        "crashreg_retention_console_logs_trimmed",
        "Console logs retention trimmed to their crash report",
        value=int(trimmed) + archived_logs,
    )
    yield CounterMetricFamily(
        "crashreg_retention_console_log_bytes_freed",
        "Console log bytes retention freed",
        value=int(log_freed) + archived_freed,
    )
    pins = session.scalar(select(func.count()).select_from(DumpPin).where(DumpPin.unpinned_at.is_(None)))
    yield GaugeMetricFamily(
        "crashreg_dump_pins", "Standing pins keeping dumps from retention", value=pins or 0
    )
