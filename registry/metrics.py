"""Prometheus metrics. Works under gunicorn (multiprocess mode) and in a single process.

Figures that live in the database (dedup savings, Jira sync state, ...) are read at scrape
time by collectors that domains declare on the wiring (registry/domains.py).
"""

from __future__ import annotations

import logging
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
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy.orm import Session

from registry.replica import STATES, ReadReplica

REQUESTS = Counter("crashreg_http_requests_total", "HTTP requests", ["endpoint", "method", "status"])
INGEST_LATENCY = Histogram(
    "crashreg_ingest_seconds",
    "Time to answer a crash report",
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
REPORTS = Counter("crashreg_reports_total", "Crash reports received", ["source", "outcome"])
UNKNOWN_FIELDS = Counter(
    "crashreg_reports_with_unknown_fields_total",
    "New crash reports carrying fields the registry does not know (named in the answer's warnings)",
    ["source"],
)
UNFINGERPRINTED = Counter(
    "crashreg_reports_unfingerprinted_total",
    "New crash reports the signature engine failed on: stored with no signature, answered as an "
    "unknown bug, fingerprinted by the next `crashreg signatures rebuild`",
    ["source"],
)
NO_CRASH = Counter(
    "crashreg_reports_without_crash_total",
    "New crash reports in which the signature engine found no crash (garbled, truncated or "
    "crash-free): stored with no signature, captured within their own budget, listed on /unfingerprinted",
    ["source"],
)
CAPTURE_ANSWERS = Counter("crashreg_capture_answers_total", "Capture answers given", ["action"])

log = logging.getLogger("crashreg.metrics")

DatabaseCollector = Callable[[Session], Iterable[Metric]]


def render(session: Session, collectors: Iterable[DatabaseCollector]) -> tuple[bytes, str]:
    """Process metrics (merged across gunicorn workers) followed by database-derived ones.

    A scrape must answer while the database is down (that is when the request and process
    metrics matter most): each database collector that fails is left out, logged, and counted
    in crashreg_database_collectors_failed.
    """
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    body = generate_latest(registry)
    database = CollectorRegistry()
    database.register(_Collected(database_metrics(session, collectors)))
    return body + generate_latest(database), CONTENT_TYPE_LATEST


def database_metrics(session: Session, collectors: Iterable[DatabaseCollector]) -> list[Metric]:
    collected: list[Metric] = []
    failed = 0
    for collector in collectors:
        try:
            collected += list(collector(session))
        except Exception as error:  # one failing figure must not take the scrape down
            failed += 1
            log.warning("metrics collector %s failed: %s", collector.__name__, type(error).__name__)
            session.rollback()
    collected.append(
        GaugeMetricFamily(
            "crashreg_database_collectors_failed",
            "Database-derived metric groups left out of this scrape (database unreachable or failing)",
            value=failed,
        )
    )
    return collected


def replica_metrics(replica: ReadReplica) -> DatabaseCollector:
    """The read replica's state as this process last found it (docs/operations.md)."""

    def collect(_session: Session) -> Iterable[Metric]:
        health = replica.health()
        state = GaugeMetricFamily(
            "crashreg_read_replica_state",
            "1 for the read replica's current state: replica (reads served there), lagging, "
            "unreachable, not-a-standby (reads on the primary), unchecked",
            labels=["state"],
        )
        for name in STATES:
            state.add_metric([name], 1 if health.state == name else 0)
        lag = GaugeMetricFamily(
            "crashreg_read_replica_lag_bytes",
            "WAL bytes the primary had written at the last check that the replica had not replayed",
            value=health.lag_bytes if health.lag_bytes is not None else float("nan"),
        )
        return [state, lag]

    return collect


class _Collected:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics
