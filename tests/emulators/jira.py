"""A stateful Jira REST emulator, served over real HTTP, for driving the real `jira` library.

Two flavours, chosen at construction:

* ``datacenter``: ``/rest/api/2`` only, ``serverInfo.deploymentType`` "DataCenter",
  offset search ``/rest/api/2/search`` (startAt/maxResults/total), users by ``name``,
  Bearer personal access tokens or basic auth.
* ``cloud``: ``/rest/api/2`` and ``/rest/api/3`` (ADF descriptions on v3), the enhanced
  ``/search/jql`` (nextPageToken/isLast, bounded JQL only, ``id``-only by default), the old
  ``/search`` answering 410 Gone, users by ``accountId``, basic auth with an API token.

State lives in memory behind one lock. Time comes from an injectable clock so tests can
move an hour forward without sleeping. Failure injection: outages (503 or refused
connections), a lost response to the next create (the issue is made, the client sees the
connection drop), and a request-rate limiter answering 429 with Retry-After.
Webhooks are queued per event and delivered by :meth:`JiraEmulator.deliver_webhooks`
(signed with ``X-Hub-Signature: sha256=<HMAC>``, retried on failure the way Jira does).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import logging
import random
import re
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from flask import Flask, Response, request
from werkzeug.serving import make_server

from tests.support.http import SERVER_POLL_S

STATUS_CATEGORIES = {
    "new": {"id": 2, "key": "new", "colorName": "blue-gray", "name": "To Do"},
    "indeterminate": {"id": 4, "key": "indeterminate", "colorName": "yellow",
                      "name": "In Progress"},
    "done": {"id": 3, "key": "done", "colorName": "green", "name": "Done"},
}

# (id, name, category) per flavour: the names differ on purpose, so that a client that maps
# status names instead of status categories breaks against one of the two flavours.
WORKFLOWS = {
    "datacenter": [
        ("1", "Open", "new"), ("3", "In Progress", "indeterminate"),
        ("4", "Reopened", "new"), ("5", "Resolved", "done"), ("6", "Closed", "done"),
    ],
    "cloud": [
        ("10000", "To Do", "new"), ("3", "In Progress", "indeterminate"),
        ("10001", "Done", "done"), ("10002", "Won't Do", "done"),
    ],
}
# transition id -> (name, target status id); a transition to a done status sets a resolution.
TRANSITIONS = {
    "datacenter": [
        ("4", "Start Progress", "3"), ("5", "Resolve Issue", "5"), ("2", "Close Issue", "6"),
        ("3", "Reopen Issue", "4"), ("301", "Stop Progress", "1"),
    ],
    "cloud": [
        ("11", "To Do", "10000"), ("21", "In Progress", "3"), ("31", "Done", "10001"),
        ("41", "Won't Do", "10002"),
    ],
}
RESOLUTIONS = [
    ("1", "Fixed"), ("2", "Won't Fix"), ("3", "Duplicate"), ("4", "Incomplete"),
    ("5", "Cannot Reproduce"), ("10000", "Done"), ("10001", "Won't Do"),
]
ISSUE_TYPES = [("1", "Bug", False), ("3", "Task", False), ("5", "Sub-task", True)]
SYSTEM_FIELDS = [
    ("summary", "Summary", "string"), ("description", "Description", "string"),
    ("issuetype", "Issue Type", "issuetype"), ("project", "Project", "project"),
    ("labels", "Labels", "array"), ("status", "Status", "status"),
    ("resolution", "Resolution", "resolution"), ("resolutiondate", "Resolved", "datetime"),
    ("fixVersions", "Fix Version/s", "array"), ("assignee", "Assignee", "user"),
    ("reporter", "Reporter", "user"), ("created", "Created", "datetime"),
    ("updated", "Updated", "datetime"), ("priority", "Priority", "priority"),
    ("issuelinks", "Linked Issues", "array"), ("comment", "Comment", "comments-page"),
]
SETTABLE_SYSTEM_FIELDS = {"summary", "description", "issuetype", "project", "labels",
                          "fixVersions", "assignee", "reporter", "priority"}
WEBHOOK_RETRYABLE = {408, 409, 425, 429} | set(range(500, 600))
WEBHOOK_MAX_RETRIES = 5
GONE_MESSAGE = ("The requested API has been removed. Please migrate to the /rest/api/3/search/jql"
                " API. A full migration guideline is available at "
                "https://developer.atlassian.com/changelog/#CHANGE-2046")
JQL_DATE_FORMATS = ("%Y/%m/%d %H:%M", "%Y-%m-%d %H:%M", "%Y/%m/%d", "%Y-%m-%d")
LOG = logging.getLogger(__name__)


class JiraHttpError(Exception):
    """Answer the current request with a Jira-shaped error body."""

    def __init__(self, status: int, messages: list[str] | None = None,
                 errors: dict[str, str] | None = None, headers: dict[str, str] | None = None):
        super().__init__(status, messages, errors)
        self.status = status
        self.body = {"errorMessages": messages or [], "errors": errors or {}}
        self.headers = headers or {}


def jira_time(moment: datetime) -> str:
    """Jira's timestamp format: 2026-11-29T12:00:00.000+0000."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{moment.microsecond // 1000:03d}+0000"


@dataclass
class User:
    name: str
    account_id: str
    display_name: str
    email: str
    password: str | None = None
    pat: str | None = None


@dataclass
class Issue:
    id: int
    key: str
    project_key: str
    fields: dict[str, Any]
    created: datetime
    updated: datetime
    comments: list[dict[str, Any]] = field(default_factory=list)
    remote_links: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Webhook:
    id: int
    name: str
    url: str
    events: list[str]
    secret: str | None


@dataclass
class Delivery:
    webhook: Webhook
    identifier: str
    body: bytes
    due: datetime
    retry: int = 0
    outcome: str = "pending"  # pending | delivered | failed
    attempts: list[str] = field(default_factory=list)


@dataclass
class RateLimit:
    requests: int
    window_s: int
    window_start: datetime | None = None
    used: int = 0


