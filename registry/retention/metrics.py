"""Retention on /metrics, read from the database at scrape time (the gc runs in the scheduler,
so a process counter in the web workers would never see it)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.retention.models import ConsoleTrim, DumpPin
from registry.storage.models import DUMP_STATES
from registry.storage.models import Dump as StoredDump


def retention_metrics(session: Session) -> Iterable[Metric]:
    by_state = {state: (0, 0) for state in DUMP_STATES}
    for state, objects, stored in session.execute(
        select(StoredDump.state, func.count(), func.coalesce(func.sum(StoredDump.bytes), 0)).group_by(
            StoredDump.state
        )
    ):
        by_state[state] = (int(objects), int(stored))
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
    deleted, freed = by_state.get("deleted", (0, 0))
    yield CounterMetricFamily("crashreg_retention_dumps_deleted", "Dumps retention deleted", value=deleted)
    yield CounterMetricFamily(
        "crashreg_retention_dump_bytes_freed", "Dump bytes retention freed", value=freed
    )
    trimmed, log_freed = session.execute(
        select(
            func.count(), func.coalesce(func.sum(ConsoleTrim.whole_bytes - ConsoleTrim.kept_bytes), 0)
        ).where(ConsoleTrim.kept_bytes < ConsoleTrim.whole_bytes)
    ).one()
    yield CounterMetricFamily(
        "crashreg_retention_console_logs_trimmed",
        "Console logs retention trimmed to their crash report",
        value=int(trimmed),
    )
    yield CounterMetricFamily(
        "crashreg_retention_console_log_bytes_freed",
        "Console log bytes retention freed",
        value=int(log_freed),
    )
    pins = session.scalar(select(func.count()).select_from(DumpPin).where(DumpPin.unpinned_at.is_(None)))
    yield GaugeMetricFamily(
        "crashreg_dump_pins", "Standing pins keeping dumps from retention", value=pins or 0
    )
