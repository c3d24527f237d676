"""The symbol store on /metrics, read from the database at scrape time (files arrive through
any process: uploads, other workers' fetches)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.symbols.models import SYMBOL_KINDS, SYMBOL_SOURCES, SymbolFile


def symbol_metrics(session: Session) -> Iterable[Metric]:
    held = {(kind, source): (0, 0) for kind in SYMBOL_KINDS for source in SYMBOL_SOURCES}
    columns = (SymbolFile.kind, SymbolFile.source)
    query = select(*columns, func.count(), func.coalesce(func.sum(SymbolFile.bytes), 0)).group_by(*columns)
    for kind, source, count, size in session.execute(query):
        held[(kind, source)] = (int(count), int(size))
    files = GaugeMetricFamily("crashreg_symbol_files",
                              "Symbol files held by kind and source (upload, debuginfod)",
                              labels=["kind", "source"])
    stored = GaugeMetricFamily("crashreg_symbol_file_bytes",
                               "Bytes of the symbol files held (an object serving both kinds counts in each)",
                               labels=["kind", "source"])
    for (kind, source), (count, size) in sorted(held.items()):
        files.add_metric([kind, source], count)
        stored.add_metric([kind, source], size)
    yield files
    yield stored
