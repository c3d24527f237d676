"""Configuration from the environment (names are part of the external contract)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SQLITE_FILE = "crashreg.db"


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
        )

    @property
    def jira_enabled(self) -> bool:
        return bool(self.jira_url and self.jira_token and self.jira_project)

    @property
    def grafana_enabled(self) -> bool:
        return bool(self.grafana_url and self.grafana_token)
