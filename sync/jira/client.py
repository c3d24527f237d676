"""The `jira` library, set up for a sync that does its own retrying, over both Jira flavours.

The library's own retry loop sleeps (up to a minute per try) inside the call; the sync
instead records the failure in the outbox and moves on, so the client runs with
max_retries=0. Searches differ by flavour: Data Center pages /rest/api/2/search by
startAt/total; Cloud removed that and pages the enhanced /search/jql by nextPageToken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from email.utils import parsedate_to_datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import requests
from jira import JIRA, JIRAError

from sync.jira.config import JiraOptions

PAGE_SIZE = 100


def connect(options: JiraOptions) -> JIRA:
    """User empty: the token is a Bearer PAT (Data Center); user set: basic auth (Cloud API token)."""
    auth: dict[str, Any] = (
        {"basic_auth": (options.user, options.token)} if options.user else {"token_auth": options.token}
    )
    return JIRA(server=options.url, max_retries=0, timeout=options.timeout_s, **auth)


class JiraClient:
    """What the sync asks of Jira, in raw JSON (dicts), the same way on both flavours."""

    def __init__(self, options: JiraOptions, jira: JIRA | None = None) -> None:
        self.options = options
        self.jira = jira or connect(options)
        self.cloud = self.jira.deploymentType == "Cloud"
        self._timezone: tzinfo | None = None

    def issue(self, key: str, fields: str) -> dict[str, Any]:
        return self.jira.issue(key, fields=fields).raw

    def search(self, jql: str, fields: list[str], limit: int) -> Iterator[dict[str, Any]]:
        """Up to `limit` issues matching `jql`, page by page in the flavour's own way."""
        seen = 0
        if self.cloud:
            token: str | None = None
            while seen < limit:
                page = self.jira.enhanced_search_issues(
                    jql, nextPageToken=token, maxResults=min(PAGE_SIZE, limit - seen),
                    fields=list(fields), json_result=True,
                )
                issues = page.get("issues", [])
                yield from issues
                seen += len(issues)
                token = page.get("nextPageToken")
                if page.get("isLast", True) or not token or not issues:
                    return
        else:
            while seen < limit:
                page = self.jira.search_issues(
                    jql, startAt=seen, maxResults=min(PAGE_SIZE, limit - seen),
                    fields=list(fields), json_result=True, validate_query=True,
                )
                issues = page.get("issues", [])
                yield from issues
                seen += len(issues)
                if not issues or seen >= int(page.get("total", 0)):
                    return

    def create_issue(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Create; when no answer came back, whether Jira made the issue is unknown."""
        try:
            return self.jira.create_issue(fields=fields, prefetch=False).raw
        except requests.RequestException as error:
            raise UnconfirmedCreate(str(error)) from error
        except JIRAError as error:
            if error.status_code is None or error.status_code >= 500:
                raise UnconfirmedCreate(str(error)) from error
            raise

    def update_issue(self, key: str, fields: dict[str, Any]) -> None:
        """One PUT through the library's session (Issue.update would also read the issue back).

        The session raises JIRAError for an error answer, like every other call here.
        """
        self.jira._session.put(self.jira._get_url(f"issue/{key}"), data=json.dumps({"fields": fields}))

    def transitions(self, key: str) -> list[dict[str, Any]]:
        return self.jira.transitions(key)

    def transition(self, key: str, transition_id: str) -> None:
        self.jira.transition_issue(key, transition_id)

    def comments(self, key: str) -> list[str]:
        return [c.body for c in self.jira.comments(key)]

    def add_comment(self, key: str, body: str) -> None:
        self.jira.add_comment(key, body)

    def upsert_remote_link(self, key: str, global_id: str, url: str, title: str) -> None:
        """POST with a globalId Jira already has for the issue updates that link in place."""
        self.jira.add_remote_link(
            key, {"url": url, "title": title, "icon": {"title": "crashreg"}}, globalId=global_id,
            application={"type": "crashreg", "name": "crashreg"}, relationship="crash signature",
        )

    def user_timezone(self) -> tzinfo:
        """JQL dates are read in the sync user's profile time zone, not UTC."""
        if self._timezone is None:
            name = self.jira.myself().get("timeZone") or "UTC"
            try:
                self._timezone = ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                self._timezone = UTC
        return self._timezone

    def jql_time(self, moment: datetime) -> str:
        """JQL's date format (minute precision) in the user's zone."""
        return moment.astimezone(self.user_timezone()).strftime("%Y-%m-%d %H:%M")


class UnconfirmedCreate(Exception):
    """A create that got no answer: Jira may have made the issue."""


class SearchNotSettled(Exception):
    """Too soon after an unconfirmed create to trust a search that does not find the issue."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"waiting {wait_s:.0f} s for Jira's search index after an unconfirmed create")
        self.wait_s = wait_s


@dataclass(frozen=True)
class Failure:
    """What a failed Jira call means for the message that made it."""

    message: str
    permanent: bool = False
    retry_after_s: float | None = None
    stop_run: bool = True  # Jira is down or throttling us: stop calling it this round
    unconfirmed_create: bool = False


# HTTP status -> (permanent, stop the run). Absent 4xx are permanent; 5xx transient.
STATUS_RULES: dict[int, tuple[bool, bool]] = {
    401: (False, True),  # credentials: an operator fixes them, nothing should be dropped
    403: (False, True),
    408: (False, True),
    409: (False, False),  # Cloud: a concurrent transition on the issue; try again
    423: (False, False),
    429: (False, True),
}


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Retry-After is delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now).total_seconds())
    except (TypeError, ValueError):
        return None


def issue_is_gone(error: Exception) -> bool:
    """Jira's 404 for an issue: deleted, or no longer visible to the sync user."""
    return isinstance(error, JIRAError) and error.status_code == 404


def classify(error: Exception, now: datetime) -> Failure:
    """Sort a failure into retry-later (with a wait Jira may have named) or give up."""
    if isinstance(error, UnconfirmedCreate) and isinstance(error.__cause__, Exception):
        return replace(classify(error.__cause__, now), unconfirmed_create=True)
    if isinstance(error, SearchNotSettled):
        return Failure(str(error), retry_after_s=error.wait_s, stop_run=False)
    if isinstance(error, JIRAError):
        status = error.status_code
        text = f"Jira answered HTTP {status}: {(error.text or '').strip()[:300]}"
        if status is None or status >= 500:
            return Failure(text)
        permanent, stop = STATUS_RULES.get(status, (400 <= status < 500, False))
        headers = error.response.headers if error.response is not None else {}
        return Failure(
            text, permanent=permanent, stop_run=stop,
            retry_after_s=retry_after_seconds(headers.get("Retry-After"), now),
        )
    if isinstance(error, requests.RequestException):
        return Failure(f"cannot reach Jira: {type(error).__name__}: {str(error)[:300]}")
    return Failure(f"{type(error).__name__}: {str(error)[:300]}", stop_run=False)
