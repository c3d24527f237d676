"""Prometheus metrics. Works under gunicorn (multiprocess mode) and in a single process.

Figures that live in the database (dedup savings, Jira sync state, ...) are read at scrape
time by collectors that domains register in DATABASE_COLLECTORS.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy.orm import Session

REQUESTS = Counter("crashreg_http_requests_total", "HTTP requests", ["endpoint", "method", "status"])
INGEST_LATENCY = Histogram(
    "crashreg_ingest_seconds",
    "Time to answer a crash report",
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
REPORTS = Counter("crashreg_reports_total", "Crash reports received", ["source", "outcome"])
CAPTURE_ANSWERS = Counter("crashreg_capture_answers_total", "Capture answers given", ["action"])

DatabaseCollector = Callable[[Session], Iterable[Metric]]
DATABASE_COLLECTORS: list[DatabaseCollector] = []


def render(session: Session) -> tuple[bytes, str]:
    """Process metrics (merged across gunicorn workers) followed by database-derived ones."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    body = generate_latest(registry)
    database = CollectorRegistry()
    database.register(_SessionCollector(session))
    return body + generate_latest(database), CONTENT_TYPE_LATEST


class _SessionCollector:
    def __init__(self, session: Session) -> None:
        self.session = session

    def collect(self) -> Iterable[Metric]:
        for collector in DATABASE_COLLECTORS:
            yield from collector(self.session)