class JiraEmulator:
    """One Jira site. ``start()`` serves it; ``url`` is its base URL."""

    def __init__(self, flavour: str = "datacenter", project: str = "CRASH",
                 clock: Callable[[], datetime] | None = None, seed: int = 5):
        if flavour not in WORKFLOWS:
            raise ValueError(f"unknown flavour {flavour!r}")
        self.flavour = flavour
        self.cloud = flavour == "cloud"
        self.clock = clock or (lambda: datetime.now(UTC))
        self.lock = threading.RLock()
        self.rng = random.Random(seed)
        self.ids = itertools.count(10001)
        self.users: dict[str, User] = {}
        self.projects: dict[str, dict[str, Any]] = {}
        self.issues: dict[str, Issue] = {}
        self.statuses = {sid: (name, cat) for sid, name, cat in WORKFLOWS[flavour]}
        self.transitions = TRANSITIONS[flavour]
        self.custom_fields: dict[str, dict[str, Any]] = {}
        self.webhooks: list[Webhook] = []
        self.deliveries: list[Delivery] = []
        self.request_log: list[tuple[str, str, int]] = []
        self.outage: str | None = None  # None | "503" | "refuse"
        self.lose_next_create = False
        self.rate_limit: RateLimit | None = None
        self.denied: dict[str, set[str]] = {}  # user name -> project permissions they lack
        self.index_lag = timedelta(0)  # Cloud: a new issue is found by search only after this
        self.moved_keys: dict[str, str] = {}  # an issue's old key -> its key since a move
        self.server = None
        self.thread: threading.Thread | None = None
        self.port = 0
        self.add_user("crashbot", "Crash Bot", password="bot-api-token", pat="bot-pat")
        self.add_user("alice", "Alice Engineer", password="alice-pw", pat="alice-pat")
        self.add_project(project)
        self.add_custom_field("Crash Signature")
        self.app = self._build_app()

    # ----------------------------------------------------------------- set-up helpers
    def add_user(self, name: str, display: str, password: str | None = None,
                 pat: str | None = None) -> User:
        user = User(name=name, account_id=f"5b10ac8d82e05b22cc7d4e{len(self.users):02d}",
                    display_name=display, email=f"{name}@example.com",
                    password=password, pat=pat)
        self.users[name] = user
        return user

    def add_project(self, key: str, versions: tuple[str, ...] = ("6.8.1", "6.9.0")) -> None:
        pid = str(10000 + len(self.projects))
        self.projects[key] = {
            "id": pid, "key": key, "name": f"{key} project", "counter": 0,
            "versions": [{"id": str(20000 + i + 100 * len(self.projects)), "name": name,
                          "released": False, "archived": False, "projectId": int(pid)}
                         for i, name in enumerate(versions)],
        }

    def add_version(self, project_key: str, name: str) -> None:
        project = self.projects[project_key]
        project["versions"].append({"id": str(30000 + len(project["versions"])), "name": name,
                                    "released": False, "archived": False,
                                    "projectId": int(project["id"])})

    def add_custom_field(self, name: str) -> str:
        fid = f"customfield_{10100 + len(self.custom_fields)}"
        self.custom_fields[fid] = {"name": name}
        return fid

    # ----------------------------------------------------------------- serving
    def start(self) -> JiraEmulator:
        self.server = make_server("127.0.0.1", self.port, self.app, threaded=True)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, args=(SERVER_POLL_S,),
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def go_down(self, mode: str = "503") -> None:
        """Start an outage: every request answers 503, or the port refuses connections."""
        self.outage = mode
        if mode == "refuse":
            self.stop()

    def come_back(self) -> None:
        if self.outage == "refuse":
            self.start()
        self.outage = None

    def throttle(self, requests_per_window: int, window_s: int = 60) -> None:
        """Allow N requests per window of the emulator clock; beyond that answer 429."""
        self.rate_limit = RateLimit(requests_per_window, window_s)

    def calls(self, method: str | None = None, pattern: str = "") -> list[tuple[str, str, int]]:
        """Requests seen so far (method, path, status), filtered."""
        rx = re.compile(pattern)
        return [c for c in self.request_log
                if (method is None or c[0] == method) and rx.search(c[1])]

    # ----------------------------------------------------------------- Jira-side actions
    def issue(self, key: str) -> Issue:
        return self.issues[key]

    def find_by_label(self, label: str) -> list[Issue]:
        return [i for i in self.issues.values() if label in i.fields["labels"]]

    def transition(self, key: str, target_category: str, resolution: str | None = None,
                   actor: str = "alice") -> None:
        """What an engineer does in the UI: move an issue to a status of the given category."""
        with self.lock:
            issue = self.issues[key]
            tid = next(t for t, _, to in self.transitions
                       if self.statuses[to][1] == target_category
                       and to != issue.fields["status"]["id"])
            fields = {"resolution": {"name": resolution}} if resolution else {}
            self._apply_transition(issue, tid, fields, actor)

    def edit(self, key: str, fields: dict[str, Any], actor: str = "alice") -> None:
        with self.lock:
            issue = self.issues[key]
            before = self._snapshot(issue)
            self._set_fields(issue, fields, creating=False)
            self._touch(issue, "jira:issue_updated", "issue_generic", actor, before)

    def delete(self, key: str) -> None:
        """What an admin does: the issue is gone; reads of its key answer 404 and search
        no longer finds it (Jira keeps no trace a REST client can see)."""
        with self.lock:
            del self.issues[key]

    def move(self, key: str, project_key: str, actor: str = "alice") -> str:
        """What an admin does: move the issue to another project. It keeps its id and gets that
        project's next key; reads of its old key still find it. Returns the new key."""
        with self.lock:
            issue = self.issues.pop(key)
            before = self._snapshot(issue)
            project = self.projects[project_key]
            project["counter"] += 1
            issue.key, issue.project_key = f"{project_key}-{project['counter']}", project_key
            issue.fields["project"] = {k: v for k, v in self._project_json(project).items()
                                       if k != "issueTypes"}
            self.issues[issue.key] = issue
            self.moved_keys.update({old: issue.key for old, new in self.moved_keys.items() if new == key})
            self.moved_keys[key] = issue.key
            self._touch(issue, "jira:issue_updated", "issue_moved", actor, before)
            return issue.key

    def link_duplicate(self, duplicate_key: str, original_key: str) -> None:
        """`duplicate_key` duplicates `original_key` (Jira's Duplicate link type)."""
        with self.lock:
            self._add_issue_link("Duplicate", self.issues[duplicate_key],
                                 self.issues[original_key])

    # ----------------------------------------------------------------- webhooks
    def register_webhook(self, url: str, secret: str | None,
                         events: tuple[str, ...] = ("jira:issue_created", "jira:issue_updated",
                                                    "comment_created")) -> Webhook:
        hook = Webhook(id=len(self.webhooks) + 1, name=f"hook-{len(self.webhooks) + 1}",
                       url=url, events=list(events), secret=secret)
        self.webhooks.append(hook)
        return hook

    def deliver_webhooks(self) -> list[Delivery]:
        """Deliver every delivery due at the emulator clock; failures are rescheduled.

        Jira retries deliveries answered with 408/409/425/429/5xx or not answered at all,
        up to five times, 5-15 minutes apart, with the same identifier and an
        ``X-Atlassian-Webhook-Retry`` count. Other answers end the delivery.
        """
        now = self.clock()
        with self.lock:
            due = [d for d in self.deliveries if d.outcome == "pending" and d.due <= now]
        for delivery in due:
            headers = {"Content-Type": "application/json; charset=utf-8",
                       "X-Atlassian-Webhook-Identifier": delivery.identifier,
                       "X-Atlassian-Webhook-Flow": "Primary"}
            if delivery.retry:
                headers["X-Atlassian-Webhook-Retry"] = str(delivery.retry)
            if delivery.webhook.secret:
                digest = hmac.new(delivery.webhook.secret.encode(), delivery.body,
                                  hashlib.sha256).hexdigest()
                headers["X-Hub-Signature"] = f"sha256={digest}"
            try:
                status = requests.post(delivery.webhook.url, data=delivery.body,
                                       headers=headers, timeout=10).status_code
                delivery.attempts.append(str(status))
                retry = status in WEBHOOK_RETRYABLE
                ok = 200 <= status < 300
            except requests.RequestException as exc:
                delivery.attempts.append(type(exc).__name__)
                retry, ok = True, False
            if ok:
                delivery.outcome = "delivered"
            elif retry and delivery.retry < WEBHOOK_MAX_RETRIES:
                delivery.retry += 1
                delivery.due = now + timedelta(seconds=self.rng.uniform(300, 900))
            else:
                delivery.outcome = "failed"
        return due

    def _queue_event(self, event: str, issue: Issue, actor: str,
                     changelog: list[dict[str, Any]] | None,
                     comment: dict[str, Any] | None = None) -> None:
        payload: dict[str, Any] = {
            "timestamp": int(self.clock().timestamp() * 1000), "webhookEvent": event,
            "user": self._user_json(self.users[actor]),
            "issue": self._issue_json(issue, "2", None),
        }
        if event.startswith("jira:issue"):
            payload["issue_event_type_name"] = (
                "issue_created" if event == "jira:issue_created" else "issue_generic")
        if changelog is not None:
            payload["changelog"] = {"id": str(next(self.ids)), "items": changelog}
        if comment is not None:
            payload["comment"] = comment
        body = json.dumps(payload).encode()
        for hook in self.webhooks:
            if event in hook.events:
                self.deliveries.append(Delivery(hook, str(uuid.UUID(int=self.rng.getrandbits(128))),
                                                body, self.clock()))

    # ----------------------------------------------------------------- state changes
    def _snapshot(self, issue: Issue) -> dict[str, Any]:
        return json.loads(json.dumps(issue.fields))

    def _touch(self, issue: Issue, event: str, type_name: str, actor: str,
               before: dict[str, Any] | None) -> None:
        changelog = None
        if before is not None:
            changelog = [{"field": name, "fieldtype": "jira",
                          "fromString": _display(before.get(name)),
                          "toString": _display(value)}
                         for name, value in issue.fields.items() if before.get(name) != value]
            if not changelog and event == "jira:issue_updated":
                return  # Jira neither bumps `updated` nor fires an event for a no-op edit
        issue.updated = self.clock()
        self._queue_event(event, issue, actor, changelog)

    def _set_fields(self, issue: Issue, fields: dict[str, Any], creating: bool) -> None:
        errors = {}
        for name, value in fields.items():
            if name not in SETTABLE_SYSTEM_FIELDS and name not in self.custom_fields:
                errors[name] = (f"Field '{name}' cannot be set. It is not on the appropriate "
                                "screen, or unknown.")
                continue
            try:
                issue.fields[name] = self._coerce(issue, name, value)
            except ValueError as exc:
                errors[name] = str(exc)
        if errors:
            raise JiraHttpError(400, errors=errors)

    def _coerce(self, issue: Issue, name: str, value: Any) -> Any:
        if name == "summary":
            if not value or not str(value).strip():
                raise ValueError("You must specify a summary of the issue.")
            if "\n" in value or "\r" in value:
                raise ValueError("The summary is invalid because it contains newline characters.")
            if len(value) > 255:
                raise ValueError("Summary must be less than 255 characters.")
            return value
        if name == "description":
            return _adf_to_text(value) if isinstance(value, dict) else value
        if name == "labels":
            for label in value:
                self._check_label(label)
            return list(dict.fromkeys(value))
        if name == "fixVersions":
            return [self._version(issue.project_key, v) for v in value]
        if name in ("assignee", "reporter"):
            return self._user_ref(value)
        if name in ("issuetype", "project", "priority"):
            return issue.fields.get(name) if name != "priority" else value
        return value

    @staticmethod
    def _check_label(label: str) -> None:
        if not isinstance(label, str) or not label:
            raise ValueError("Label must be a non-empty string.")
        if " " in label:
            raise ValueError(f"The label '{label}' contains spaces which is invalid.")
        if len(label) > 255:
            raise ValueError("The label must not exceed 255 characters.")

    def _version(self, project_key: str, ref: dict[str, Any]) -> dict[str, Any]:
        for version in self.projects[project_key]["versions"]:
            if ref.get("id") == version["id"] or ref.get("name") == version["name"]:
                return {k: v for k, v in version.items() if k != "projectId"}
        raise ValueError(f"Version name '{ref.get('name', ref.get('id'))}' is not valid")

    def _user_ref(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        for user in self.users.values():
            if value.get("accountId") == user.account_id or (
                    not self.cloud and value.get("name") == user.name):
                return {"name": user.name}
        raise ValueError(f"User '{value.get('name') or value.get('accountId')}' does not exist.")

    def _apply_update_ops(self, issue: Issue, ops: dict[str, list[dict[str, Any]]],
                          actor: str) -> None:
        for name, operations in ops.items():
            for op in operations:
                ((verb, arg),) = op.items()
                if name == "comment" and verb == "add":
                    self._add_comment(issue, arg["body"], actor)
                elif name in ("labels", "fixVersions") and verb in ("add", "remove", "set"):
                    current = list(issue.fields[name])
                    if verb == "set":
                        current = [self._coerce(issue, name, [x])[0] for x in arg] \
                            if name == "fixVersions" else list(arg)
                    elif verb == "add":
                        item = self._coerce(issue, name, [arg])[0]
                        current = current + ([item] if item not in current else [])
                    else:
                        current = [x for x in current
                                   if x != arg and not (isinstance(x, dict)
                                                        and x["name"] == arg.get("name"))]
                    issue.fields[name] = self._coerce(issue, name, current)
                elif verb == "set":
                    self._set_fields(issue, {name: arg}, creating=False)
                else:
                    raise JiraHttpError(400, errors={name: f"Operation '{verb}' not supported"})

    def _add_comment(self, issue: Issue, body: Any, actor: str) -> dict[str, Any]:
        now = jira_time(self.clock())
        comment = {"id": str(next(self.ids)), "body": body if isinstance(body, str)
                   else _adf_to_text(body), "author": self._user_json(self.users[actor]),
                   "created": now, "updated": now}
        issue.comments.append(comment)
        return comment

    def _available_transitions(self, issue: Issue) -> list[tuple[str, str, str]]:
        current = issue.fields["status"]["id"]
        current_done = self.statuses[current][1] == "done"
        result = []
        for tid, name, target in self.transitions:
            if target == current:
                continue
            # a classic workflow: from a done status the only way out is to reopen
            if current_done and (self.statuses[target][1] == "done"
                                 or (not self.cloud and name != "Reopen Issue")):
                continue
            if not current_done and name == "Reopen Issue":
                continue
            result.append((tid, name, target))
        return result

    def _apply_transition(self, issue: Issue, tid: str, fields: dict[str, Any],
                          actor: str) -> None:
        match = [t for t in self._available_transitions(issue) if t[0] == str(tid)]
        if not match:
            raise JiraHttpError(400, [f"Transition id '{tid}' is not valid for this issue."])
        before = self._snapshot(issue)
        _, _, target = match[0]
        name, category = self.statuses[target]
        issue.fields["status"] = self._status_json(target)
        if category == "done":
            wanted = (fields.get("resolution") or {}).get("name") or (
                "Won't Do" if name == "Won't Do" else "Done" if self.cloud else "Fixed")
            resolution = next((r for r in RESOLUTIONS if r[1] == wanted), None)
            if resolution is None:
                raise JiraHttpError(400, errors={"resolution": f"Resolution '{wanted}' is not valid"})
            issue.fields["resolution"] = {"id": resolution[0], "name": resolution[1],
                                          "self": f"{self.url}/rest/api/2/resolution/{resolution[0]}",
                                          "description": ""}
            issue.fields["resolutiondate"] = jira_time(self.clock())
        else:
            issue.fields["resolution"] = None
            issue.fields["resolutiondate"] = None
        extra = {k: v for k, v in fields.items() if k != "resolution"}
        if extra:
            self._set_fields(issue, extra, creating=False)
        self._touch(issue, "jira:issue_updated", "issue_generic", actor, before)

    def _add_issue_link(self, type_name: str, outward: Issue, inward: Issue) -> None:
        link_type = {"id": "10002", "name": type_name, "inward": "is duplicated by",
                     "outward": "duplicates"}
        link_id = str(next(self.ids))
        outward.fields["issuelinks"].append({"id": link_id, "type": link_type,
                                             "outwardIssue": self._issue_ref(inward)})
        inward.fields["issuelinks"].append({"id": link_id, "type": link_type,
                                            "inwardIssue": self._issue_ref(outward)})
        outward.updated = inward.updated = self.clock()

    # ----------------------------------------------------------------- JSON shapes
    def _status_json(self, sid: str) -> dict[str, Any]:
        name, category = self.statuses[sid]
        return {"self": f"{self.url}/rest/api/2/status/{sid}", "description": "", "name": name,
                "id": sid, "statusCategory": {
                    "self": f"{self.url}/rest/api/2/statuscategory/"
                            f"{STATUS_CATEGORIES[category]['id']}",
                    **STATUS_CATEGORIES[category]}}

    def _user_json(self, user: User) -> dict[str, Any]:
        if self.cloud:
            return {"self": f"{self.url}/rest/api/2/user?accountId={user.account_id}",
                    "accountId": user.account_id, "accountType": "atlassian",
                    "displayName": user.display_name, "active": True, "timeZone": "Etc/UTC"}
        return {"self": f"{self.url}/rest/api/2/user?username={user.name}", "name": user.name,
                "key": f"JIRAUSER{10000 + list(self.users).index(user.name)}",
                "emailAddress": user.email, "displayName": user.display_name, "active": True,
                "timeZone": "Etc/UTC"}

    def _issue_ref(self, issue: Issue) -> dict[str, Any]:
        return {"id": str(issue.id), "key": issue.key,
                "self": f"{self.url}/rest/api/2/issue/{issue.id}",
                "fields": {"summary": issue.fields["summary"],
                           "status": issue.fields["status"]}}

    def _issue_type_json(self, itid: str) -> dict[str, Any]:
        _, name, subtask = next(t for t in ISSUE_TYPES if t[0] == itid)
        return {"self": f"{self.url}/rest/api/2/issuetype/{itid}", "id": itid,
                "name": name, "subtask": subtask, "description": ""}

    def _project_json(self, project: dict[str, Any], expand: str = "") -> dict[str, Any]:
        body = {"self": f"{self.url}/rest/api/2/project/{project['id']}", "id": project["id"],
                "key": project["key"], "name": project["name"], "projectTypeKey": "software"}
        if "issueTypes" in expand or not self.cloud:
            body["issueTypes"] = [self._issue_type_json(t[0]) for t in ISSUE_TYPES]
        return body

    def _issue_json(self, issue: Issue, api: str, wanted: set[str] | None) -> dict[str, Any]:
        fields = dict(issue.fields)
        fields["assignee"] = fields["assignee"] and self._user_json(
            self.users[fields["assignee"]["name"]])
        fields["reporter"] = fields["reporter"] and self._user_json(
            self.users[fields["reporter"]["name"]])
        fields["created"] = jira_time(issue.created)
        fields["updated"] = jira_time(issue.updated)
        fields["comment"] = {"comments": issue.comments, "maxResults": len(issue.comments),
                             "total": len(issue.comments), "startAt": 0}
        if api == "3":
            fields["description"] = _text_to_adf(fields["description"])
            fields["comment"] = dict(fields["comment"], comments=[
                dict(c, body=_text_to_adf(c["body"])) for c in issue.comments])
        for fid in self.custom_fields:
            fields.setdefault(fid, None)
        if wanted is not None and "*all" not in wanted and "*navigable" not in wanted:
            fields = {k: v for k, v in fields.items() if k in wanted}
        return {"expand": "renderedFields,names,schema,operations,editmeta,changelog",
                "id": str(issue.id), "self": f"{self.url}/rest/api/{api}/issue/{issue.id}",
                "key": issue.key, "fields": fields}

    def _fields_json(self) -> list[dict[str, Any]]:
        system = [{"id": fid, "key": fid, "name": name, "custom": False, "orderable": True,
                   "navigable": True, "searchable": True, "clauseNames": [fid],
                   "schema": {"type": kind, "system": fid}}
                  for fid, name, kind in SYSTEM_FIELDS]
        custom = [{"id": fid, "key": fid, "name": spec["name"], "custom": True,
                   "orderable": True, "navigable": True, "searchable": True,
                   "clauseNames": [f"cf[{fid.split('_')[1]}]", spec["name"]],
                   "schema": {"type": "string", "customId": int(fid.split("_")[1]),
                              "custom": "com.atlassian.jira.plugin.system.customfieldtypes:"
                                        "textfield"}}
                  for fid, spec in self.custom_fields.items()]
        return system + custom

    # ----------------------------------------------------------------- request plumbing
    def _authenticate(self) -> User:
        header = request.headers.get("Authorization", "")
        scheme, _, credential = header.partition(" ")
        user = None
        if scheme == "Bearer" and not self.cloud:
            user = next((u for u in self.users.values() if u.pat and
                         hmac.compare_digest(u.pat, credential)), None)
        elif scheme == "Basic":
            try:
                login, _, secret = base64.b64decode(credential).decode().partition(":")
            except ValueError:
                login = secret = ""
            user = next((u for u in self.users.values()
                         if login in (u.name, u.email) and u.password and
                         hmac.compare_digest(u.password, secret)), None)
        if user is None:
            raise JiraHttpError(401, ["You are not authenticated. Authentication required to "
                                      "perform this operation."],
                                headers={"WWW-Authenticate": 'Basic realm="protected-area"'})
        return user

    def _check_rate(self) -> None:
        limit = self.rate_limit
        if limit is None:
            return
        now = self.clock()
        if limit.window_start is None or now >= limit.window_start + timedelta(
                seconds=limit.window_s):
            limit.window_start, limit.used = now, 0
        limit.used += 1
        if limit.used > limit.requests:
            wait = limit.window_start + timedelta(seconds=limit.window_s) - now
            retry_after = max(1, int(wait.total_seconds() + 0.999))
            raise JiraHttpError(429, ["Rate limit exceeded."], headers={
                "Retry-After": str(retry_after), "X-RateLimit-Limit": str(limit.requests),
                "X-RateLimit-Remaining": "0"})

    def _build_app(self) -> Flask:
        app = Flask(f"jira-emulator-{self.flavour}")
        emulator = self

        @app.before_request
        def gate():
            if emulator.outage == "503":
                raise JiraHttpError(503, ["Service Unavailable"])
            with emulator.lock:
                emulator._check_rate()

        @app.errorhandler(JiraHttpError)
        def jira_error(exc: JiraHttpError):
            return Response(json.dumps(exc.body), exc.status, exc.headers,
                            mimetype="application/json")

        @app.after_request
        def log(response: Response):
            emulator.request_log.append((request.method, request.path, response.status_code))
            return response

        @app.route("/rest/api/<api>/<path:rest>", methods=["GET", "POST", "PUT", "DELETE"])
        def api(api: str, rest: str):
            if api not in (("2", "3", "latest") if emulator.cloud else ("2", "latest")):
                raise JiraHttpError(404, [f"No API version {api} here."])
            api = "2" if api == "latest" else api
            if rest == "serverInfo":
                return emulator._json(emulator._server_info())
            user = emulator._authenticate()
            with emulator.lock:
                for method, pattern, handler in emulator.ROUTES:
                    match = re.fullmatch(pattern, rest)
                    if match and method == request.method:
                        result = handler(emulator, api, user, *match.groups())
                        return result if isinstance(result, Response) else emulator._json(result)
            raise JiraHttpError(404, [f"null for uri: {request.url}"])

        @app.route("/rest/webhooks/1.0/webhook", methods=["GET", "POST"])
        def webhooks():
            emulator._authenticate()
            if request.method == "GET":
                return emulator._json([{"name": h.name, "url": h.url, "events": h.events,
                                        "self": f"{emulator.url}/rest/webhooks/1.0/webhook/{h.id}"}
                                       for h in emulator.webhooks])
            body = request.get_json()
            hook = emulator.register_webhook(body["url"], body.get("secret"),
                                             tuple(body.get("events", [])))
            return emulator._json({"name": body.get("name", hook.name), "url": hook.url,
                                   "events": hook.events,
                                   "self": f"{emulator.url}/rest/webhooks/1.0/webhook/{hook.id}"},
                                  201)

        @app.route("/rest/applinks/latest/listApplicationlinks")
        def applinks():
            emulator._authenticate()
            return emulator._json({"list": []})

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        return app

    @staticmethod
    def _json(body: Any, status: int = 200) -> Response:
        if status == 204:
            return Response(status=204)
        return Response(json.dumps(body), status, mimetype="application/json")

    def _server_info(self) -> dict[str, Any]:
        base = {"baseUrl": self.url, "serverTime": jira_time(self.clock()),
                "serverTitle": "Jira", "buildDate": "2026-01-01T00:00:00.000+0000"}
        if self.cloud:
            return {**base, "version": "1001.0.0-SNAPSHOT", "versionNumbers": [1001, 0, 0],
                    "deploymentType": "Cloud", "buildNumber": 100280}
        return {**base, "version": "9.12.12", "versionNumbers": [9, 12, 12],
                "deploymentType": "DataCenter", "buildNumber": 9120012}

    def _get_issue(self, ref: str) -> Issue:
        key = self.moved_keys.get(ref.upper(), ref.upper())  # Jira still answers an old key
        issue = self.issues.get(key) or next(
            (i for i in self.issues.values() if str(i.id) == ref), None)
        if issue is None:
            raise JiraHttpError(404, ["Issue does not exist or you do not have permission to "
                                      "see it."])
        return issue

    def _get_project(self, ref: str) -> dict[str, Any]:
        project = self.projects.get(ref) or next(
            (p for p in self.projects.values() if p["id"] == ref), None)
        if project is None:
            raise JiraHttpError(404, [f"No project could be found with key '{ref}'."])
        return project

    # ----------------------------------------------------------------- handlers
    def h_myself(self, api, user):
        return self._user_json(user) | {"emailAddress": user.email}

    def h_user_search(self, api, user):
        term = (request.args.get("query") if self.cloud
                else request.args.get("username")) or ""
        term = term.lower()
        return [self._user_json(u) | {"emailAddress": u.email} for u in self.users.values()
                if term and (term in u.name.lower() or term in u.display_name.lower()
                             or term in u.email.lower() or term == u.account_id.lower())]

    def h_my_permissions(self, api, user):
        wanted = [p for p in (request.args.get("permissions") or "").split(",") if p]
        if request.args.get("projectKey"):
            self._get_project(request.args["projectKey"])
        return {"permissions": {
            key: {"id": str(n), "key": key, "name": key.replace("_", " ").title(), "type": "PROJECT",
                  "description": "", "havePermission": key not in self.denied.get(user.name, set())}
            for n, key in enumerate(wanted)}}

    def h_project_statuses(self, api, user, ref):
        self._get_project(ref)
        statuses = [self._status_json(sid) for sid in self.statuses]
        return [{"self": f"{self.url}/rest/api/2/issuetype/{itid}", "id": itid, "name": name,
                 "subtask": subtask, "statuses": statuses} for itid, name, subtask in ISSUE_TYPES]

    def h_fields(self, api, user):
        return self._fields_json()

    def h_issuetypes(self, api, user):
        return [self._issue_type_json(t[0]) for t in ISSUE_TYPES]

    def h_projects(self, api, user):
        return [self._project_json(p, request.args.get("expand", ""))
                for p in self.projects.values()]

    def h_project(self, api, user, ref):
        return self._project_json(self._get_project(ref), request.args.get("expand", ""))

    def h_project_versions(self, api, user, ref):
        project = self._get_project(ref)
        return [dict(v, self=f"{self.url}/rest/api/2/version/{v['id']}")
                for v in project["versions"]]

    def h_statuses(self, api, user):
        return [self._status_json(sid) for sid in self.statuses]

    def h_resolutions(self, api, user):
        return [{"id": rid, "name": name, "description": "",
                 "self": f"{self.url}/rest/api/2/resolution/{rid}"} for rid, name in RESOLUTIONS]

    def _createmeta_fields(self) -> dict[str, Any]:
        required = {"summary", "issuetype", "project"}
        return {fid: {"required": fid in required, "name": spec["name"], "fieldId": fid,
                      "key": fid, "schema": spec["schema"], "operations": ["set"]}
                for spec in self._fields_json()
                if (fid := spec["id"]) in SETTABLE_SYSTEM_FIELDS or spec["custom"]}

    def h_createmeta_types(self, api, user, ref):
        self._get_project(ref)
        values = [self._issue_type_json(t[0]) for t in ISSUE_TYPES]
        return {"maxResults": 50, "startAt": 0, "total": len(values), "isLast": True,
                "values": values}

    def h_createmeta_fields(self, api, user, ref, itid):
        self._get_project(ref)
        values = list(self._createmeta_fields().values())
        return {"maxResults": 50, "startAt": 0, "total": len(values), "isLast": True,
                "values": values}

    def h_createmeta_legacy(self, api, user):
        keys = request.args.get("projectKeys", "").split(",")
        with_fields = "fields" in request.args.get("expand", "")
        projects = []
        for project in self.projects.values():
            if keys != [""] and project["key"] not in keys:
                continue
            types = [self._issue_type_json(t[0]) for t in ISSUE_TYPES]
            if with_fields:
                types = [dict(t, fields=self._createmeta_fields()) for t in types]
            projects.append(dict(self._project_json(project), issuetypes=types))
        return {"expand": "projects", "projects": projects}

    def h_create_issue(self, api, user):
        body = request.get_json(force=True)
        fields = body.get("fields") or {}
        errors = {}
        project = None
        pref = fields.get("project") or {}
        if not pref:
            errors["project"] = "project is required"
        else:
            project = self.projects.get(pref.get("key")) or next(
                (p for p in self.projects.values() if p["id"] == str(pref.get("id"))), None)
            if project is None:
                errors["project"] = "valid project is required"
        itref = fields.get("issuetype") or {}
        itype = next((t for t in ISSUE_TYPES if t[0] == str(itref.get("id"))
                      or t[1] == itref.get("name")), None)
        if itype is None:
            errors["issuetype"] = ("valid issue type is required" if itref
                                   else "issue type is required")
        if not fields.get("summary"):
            errors["summary"] = "You must specify a summary of the issue."
        if errors:
            raise JiraHttpError(400, errors=errors)
        project["counter"] += 1
        now = self.clock()
        initial = next(iter(self.statuses))
        issue = Issue(id=next(self.ids), key=f"{project['key']}-{project['counter']}",
                      project_key=project["key"], created=now, updated=now, fields={
                          "summary": "", "description": None, "labels": [], "fixVersions": [],
                          "assignee": None, "reporter": {"name": user.name},
                          "issuetype": self._issue_type_json(itype[0]),
                          "project": {k: v for k, v in self._project_json(project).items()
                                      if k != "issueTypes"},
                          "status": self._status_json(initial), "resolution": None,
                          "resolutiondate": None, "priority": {"id": "3", "name": "Medium"},
                          "issuelinks": []})
        settable = {k: v for k, v in fields.items() if k not in ("project", "issuetype")}
        self._set_fields(issue, settable, creating=True)
        self.issues[issue.key] = issue
        self._touch(issue, "jira:issue_created", "issue_created", user.name, None)
        if self.lose_next_create:
            self.lose_next_create = False
            _drop_connection()
        return self._json({"id": str(issue.id), "key": issue.key,
                           "self": f"{self.url}/rest/api/{api}/issue/{issue.id}"}, 201)

    def h_get_issue(self, api, user, ref):
        return self._issue_json(self._get_issue(ref), api, _wanted_fields(None))

    def h_put_issue(self, api, user, ref):
        issue = self._get_issue(ref)
        body = request.get_json(force=True)
        before = self._snapshot(issue)
        comments_before = len(issue.comments)
        fields = body.get("fields") or {}
        overlap = set(fields) & set(body.get("update") or {})
        if overlap:
            raise JiraHttpError(400, errors={
                f: "Field can be set either in 'fields' or in 'update', not both" for f in overlap})
        self._set_fields(issue, fields, creating=False)
        self._apply_update_ops(issue, body.get("update") or {}, user.name)
        if len(issue.comments) > comments_before:
            issue.updated = self.clock()
        self._touch(issue, "jira:issue_updated", "issue_generic", user.name, before)
        return self._json(None, 204)

    def h_assignee(self, api, user, ref):
        issue = self._get_issue(ref)
        body = request.get_json(force=True)
        before = self._snapshot(issue)
        try:
            issue.fields["assignee"] = self._user_ref(
                None if body in (None, {}) or body.get("name", "") is None else body)
        except ValueError as exc:
            raise JiraHttpError(400, errors={"assignee": str(exc)}) from exc
        self._touch(issue, "jira:issue_updated", "issue_assigned", user.name, before)
        return self._json(None, 204)

    def h_transitions(self, api, user, ref):
        issue = self._get_issue(ref)
        with_fields = "transitions.fields" in request.args.get("expand", "")
        result = []
        for tid, name, target in self._available_transitions(issue):
            entry = {"id": tid, "name": name, "to": self._status_json(target),
                     "hasScreen": self.statuses[target][1] == "done", "isGlobal": False,
                     "isInitial": False, "isAvailable": True, "isConditional": False,
                     "isLooped": False}
            if with_fields:
                entry["fields"] = ({"resolution": {
                    "required": False, "name": "Resolution", "key": "resolution",
                    "operations": ["set"], "schema": {"type": "resolution", "system": "resolution"},
                    "allowedValues": self.h_resolutions(api, user)}}
                    if self.statuses[target][1] == "done" else {})
            result.append(entry)
        return {"expand": "transitions", "transitions": result}

    def h_do_transition(self, api, user, ref):
        issue = self._get_issue(ref)
        body = request.get_json(force=True)
        tid = str((body.get("transition") or {}).get("id", ""))
        if not tid:
            raise JiraHttpError(400, ["Missing 'transition' identifier"])
        self._apply_transition(issue, tid, body.get("fields") or {}, user.name)
        comments = ((body.get("update") or {}).get("comment")) or []
        for op in comments:
            self._add_comment(issue, op["add"]["body"], user.name)
        return self._json(None, 204)

    def h_comments(self, api, user, ref):
        issue = self._get_issue(ref)
        comments = issue.comments if api == "2" else [
            dict(c, body=_text_to_adf(c["body"])) for c in issue.comments]
        return {"startAt": 0, "maxResults": 5000, "total": len(comments), "comments": comments}

    def h_add_comment(self, api, user, ref):
        issue = self._get_issue(ref)
        body = request.get_json(force=True).get("body")
        if not body:
            raise JiraHttpError(400, errors={"comment": "Comment body can not be empty!"})
        if api == "3" and not isinstance(body, dict):
            raise JiraHttpError(400, errors={"comment": "Comment body is not valid!"})
        comment = self._add_comment(issue, body, user.name)
        issue.updated = self.clock()
        self._queue_event("comment_created", issue, user.name, None, comment)
        return self._json(dict(comment, self=f"{self.url}/rest/api/{api}/issue/{issue.id}"
                                              f"/comment/{comment['id']}"), 201)

    def h_remote_links(self, api, user, ref):
        issue = self._get_issue(ref)
        global_id = request.args.get("globalId")
        if global_id is not None:
            link = next((rl for rl in issue.remote_links if rl.get("globalId") == global_id), None)
            if link is None:
                raise JiraHttpError(404, ["No remote link with the given globalId found."])
            return link
        return issue.remote_links

    def h_add_remote_link(self, api, user, ref):
        issue = self._get_issue(ref)
        body = request.get_json(force=True)
        obj = body.get("object") or {}
        if not obj.get("url") or not obj.get("title"):
            raise JiraHttpError(400, errors={"object": "'url' and 'title' are required"})
        global_id = body.get("globalId")
        existing = next((rl for rl in issue.remote_links
                         if global_id and rl.get("globalId") == global_id), None)
        link_id = existing["id"] if existing else int(next(self.ids))
        link = {"id": link_id, "self": f"{self.url}/rest/api/{api}/issue/{issue.key}/remotelink/"
                                       f"{link_id}", **body}
        if existing:
            issue.remote_links[issue.remote_links.index(existing)] = link
        else:
            issue.remote_links.append(link)
        issue.updated = self.clock()
        return self._json({"id": link_id, "self": link["self"]}, 200 if existing else 201)

    def h_issue_link(self, api, user):
        body = request.get_json(force=True)
        outward = self._get_issue(body["outwardIssue"]["key"])
        inward = self._get_issue(body["inwardIssue"]["key"])
        self._add_issue_link(body["type"]["name"], inward, outward)
        return self._json(None, 201)

    def h_search_offset(self, api, user):
        if self.cloud:
            raise JiraHttpError(410, [GONE_MESSAGE])
        args = _search_args()
        issues = JqlQuery.parse(args.get("jql", ""), self).run(self._indexed())
        start = int(args.get("startAt", 0) or 0)
        size = min(int(args.get("maxResults", 50) or 50), 1000)
        page = issues[start:start + size]
        return {"expand": "schema,names", "startAt": start, "maxResults": size,
                "total": len(issues),
                "issues": [self._issue_json(i, api, _wanted_fields(args.get("fields"), "*navigable"))
                           for i in page]}

    def h_search_jql(self, api, user):
        if not self.cloud:
            raise JiraHttpError(404, [f"null for uri: {request.url}"])
        args = _search_args()
        query = JqlQuery.parse(args.get("jql", ""), self)
        if not query.clauses:
            raise JiraHttpError(400, ["Unbounded JQL queries are not allowed here. Please add a "
                                      "search restriction to your query."])
        issues = query.run(self._indexed())
        token = args.get("nextPageToken")
        start = _decode_page_token(token) if token else 0
        size = min(int(args.get("maxResults", 50) or 50), 5000)
        page = issues[start:start + size]
        is_last = start + size >= len(issues)
        body: dict[str, Any] = {
            "issues": [self._issue_json(i, api, _wanted_fields(args.get("fields"), "id"))
                       for i in page], "isLast": is_last}
        if not is_last:
            body["nextPageToken"] = base64.urlsafe_b64encode(
                f"offset:{start + size}".encode()).decode()
        return body

    def _indexed(self) -> list[Issue]:
        """What search sees: issues older than the index lag (reads by key see all at once)."""
        cutoff = self.clock() - self.index_lag
        return [i for i in self.issues.values() if i.created <= cutoff]

    ROUTES: list[tuple[str, str, Callable[..., Any]]] = [
        ("GET", r"myself", h_myself),
        ("GET", r"field", h_fields),
        ("GET", r"user/search", h_user_search),
        ("GET", r"mypermissions", h_my_permissions),
        ("GET", r"project/([^/]+)/statuses", h_project_statuses),
        ("GET", r"issuetype", h_issuetypes),
        ("GET", r"project", h_projects),
        ("GET", r"project/([^/]+)", h_project),
        ("GET", r"project/([^/]+)/versions", h_project_versions),
        ("GET", r"status", h_statuses),
        ("GET", r"resolution", h_resolutions),
        ("GET", r"issue/createmeta", h_createmeta_legacy),
        ("GET", r"issue/createmeta/([^/]+)/issuetypes", h_createmeta_types),
        ("GET", r"issue/createmeta/([^/]+)/issuetypes/([^/]+)", h_createmeta_fields),
        ("POST", r"issue", h_create_issue),
        ("GET", r"issue/([^/]+)", h_get_issue),
        ("PUT", r"issue/([^/]+)", h_put_issue),
        ("PUT", r"issue/([^/]+)/assignee", h_assignee),
        ("GET", r"issue/([^/]+)/transitions", h_transitions),
        ("POST", r"issue/([^/]+)/transitions", h_do_transition),
        ("GET", r"issue/([^/]+)/comment", h_comments),
        ("POST", r"issue/([^/]+)/comment", h_add_comment),
        ("GET", r"issue/([^/]+)/remotelink", h_remote_links),
        ("POST", r"issue/([^/]+)/remotelink", h_add_remote_link),
        ("POST", r"issueLink", h_issue_link),
        ("GET", r"search", h_search_offset),
        ("POST", r"search", h_search_offset),
        ("GET", r"search/jql", h_search_jql),
        ("POST", r"search/jql", h_search_jql),
    ]


# --------------------------------------------------------------------- JQL subset
JQL_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|>=|<=|!=|[=<>(),~]|[^\s=<>!(),~]+)')
JQL_FIELDS = {"project", "labels", "updated", "created", "status", "statuscategory", "key",
              "issuekey", "resolution", "resolved", "assignee", "issuetype", "type"}


