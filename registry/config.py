"""Configuration from the environment (names are part of the external contract).

The one place crashreg reads its environment: `Settings.from_env()` makes one object that is then
passed on explicitly (the Flask app's extensions, the CLI's Click context, the scheduler's
JobContext). Outside it only gunicorn.conf.py (gunicorn's own process settings) and the prometheus
client (PROMETHEUS_MULTIPROC_DIR, shared with gunicorn.conf.py) read the environment.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

DEFAULT_SQLITE_FILE = "crashreg.db"


def _number(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(number):  # `nan` passes every comparison's check; `1e400` is infinity
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return number


def _whole_number(name: str, value: str) -> int:
    number = _number(name, value)
    if not number.is_integer():
        raise ValueError(f"{name} must be a whole number, got {number:g}")
    return int(number)


# The longest duration a setting may name, by its variable's unit: a hundred years is "forever"
# for any window or age (a million days put a capture window's start before year 1: every report
# a 500).
LONGEST = {"_DAYS": 36_500, "_HOURS": 876_000, "_MINUTES": 52_560_000}


# A bound on a lock wait past which nothing waits anyway (PostgreSQL's lock_timeout: 24.8 days).
LONGEST_LOCK_WAIT_S = 86_400


def _within_longest(variable: str, value: float, text: str) -> None:
    for unit, longest in LONGEST.items():
        if variable.endswith(unit) and value > longest:
            raise ValueError(f"{variable} must be at most {longest:,} (a hundred years), got {text}")


def _read(
    section: type, env: Mapping[str, str], variables: Mapping[str, str], *, non_negative: bool = False
) -> dict[str, Any]:
    """The fields of `section` whose variable (field name -> variable) is set, each read as its
    default's type. Unset, empty or blank means the field's default: every default is written once,
    on the dataclass field, and nowhere else. A duration (by its unit, LONGEST) is at most a
    hundred years."""
    defaults = {item.name: item.default for item in fields(section)}
    values: dict[str, Any] = {}
    for name, variable in variables.items():
        value = env.get(variable, "").strip()
        if not value:
            continue
        default = defaults[name]
        if isinstance(default, int):
            values[name] = _whole_number(variable, value)
        elif isinstance(default, float):
            values[name] = _number(variable, value)
        else:
            values[name] = value
        if non_negative and values[name] < 0:
            raise ValueError(f"{variable} must be >= 0, got {value}")
        if isinstance(values[name], int | float):
            _within_longest(variable, values[name], value)
    return values


@dataclass(frozen=True)
class AlertThresholds:
    """What the Grafana alert rules fire on (docs/alerting.md says what each one means).

    Environment: CRASHREG_ALERT_<FIELD NAME IN CAPITALS>, e.g. CRASHREG_ALERT_NEW_SIGNATURE_HOSTS.
    """

    interval_s: int = 300  # how often Grafana evaluates the group (a multiple of 10 s)
    new_signature_hosts: int = 5  # a new signature on at least this many distinct hosts...
    new_signature_hours: int = 24  # ...within this many hours of its first sighting
    regression_hours: int = 24  # a resolved signature crashing again within this window
    rollout_days: int = 30  # a kernel/BIOS/SKU that appeared within this many days...
    rollout_ratio: float = 2.0  # ...crashing this many times as often per host as the rest
    rollout_min_events: int = 10  # ...with at least this many crashes since it appeared
    failed_capture_share: float = 0.2  # failed captures above this share...
    failed_capture_min: int = 5  # ...of at least this many captures...
    failed_capture_hours: int = 24  # ...of crashes within this window
    silence_minutes: int = 120  # no report received for this long...
    silence_baseline_days: int = 7  # ...from a fleet that sent at least...
    silence_baseline_reports: int = 20  # ...this many reports in this many days
    new_share: float = 0.5  # more than this share of recent crashes opening new signatures...
    new_share_min_events: int = 20  # ...out of at least this many crashes...
    new_share_hours: int = 6  # ...within this window: fingerprinting (dedup) has broken
    warning_panic_hours: int = 24  # a signature only live hosts reported before panicking within this window
    jira_outbox_minutes: int = 30  # the oldest change the Jira sync still owes is this old
    no_crash_share: float = 0.2  # more than this share of recent reports holding no crash...
    no_crash_min: int = 10  # ...at least this many of them...
    no_crash_hours: int = 6  # ...within this window: consoles garbled, or crashes the engine misses

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AlertThresholds:
        variables = {item.name: f"CRASHREG_ALERT_{item.name.upper()}" for item in fields(cls)}
        return cls(**_read(cls, env, variables, non_negative=True))


@dataclass(frozen=True)
class JiraSettings:
    """The Jira sync's settings (CRASHREG_JIRA_*, docs/configuration.md). The sync is on when URL,
    token and project are set; sync/jira/config.py checks the create rule and reopen category
    when it starts, so `crashreg jira check` can name a bad one."""

    url: str | None = None
    user: str | None = None
    token: str | None = None
    project: str | None = None
    webhook_secret: str | None = None
    issue_type: str = "Bug"
    create_rule: str = "every"
    update_interval_s: int = 300
    reopen_category: str = "new"
    signature_field: str | None = None
    reconcile_limit: int = 500

    @property
    def enabled(self) -> bool:
        return bool(self.url and self.token and self.project)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JiraSettings:
        return cls(**_read(cls, env, {
            "url": "CRASHREG_JIRA_URL",
            "user": "CRASHREG_JIRA_USER",
            "token": "CRASHREG_JIRA_TOKEN",
            "project": "CRASHREG_JIRA_PROJECT",
            "webhook_secret": "CRASHREG_JIRA_WEBHOOK_SECRET",
            "issue_type": "CRASHREG_JIRA_ISSUE_TYPE",
            "create_rule": "CRASHREG_JIRA_CREATE_RULE",
            "update_interval_s": "CRASHREG_JIRA_UPDATE_INTERVAL_S",
            "reopen_category": "CRASHREG_JIRA_REOPEN_CATEGORY",
            "signature_field": "CRASHREG_JIRA_SIGNATURE_FIELD",
            "reconcile_limit": "CRASHREG_JIRA_RECONCILE_LIMIT",
        }))


@dataclass(frozen=True)
class GrafanaSettings:
    """Provisioning Grafana through its API (CRASHREG_GRAFANA_*): on when URL and token are set."""

    url: str | None = None
    token: str | None = None
    db_url: str | None = None  # how Grafana reaches the database; None: derived from the registry's

    @property
    def enabled(self) -> bool:
        return bool(self.url and self.token)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GrafanaSettings:
        return cls(**_read(cls, env, {
            "url": "CRASHREG_GRAFANA_URL",
            "token": "CRASHREG_GRAFANA_TOKEN",
            "db_url": "CRASHREG_GRAFANA_DB_URL",
        }))


@dataclass(frozen=True)
class RetentionSettings:
    """How long dumps and whole console logs stay (docs/retention.md)."""

    dump_days: int = 30  # a dump that is not one of its signature's K exemplars goes after this
    resolved_grace_days: int = 14  # a resolved signature's dumps go this long after the resolution
    log_days: int = 30  # beyond this only exemplar events keep their whole console log
    symbol_days: int = 0  # a symbol file no report names goes after this (0: symbol files are kept)
    # PostgreSQL: partitions whose newest event is older than this go to the dump store (0: never;
    # docs/partitioning.md, "Archive")
    archive_after_days: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetentionSettings:
        return cls(**_read(cls, env, {
            "dump_days": "CRASHREG_RETENTION_DUMP_DAYS",
            "resolved_grace_days": "CRASHREG_RETENTION_RESOLVED_GRACE_DAYS",
            "log_days": "CRASHREG_RETENTION_LOG_DAYS",
            "symbol_days": "CRASHREG_RETENTION_SYMBOL_DAYS",
            "archive_after_days": "CRASHREG_ARCHIVE_AFTER_DAYS",
        }, non_negative=True))


@dataclass(frozen=True)
class ReadReplicaSettings:
    """Reads sent to a PostgreSQL streaming replica (CRASHREG_READ_*, docs/operations.md#a-read-replica):
    on when the URL is set. A read goes to the replica while it has replayed everything the
    primary had written `max_lag_s` before its last check; otherwise to the primary."""

    url: str | None = field(default=None, repr=False)
    max_lag_s: float = 30.0  # how stale a page, panel or epidemiology read may be
    check_interval_s: float = 2.0  # how often a process looks at the replica's replay position

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ReadReplicaSettings:
        return cls(**_read(cls, env, {"url": "CRASHREG_READ_DATABASE_URL"}), **_read(cls, env, {
            "max_lag_s": "CRASHREG_READ_MAX_LAG_S",
            "check_interval_s": "CRASHREG_READ_CHECK_INTERVAL_S",
        }, non_negative=True))


DEFAULT_DUMP_DIR = "crashreg-dumps"


@dataclass(frozen=True)
class DumpStoreSettings:
    """Where kept dumps go (CRASHREG_DUMP_*, docs/storage.md): `s3://bucket/prefix` (boto3 reads
    credentials, region and endpoint itself: AWS_* variables, AWS_ENDPOINT_URL_S3, profiles), or
    a local directory (`file:///path` or a path) for one machine."""

    url: str = field(default_factory=lambda: str(Path.cwd() / DEFAULT_DUMP_DIR))
    # the store's endpoint as the hosts reach it, written into the pre-signed URLs they get
    # (unset: the endpoint the registry itself uses)
    public_endpoint: str | None = None
    upload_ttl_s: int = 900  # how long a pre-signed part URL lives
    download_ttl_s: int = 900  # how long an engineer's download link lives
    part_size_mb: int = 16  # the smallest part size; raised for dumps past 10,000 parts

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DumpStoreSettings:
        where = _read(cls, env, {"url": "CRASHREG_DUMP_STORE",
                                 "public_endpoint": "CRASHREG_DUMP_STORE_PUBLIC_ENDPOINT"})
        return cls(**where, **_read(cls, env, {
            "upload_ttl_s": "CRASHREG_DUMP_UPLOAD_TTL_S",
            "download_ttl_s": "CRASHREG_DUMP_DOWNLOAD_TTL_S",
            "part_size_mb": "CRASHREG_DUMP_PART_SIZE_MB",
        }, non_negative=True))


DEFAULT_SYMBOL_CACHE_DIR = "crashreg-symbols"


@dataclass(frozen=True)
class SymbolSettings:
    """Where debug info comes from and where it is kept near the registry (CRASHREG_DEBUGINFOD_*,
    CRASHREG_SYMBOL_*, docs/symbols.md). The durable copies are in the dump store's backend."""

    # debuginfod servers, tried in order (space-separated, as elfutils' DEBUGINFOD_URLS)
    debuginfod_urls: tuple[str, ...] = ()
    timeout_s: float = 10.0  # one server's connect and read timeout (each read, not the whole file)
    max_time_s: float = 300.0  # one file's whole transfer from one server (as DEBUGINFOD_MAXTIME)
    # how long a request to the registry's /debuginfod/ waits on the servers before a 503 (the
    # fetch goes on): well within gunicorn's worker timeout, the worker serving reports meanwhile
    request_wait_s: float = 15.0
    negative_ttl_s: int = 600  # how long a build-id no server had is not asked for again
    cache_dir: str = field(default_factory=lambda: str(Path.cwd() / DEFAULT_SYMBOL_CACHE_DIR))
    cache_max_mb: int = 32768  # the cache's cap: past it, the least recently used files go (0: none)
    max_file_mb: int = 16384  # the largest symbol file accepted (uploaded or fetched)

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mb << 20

    @property
    def cache_max_bytes(self) -> int:
        return self.cache_max_mb << 20

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SymbolSettings:
        values = _read(cls, env, {"cache_dir": "CRASHREG_SYMBOL_CACHE_DIR"})
        values |= _read(cls, env, {
            "timeout_s": "CRASHREG_DEBUGINFOD_TIMEOUT_S",
            "max_time_s": "CRASHREG_DEBUGINFOD_MAXTIME_S",
            "request_wait_s": "CRASHREG_DEBUGINFOD_REQUEST_WAIT_S",
            "negative_ttl_s": "CRASHREG_DEBUGINFOD_NEGATIVE_TTL_S",
            "max_file_mb": "CRASHREG_SYMBOL_MAX_FILE_MB",
            "cache_max_mb": "CRASHREG_SYMBOL_CACHE_MAX_MB",
        }, non_negative=True)
        urls = tuple(url.rstrip("/") for url in env.get("CRASHREG_DEBUGINFOD_URLS", "").split())
        return cls(debuginfod_urls=urls, **values)


# The URL schemes crashreg's drivers take (psycopg 3, the standard library's sqlite3): another
# (postgresql+psycopg2://, mysql://) would fail deep in SQLAlchemy with a missing module.
DATABASE_SCHEMES = ("postgresql://", "postgresql+psycopg://", "sqlite://", "sqlite+pysqlite://")


def _speaks(variable: str, url: str) -> None:
    if "://" not in url:
        raise ValueError(f"{variable} {url[:80]!r} is not a database URL "
                         "(postgresql://user@host/db or sqlite:///path)")
    if not url.startswith(DATABASE_SCHEMES):
        scheme = url.partition("://")[0]
        raise ValueError(
            f"{variable}: crashreg speaks to PostgreSQL through psycopg 3 (postgresql://user@host/db) "
            f"or to SQLite (sqlite:///path), not {scheme!r}")


def default_database_url() -> str:
    """A SQLite file in the working directory: the embedded default."""
    return f"sqlite:///{Path.cwd() / DEFAULT_SQLITE_FILE}"


@dataclass(frozen=True)
class Settings:
    database_url: str = field(default_factory=default_database_url)
    # True when CRASHREG_DATABASE_URL set it (commands say where their database came from)
    database_url_from_env: bool = False
    public_url: str = "http://localhost:8080"
    jira: JiraSettings = field(default_factory=JiraSettings)
    grafana: GrafanaSettings = field(default_factory=GrafanaSettings)
    secret_key: str | None = field(default=None, repr=False)  # signs web session cookies
    max_body_bytes: int = 2 * 1024 * 1024
    full_captures_per_window: int = 3
    capture_window_days: int = 7
    # Reports stored without a signature (no recognisable crash, or the engine failed on them):
    # full captures per host and per fleet in the capture window (docs/capture.md)
    no_signature_full_per_host: int = 1
    no_signature_full_per_fleet: int = 3
    # epidemiology: the inventory label whose value names the program a host runs (userspace
    # crashes are compared with the hosts running their program); unset: known from crash reports
    epidemiology_program_label: str | None = None
    # PostgreSQL: ids per partition of events and reports, chosen once, when migration 0034
    # partitions them (docs/partitioning.md); later partitions take the newest one's width
    partition_width: int = 1_000_000
    # How long a reporter's request (a report, a capture's record, a dump upload's start) waits for
    # a lock another transaction holds (an operator's ALTER TABLE, LOCK TABLE, VACUUM FULL, a
    # migration; SQLite: any writer) before answering the retryable 503: reporters retry and
    # spool, and a sync worker held for the lock's whole life holds every page and /healthz
    # too. 0: as long as the lock is held, as every other connection waits (registry/db.py).
    ingest_lock_wait_s: float = 3.0
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    dump_store: DumpStoreSettings = field(default_factory=DumpStoreSettings)
    symbols: SymbolSettings = field(default_factory=SymbolSettings)
    read_replica: ReadReplicaSettings = field(default_factory=ReadReplicaSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values = _read(cls, env, {
            "database_url": "CRASHREG_DATABASE_URL",
            "public_url": "CRASHREG_PUBLIC_URL",
            "secret_key": "CRASHREG_SECRET_KEY",
            "epidemiology_program_label": "CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL",
            "partition_width": "CRASHREG_PARTITION_WIDTH",
        })
        values |= _read(cls, env, {
            # a negative K skipped a new bug's first crashes; a negative window made every one full
            "full_captures_per_window": "CRASHREG_CAPTURE_FULL_PER_WINDOW",
            "capture_window_days": "CRASHREG_CAPTURE_WINDOW_DAYS",
            "no_signature_full_per_host": "CRASHREG_CAPTURE_NO_SIGNATURE_PER_HOST",
            "no_signature_full_per_fleet": "CRASHREG_CAPTURE_NO_SIGNATURE_PER_FLEET",
            "ingest_lock_wait_s": "CRASHREG_INGEST_LOCK_WAIT_S",
        }, non_negative=True)
        settings = cls(
            **values,
            database_url_from_env="database_url" in values,
            jira=JiraSettings.from_env(env),
            grafana=GrafanaSettings.from_env(env),
            alerts=AlertThresholds.from_env(env),
            retention=RetentionSettings.from_env(env),
            dump_store=DumpStoreSettings.from_env(env),
            symbols=SymbolSettings.from_env(env),
            read_replica=ReadReplicaSettings.from_env(env),
        )
        for variable, url in (("CRASHREG_DATABASE_URL", settings.database_url),
                              ("CRASHREG_READ_DATABASE_URL", settings.read_replica.url)):
            if url:
                _speaks(variable, url)
        if settings.partition_width < 1:
            raise ValueError(f"CRASHREG_PARTITION_WIDTH must be >= 1, got {settings.partition_width}")
        if settings.ingest_lock_wait_s > LONGEST_LOCK_WAIT_S:  # PostgreSQL refuses it: every report a 503
            raise ValueError(f"CRASHREG_INGEST_LOCK_WAIT_S must be at most {LONGEST_LOCK_WAIT_S:,} (a day), "
                             f"got {settings.ingest_lock_wait_s:g}")
        if settings.capture_window_days < 1:  # a window of no days holds no capture: every crash full
            raise ValueError(f"CRASHREG_CAPTURE_WINDOW_DAYS must be >= 1, got {settings.capture_window_days}")
        urls = (settings.database_url, settings.read_replica.url)
        if settings.read_replica.url and not all(url.startswith("postgresql") for url in urls if url):
            raise ValueError(
                "CRASHREG_READ_DATABASE_URL is a PostgreSQL streaming replica of CRASHREG_DATABASE_URL: "
                "both must be postgresql:// URLs"
            )
        return replace(settings, public_url=settings.public_url.rstrip("/"))
