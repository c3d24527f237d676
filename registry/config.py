"""Configuration from the environment (names are part of the external contract).

The one place crashreg reads its environment: `Settings.from_env()` makes one object that is then
passed on explicitly (the Flask app's extensions, the CLI's Click context, the scheduler's
JobContext). Outside it only gunicorn.conf.py (gunicorn's own process settings) and the prometheus
client (PROMETHEUS_MULTIPROC_DIR, shared with gunicorn.conf.py) read the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

DEFAULT_SQLITE_FILE = "crashreg.db"


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {value!r}") from exc


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
    jira_outbox_minutes: int = 30  # the oldest change the Jira sync still owes is this old

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AlertThresholds:
        values = {}
        for item in fields(cls):
            default = getattr(cls, item.name)
            name = f"CRASHREG_ALERT_{item.name.upper()}"
            value = _number(env, name, default)
            if value < 0 or (isinstance(default, int) and not float(value).is_integer()):
                raise ValueError(f"{name} must be a non-negative {type(default).__name__}, got {value}")
            values[item.name] = int(value) if isinstance(default, int) else value
        return cls(**values)


def _integer(env: Mapping[str, str], name: str, default: int) -> int:
    value = _number(env, name, default)
    if not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number, got {value:g}")
    return int(value)


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


@dataclass(frozen=True)
class GrafanaSettings:
    """Provisioning Grafana through its API (CRASHREG_GRAFANA_*): on when URL and token are set."""

    url: str | None = None
    token: str | None = None
    db_url: str | None = None  # how Grafana reaches the database; None: derived from the registry's

    @property
    def enabled(self) -> bool:
        return bool(self.url and self.token)


@dataclass(frozen=True)
class RetentionSettings:
    """How long dumps and whole console logs stay (docs/retention.md)."""

    dump_days: int = 30  # a dump that is not one of its signature's K exemplars goes after this
    resolved_grace_days: int = 14  # a resolved signature's dumps go this long after the resolution
    log_days: int = 30  # beyond this only exemplar events keep their whole console log

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetentionSettings:
        variables = {
            "dump_days": "CRASHREG_RETENTION_DUMP_DAYS",
            "resolved_grace_days": "CRASHREG_RETENTION_RESOLVED_GRACE_DAYS",
            "log_days": "CRASHREG_RETENTION_LOG_DAYS",
        }
        values = {}
        for name, variable in variables.items():
            values[name] = _integer(env, variable, getattr(cls, name))
            if values[name] < 0:
                raise ValueError(f"{variable} must be a whole number of days >= 0, got {values[name]}")
        return cls(**values)


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
    # epidemiology: the inventory label whose value names the program a host runs (userspace
    # crashes are compared with the hosts running their program); unset: known from crash reports
    epidemiology_program_label: str | None = None
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    retention: RetentionSettings = field(default_factory=RetentionSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ

        def opt(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        database_url = opt("CRASHREG_DATABASE_URL")
        return cls(
            database_url=database_url or default_database_url(),
            database_url_from_env=database_url is not None,
            public_url=(opt("CRASHREG_PUBLIC_URL") or "http://localhost:8080").rstrip("/"),
            jira=JiraSettings(
                url=opt("CRASHREG_JIRA_URL"),
                user=opt("CRASHREG_JIRA_USER"),
                token=opt("CRASHREG_JIRA_TOKEN"),
                project=opt("CRASHREG_JIRA_PROJECT"),
                webhook_secret=opt("CRASHREG_JIRA_WEBHOOK_SECRET"),
                issue_type=opt("CRASHREG_JIRA_ISSUE_TYPE") or "Bug",
                create_rule=env.get("CRASHREG_JIRA_CREATE_RULE", "every"),
                update_interval_s=_integer(env, "CRASHREG_JIRA_UPDATE_INTERVAL_S", 300),
                reopen_category=opt("CRASHREG_JIRA_REOPEN_CATEGORY") or "new",
                signature_field=opt("CRASHREG_JIRA_SIGNATURE_FIELD"),
                reconcile_limit=_integer(env, "CRASHREG_JIRA_RECONCILE_LIMIT", 500),
            ),
            grafana=GrafanaSettings(
                url=opt("CRASHREG_GRAFANA_URL"),
                token=opt("CRASHREG_GRAFANA_TOKEN"),
                db_url=opt("CRASHREG_GRAFANA_DB_URL"),
            ),
            secret_key=opt("CRASHREG_SECRET_KEY"),
            full_captures_per_window=_integer(env, "CRASHREG_CAPTURE_FULL_PER_WINDOW", 3),
            capture_window_days=_integer(env, "CRASHREG_CAPTURE_WINDOW_DAYS", 7),
            epidemiology_program_label=opt("CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL"),
            alerts=AlertThresholds.from_env(env),
            retention=RetentionSettings.from_env(env),
        )