@dataclass
class JqlClause:
    field: str
    op: str
    values: list[str]


@dataclass
class JqlQuery:
    """`clause AND clause ... [ORDER BY field [ASC|DESC], ...]`: what integrations send."""

    clauses: list[JqlClause]
    order: list[tuple[str, bool]]
    now: datetime

    @classmethod
    def parse(cls, text: str, emulator: JiraEmulator) -> JqlQuery:
        tokens = [t for t in JQL_TOKEN.findall(text) if t]
        clauses, order, pos = [], [], 0

        def fail(msg: str) -> JiraHttpError:
            return JiraHttpError(400, [f"Error in the JQL Query: {msg}"])

        while pos < len(tokens):
            word = tokens[pos]
            if word.upper() == "ORDER" and pos + 1 < len(tokens) and tokens[pos + 1].upper() == "BY":
                pos += 2
                while pos < len(tokens):
                    name = tokens[pos].lower()
                    desc = pos + 1 < len(tokens) and tokens[pos + 1].upper() == "DESC"
                    asc = pos + 1 < len(tokens) and tokens[pos + 1].upper() == "ASC"
                    order.append((name, desc))
                    pos += 2 if (desc or asc) else 1
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                break
            if word.upper() == "AND":
                pos += 1
                continue
            name = word.lower()
            if name not in JQL_FIELDS:
                raise fail(f"Field '{word}' does not exist or you do not have permission to "
                           "view it.")
            if pos + 1 >= len(tokens):
                raise fail(f"Expecting operator after '{word}'.")
            op = tokens[pos + 1].lower()
            pos += 2
            if op == "is" or op == "not":
                negate = op == "not" or (pos < len(tokens) and tokens[pos].lower() == "not")
                pos += 1 if op == "is" and negate else 0
                if op == "not":
                    pos += 1  # "not in"
                    op = "not in"
                else:
                    values = [tokens[pos].lower()]
                    pos += 1
                    clauses.append(JqlClause(name, "is not" if negate else "is", values))
                    continue
            if op in ("in", "not in"):
                if tokens[pos] != "(":
                    raise fail("Expecting '(' after 'in'.")
                values, pos = [], pos + 1
                while tokens[pos] != ")":
                    if tokens[pos] != ",":
                        values.append(_unquote(tokens[pos]))
                    pos += 1
                pos += 1
                clauses.append(JqlClause(name, op, values))
                continue
            if op not in ("=", "!=", ">", ">=", "<", "<=", "~"):
                raise fail(f"Unsupported operator '{op}'.")
            if pos >= len(tokens):
                raise fail(f"Expecting a value after '{op}'.")
            clauses.append(JqlClause(name, op, [_unquote(tokens[pos])]))
            pos += 1
        query = cls(clauses, order or [("key", False)], emulator.clock())
        for clause in query.clauses:
            if clause.field in ("updated", "created", "resolved"):
                clause.values = [query._date(v, clause.field) for v in clause.values]
        return query

    def _date(self, text: str, field_name: str) -> str:
        rel = re.fullmatch(r"([-+]?)(\d+)([mhdw])", text)
        if rel:
            unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[rel.group(3)]
            delta = timedelta(**{unit: int(rel.group(2))})
            moment = self.now - delta if rel.group(1) == "-" else self.now + delta
            return moment.replace(second=0, microsecond=0).isoformat()
        for fmt in JQL_DATE_FORMATS:
            try:
                return datetime.strptime(text, fmt).replace(tzinfo=UTC).isoformat()
            except ValueError:
                continue
        raise JiraHttpError(400, [
            f"Date value '{text}' for field '{field_name}' is invalid. Valid formats include: "
            "'yyyy/MM/dd HH:mm', 'yyyy-MM-dd HH:mm', 'yyyy/MM/dd', 'yyyy-MM-dd', or a period "
            "format e.g. '-5d', '4w 2d'."])

    @staticmethod
    def _values(issue: Issue, name: str) -> list[str]:
        f = issue.fields
        match name:
            case "project":
                return [issue.project_key.lower(), f["project"]["id"]]
            case "labels":
                return [x.lower() for x in f["labels"]]
            case "updated":
                return [issue.updated.isoformat()]
            case "created":
                return [issue.created.isoformat()]
            case "resolved":
                return [datetime.strptime(f["resolutiondate"], "%Y-%m-%dT%H:%M:%S.%f%z")
                        .isoformat()] if f["resolutiondate"] else []
            case "status":
                return [f["status"]["name"].lower(), f["status"]["id"]]
            case "statuscategory":
                cat = f["status"]["statusCategory"]
                return [cat["key"], cat["name"].lower(), str(cat["id"])]
            case "key" | "issuekey":
                return [issue.key.lower(), str(issue.id)]
            case "resolution":
                return [f["resolution"]["name"].lower()] if f["resolution"] else []
            case "issuetype" | "type":
                return [f["issuetype"]["name"].lower(), f["issuetype"]["id"]]
            case "assignee":
                return [f["assignee"]["name"]] if f["assignee"] else []
        return []

    def matches(self, issue: Issue) -> bool:
        for clause in self.clauses:
            have = [v.lower() for v in self._values(issue, clause.field)]
            wanted = [v.lower() for v in clause.values]
            ok = {
                "=": lambda h, w: bool(set(h) & set(w)),
                "in": lambda h, w: bool(set(h) & set(w)),
                "~": lambda h, w: any(w[0] in x for x in h),
                "!=": lambda h, w: not set(h) & set(w),
                "not in": lambda h, w: not set(h) & set(w),
                "is": lambda h, w: not h,
                "is not": lambda h, w: bool(h),
                ">": lambda h, w: bool(h) and h[0] > w[0],
                ">=": lambda h, w: bool(h) and h[0] >= w[0],
                "<": lambda h, w: bool(h) and h[0] < w[0],
                "<=": lambda h, w: bool(h) and h[0] <= w[0],
            }[clause.op](have, wanted)
            if not ok:
                return False
        return True

    def run(self, issues) -> list[Issue]:
        found = [i for i in issues if self.matches(i)]
        for name, desc in reversed(self.order):
            if name in ("key", "issuekey"):
                found.sort(key=lambda i: (i.project_key, i.id), reverse=desc)
            else:
                found.sort(key=lambda i, n=name: (self._values(i, n) or [""])[0], reverse=desc)
        return found


