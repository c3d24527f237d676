"""The sync's options, made from the Jira settings (registry/config.py reads CRASHREG_JIRA_*)."""

from __future__ import annotations

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
    def from_settings(cls, settings: Settings) -> JiraOptions:
        jira = settings.jira
        if not jira.enabled:
            raise ValueError(
                "Jira sync is off: set CRASHREG_JIRA_URL, CRASHREG_JIRA_TOKEN and CRASHREG_JIRA_PROJECT"
            )
        reopen = jira.reopen_category
        if reopen not in REOPEN_CATEGORIES:
            raise ValueError(
                f"CRASHREG_JIRA_REOPEN_CATEGORY={reopen!r}: use one of {', '.join(REOPEN_CATEGORIES)}"
            )
        return cls(
            url=(jira.url or "").rstrip("/"),
            project=jira.project or "",
            token=jira.token or "",
            user=jira.user,
            public_url=settings.public_url.rstrip("/"),
            issue_type=jira.issue_type,
            create_rule=CreateRule.parse(jira.create_rule),
            update_interval=timedelta(seconds=jira.update_interval_s),
            reopen_category=reopen,
            signature_field=jira.signature_field,
            reconcile_limit=jira.reconcile_limit,
        )
