"""Configuration from the environment (names are part of the external contract)."""

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


def default_database_url() -> str:
    """A SQLite file in the working directory: the embedded default."""
    return f"sqlite:///{Path.cwd() / DEFAULT_SQLITE_FILE}"


@dataclass(frozen=True)
class Settings:
    database_url: str = field(default_factory=default_database_url)
    public_url: str = "http://localhost:8080"
    jira_url: str | None = None
    jira_user: str | None = None
    jira_token: str | None = None
    jira_project: str | None = None
    jira_webhook_secret: str | None = None
    grafana_url: str | None = None
    grafana_token: str | None = None
    grafana_db_url: str | None = None
    secret_key: str | None = field(default=None, repr=False)  # signs web session cookies
    max_body_bytes: int = 2 * 1024 * 1024
    full_captures_per_window: int = 3
    capture_window_days: int = 7
    # epidemiology: the inventory label whose value names the program a host runs (userspace
    # crashes are compared with the hosts running their program); unset: known from crash reports
    epidemiology_program_label: str | None = None
    alerts: AlertThresholds = field(default_factory=AlertThresholds)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ

        def opt(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        return cls(
            database_url=opt("CRASHREG_DATABASE_URL") or default_database_url(),
            public_url=(opt("CRASHREG_PUBLIC_URL") or "http://localhost:8080").rstrip("/"),
            jira_url=opt("CRASHREG_JIRA_URL"),
            jira_user=opt("CRASHREG_JIRA_USER"),
            jira_token=opt("CRASHREG_JIRA_TOKEN"),
            jira_project=opt("CRASHREG_JIRA_PROJECT"),
            jira_webhook_secret=opt("CRASHREG_JIRA_WEBHOOK_SECRET"),
            grafana_url=opt("CRASHREG_GRAFANA_URL"),
            grafana_token=opt("CRASHREG_GRAFANA_TOKEN"),
            grafana_db_url=opt("CRASHREG_GRAFANA_DB_URL"),
            secret_key=opt("CRASHREG_SECRET_KEY"),
            full_captures_per_window=int(opt("CRASHREG_CAPTURE_FULL_PER_WINDOW") or 3),
            capture_window_days=int(opt("CRASHREG_CAPTURE_WINDOW_DAYS") or 7),
            epidemiology_program_label=opt("CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL"),
            alerts=AlertThresholds.from_env(env),
        )

    @property
    def jira_enabled(self) -> bool:
        return bool(self.jira_url and self.jira_token and self.jira_project)

    @property
    def grafana_enabled(self) -> bool:
        return bool(self.grafana_url and self.grafana_token)
