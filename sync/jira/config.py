"""The sync's options: the contract's CRASHREG_JIRA_* settings plus tuning with safe defaults."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta

from registry.config import Settings

REOPEN_CATEGORIES = ("new", "indeterminate", "none")


@dataclass(frozen=True)
class CreateRule:
    """When a signature earns a Jira issue (default: at its first event)."""

    min_events: int = 1
    min_hosts: int = 1

    @classmethod
    def parse(cls, text: str) -> CreateRule:
        """`every` | `events>=N` | `hosts>=N` | `events>=N,hosts>=M`."""
        if text.strip() in ("", "every"):
            return cls()
        values = {}
        for part in text.split(","):
            match = re.fullmatch(r"\s*(events|hosts)\s*>=\s*(\d+)\s*", part)
            if match is None:
                raise ValueError(
                    f"CRASHREG_JIRA_CREATE_RULE: cannot read {part!r}; "
                    "use every, events>=N, hosts>=N or both separated by a comma"
                )
            values[f"min_{match.group(1)}"] = max(1, int(match.group(2)))
        return cls(**values)

    @property
    def every(self) -> bool:
        return self.min_events <= 1 and self.min_hosts <= 1

    def allows(self, events: int, hosts: int) -> bool:
        return events >= self.min_events and hosts >= self.min_hosts


@dataclass(frozen=True)
class JiraOptions:
    url: str
    project: str
    token: str
    user: str | None
    public_url: str
    issue_type: str = "Bug"
    create_rule: CreateRule = CreateRule()
    update_interval: timedelta = timedelta(minutes=5)
    reopen_category: str = "new"
    signature_field: str | None = None
    reconcile_limit: int = 500
    reconcile_lookback: timedelta = timedelta(days=1)
    reconcile_overlap: timedelta = timedelta(minutes=2)
    batch: int = 200
    timeout_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings, environ: dict[str, str] | None = None) -> JiraOptions:
        if not settings.jira_enabled:
            raise ValueError(
                "Jira sync is off: set CRASHREG_JIRA_URL, CRASHREG_JIRA_TOKEN and CRASHREG_JIRA_PROJECT"
            )
        env = os.environ if environ is None else environ
        reopen = env.get("CRASHREG_JIRA_REOPEN_CATEGORY", "new").strip() or "new"
        if reopen not in REOPEN_CATEGORIES:
            raise ValueError(
                f"CRASHREG_JIRA_REOPEN_CATEGORY={reopen!r}: use one of {', '.join(REOPEN_CATEGORIES)}"
            )
        return cls(
            url=(settings.jira_url or "").rstrip("/"),
            project=settings.jira_project or "",
            token=settings.jira_token or "",
            user=settings.jira_user,
            public_url=settings.public_url.rstrip("/"),
            issue_type=env.get("CRASHREG_JIRA_ISSUE_TYPE", "").strip() or "Bug",
            create_rule=CreateRule.parse(env.get("CRASHREG_JIRA_CREATE_RULE", "every")),
            update_interval=timedelta(seconds=int(env.get("CRASHREG_JIRA_UPDATE_INTERVAL_S") or 300)),
            reopen_category=reopen,
            signature_field=env.get("CRASHREG_JIRA_SIGNATURE_FIELD", "").strip() or None,
            reconcile_limit=int(env.get("CRASHREG_JIRA_RECONCILE_LIMIT") or 500),
        )