# --------------------------------------------------------------------- small helpers
def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] in "\"'" and token[-1] == token[0]:
        return token[1:-1].replace('\\"', '"')
    return token


def _search_args() -> dict[str, Any]:
    if request.method == "POST":
        body = request.get_json(force=True) or {}
        return {k: (",".join(v) if k == "fields" and isinstance(v, list) else v)
                for k, v in body.items()}
    args = {k: request.args.get(k) for k in request.args}
    if "fields" in request.args:
        args["fields"] = ",".join(request.args.getlist("fields"))
    return args


def _wanted_fields(spec: str | None, default: str = "*all") -> set[str] | None:
    value = spec if spec is not None else (request.args.get("fields") or default)
    wanted = {f.strip() for f in value.split(",") if f.strip()}
    return None if "*all" in wanted else wanted


def _decode_page_token(token: str) -> int:
    try:
        kind, _, offset = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind == "offset":
            return int(offset)
    except ValueError:
        pass
    raise JiraHttpError(400, ["The provided next page token is invalid or expired."])


def _drop_connection() -> None:
    """Close the client's connection without an answer: the change is made, the reply lost."""
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        sock.shutdown(socket.SHUT_RDWR)


def _display(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get("name") or value.get("displayName") or json.dumps(value)
    if isinstance(value, list):
        return " ".join(_display(v) or "" for v in value)
    return str(value)


def _text_to_adf(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    return {"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": line}] if line else []}
        for line in text.split("\n")]}


def _adf_to_text(doc: dict[str, Any]) -> str:
    return "\n".join("".join(node.get("text", "") for node in block.get("content", []))
                     for block in doc.get("content", []))
