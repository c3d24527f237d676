"""`crashreg jira check`: a preflight that says, in an operator's words, what is misconfigured.

Every check reads only; nothing is created in Jira.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
from jira import JIRAError

from registry.config import Settings
from sync.jira.client import JiraClient, connect
from sync.jira.config import JiraOptions

OK, WARN, FAIL = "ok", "WARN", "FAIL"
NEEDED_PERMISSIONS = {
    "BROWSE_PROJECTS": "Browse projects",
    "CREATE_ISSUES": "Create issues",
    "EDIT_ISSUES": "Edit issues",
    "TRANSITION_ISSUES": "Transition issues",
    "ADD_COMMENTS": "Add comments",
}


@dataclass(frozen=True)
class Finding:
    level: str
    topic: str
    message: str


class Stop(Exception):
    """A failure later checks cannot get past (no connection, no auth, no project)."""

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


def auth_hint(client: JiraClient, options: JiraOptions) -> str:
    if options.user:
        return (
            f"Jira refused basic auth as {options.user!r}: check CRASHREG_JIRA_USER and "
            "CRASHREG_JIRA_TOKEN (on Cloud: the account e-mail and an API token from "
            "id.atlassian.com > Security > API tokens)."
        )
    if client.cloud:
        return (
            "Jira Cloud does not take a token alone: set CRASHREG_JIRA_USER to the account's "
            "e-mail and CRASHREG_JIRA_TOKEN to an API token (id.atlassian.com > Security > "
            "API tokens)."
        )
    return (
        "Jira refused the personal access token (sent as 'Authorization: Bearer', since "
        "CRASHREG_JIRA_USER is empty): check that it is not expired or revoked (Profile > "
        "Personal Access Tokens), or set CRASHREG_JIRA_USER to use basic auth instead."
    )


def check_connection(options: JiraOptions) -> tuple[JiraClient, Finding]:
    try:
        client = JiraClient(options, connect(options))
    except requests.RequestException as error:
        raise Stop(
            "reachable",
            f"cannot reach Jira at {options.url}: {type(error).__name__}. Check "
            "CRASHREG_JIRA_URL (scheme, host, port and context path) and that this host "
            "can reach it (proxy, firewall, DNS).",
        ) from None
    except JIRAError as error:
        if error.status_code == 401:
            raise Stop(
                "auth",
                "Jira refused the credentials before saying who it is; "
                "check CRASHREG_JIRA_USER and CRASHREG_JIRA_TOKEN.",
            ) from None
        raise Stop(
            "reachable",
            f"{options.url} answered HTTP {error.status_code} for /rest/api/2/serverInfo: "
            "this is not a Jira REST API. Check CRASHREG_JIRA_URL (include the context "
            "path if Jira lives under one, e.g. https://host/jira).",
        ) from None
    info = client.jira.server_info()
    flavour = "Cloud" if client.cloud else f"Data Center/Server ({info.get('deploymentType')})"
    note = ""
    if info.get("baseUrl") and info["baseUrl"].rstrip("/") != options.url:
        note = f"; Jira calls itself {info['baseUrl']}, issue links will use {options.url}"
    return client, Finding(OK, "reachable", f"Jira {flavour} {info.get('version')} at {options.url}{note}")


def check_auth(client: JiraClient, options: JiraOptions) -> Finding:
    try:
        me = client.jira.myself()
    except JIRAError as error:
        if error.status_code in (401, 403):
            raise Stop("auth", auth_hint(client, options)) from None
        raise
    who = me.get("name") or me.get("accountId")
    return Finding(
        OK,
        "auth",
        f"authenticated as {me.get('displayName')} ({who}), time zone {me.get('timeZone') or 'unknown'}",
    )


def check_project(client: JiraClient, options: JiraOptions) -> Iterator[Finding]:
    try:
        project = client.jira.project(options.project, expand="issueTypes")
    except JIRAError as error:
        if error.status_code == 404:
            raise Stop(
                "project",
                f"project {options.project!r} does not exist or the sync user cannot browse "
                "it: check CRASHREG_JIRA_PROJECT (the project key, e.g. CRASH, not its "
                "name) and the user's project role.",
            ) from None
        raise
    yield Finding(OK, "project", f"project {project.key} ({project.name})")
    types = [t.name for t in getattr(project, "issueTypes", [])]
    if options.issue_type not in types:
        raise Stop(
            "issue type",
            f"issue type {options.issue_type!r} is not available in {project.key}; it has: "
            f"{', '.join(types) or 'none'}. Set CRASHREG_JIRA_ISSUE_TYPE to one of them.",
        )
    yield Finding(OK, "issue type", f"issues will be filed as {options.issue_type!r}")
    granted = client.jira.my_permissions(
        projectKey=options.project, permissions=",".join(NEEDED_PERMISSIONS)
    )["permissions"]
    missing = [
        label for key, label in NEEDED_PERMISSIONS.items() if not granted.get(key, {}).get("havePermission")
    ]
    if missing:
        yield Finding(
            FAIL,
            "permissions",
            f"the sync user lacks in {options.project}: "
            f"{', '.join(missing)}. Grant them through a project role.",
        )
    else:
        yield Finding(OK, "permissions", "browse, create, edit, transition and comment granted")


def check_workflow(client: JiraClient, options: JiraOptions) -> Iterator[Finding]:
    per_type: list[dict[str, Any]] = client.jira._get_json(f"project/{options.project}/statuses")
    statuses = next((t["statuses"] for t in per_type if t["name"] == options.issue_type), [])
    categories = {s["statusCategory"]["key"] for s in statuses}
    if "done" not in categories or not categories - {"done"}:
        yield Finding(
            FAIL,
            "workflow",
            f"the {options.issue_type} workflow needs statuses in and out "
            f"of the done category; it has: {sorted(categories)}",
        )
        return
    yield Finding(
        OK,
        "workflow",
        f"status categories {', '.join(sorted(categories))} (mapped by category, status names do not matter)",
    )
    base = f'project = "{options.project}" AND issuetype = "{options.issue_type}"'
    probes = [
        ("into done", f"{base} AND statusCategory != Done", {"done"}),
        (
            "out of done",
            f"{base} AND statusCategory = Done",
            {options.reopen_category} if options.reopen_category != "none" else {"new", "indeterminate"},
        ),
    ]
    for label, jql, targets in probes:
        issue = next(iter(client.search(jql, ["status"], limit=1)), None)
        if issue is None:
            yield Finding(
                WARN, f"transition {label}", f"no issue to inspect yet ({jql}); checked again once one exists"
            )
            continue
        names = [
            t["name"] for t in client.transitions(issue["key"]) if t["to"]["statusCategory"]["key"] in targets
        ]
        if names:
            yield Finding(OK, f"transition {label}", f"{issue['key']} offers {', '.join(names)}")
        elif label == "out of done":
            yield Finding(
                WARN,
                "transition out of done",
                (
                    f"{issue['key']} offers no transition to a {'/'.join(sorted(targets))} status: "
                    "regressions will be commented but not reopened. Set "
                    "CRASHREG_JIRA_REOPEN_CATEGORY or add a reopen transition."
                ),
            )
        else:
            yield Finding(
                FAIL, "transition into done", f"{issue['key']} offers no transition to done for the sync user"
            )


def check_fields_and_search(client: JiraClient, options: JiraOptions) -> Iterator[Finding]:
    if options.signature_field:
        fields = {f["id"]: f for f in client.jira.fields()}
        if options.signature_field not in fields:
            by_name = [f["id"] for f in fields.values() if f["name"] == options.signature_field]
            hint = f" (a field with that name has id {by_name[0]})" if by_name else ""
            yield Finding(
                FAIL,
                "custom field",
                f"CRASHREG_JIRA_SIGNATURE_FIELD={options.signature_field!r} is not a field id{hint}",
            )
        else:
            yield Finding(
                OK,
                "custom field",
                f"fingerprints go into {options.signature_field} ({fields[options.signature_field]['name']})",
            )
    api = "/search/jql (nextPageToken)" if client.cloud else "/rest/api/2/search (startAt/total)"
    found = list(client.search(f'project = "{options.project}" AND labels = "crashreg"', ["key"], 1))
    labelled = "found issues labelled crashreg" if found else "no issue labelled crashreg yet"
    yield Finding(OK, "search", f"JQL search works through {api}; {labelled}")


def check_registry_side(settings: Settings) -> Iterator[Finding]:
    hook = f"{settings.public_url}/api/v1/integrations/jira/webhook"
    if settings.jira.webhook_secret:
        yield Finding(
            OK,
            "webhook",
            f"register in Jira (System > WebHooks): URL {hook}, events "
            "issue created/updated and comment created, secret = "
            "CRASHREG_JIRA_WEBHOOK_SECRET",
        )
    else:
        yield Finding(
            WARN,
            "webhook",
            "CRASHREG_JIRA_WEBHOOK_SECRET is unset, so webhooks are "
            "refused: Jira changes arrive only by reconciliation "
            "(every 10 minutes)",
        )
    if "localhost" in settings.public_url or "127.0.0.1" in settings.public_url:
        yield Finding(
            WARN,
            "public url",
            f"CRASHREG_PUBLIC_URL is {settings.public_url}: the links written into Jira will point there",
        )


def run_checks(settings: Settings, options: JiraOptions | None = None) -> list[Finding]:
    findings: list[Finding] = []
    try:
        options = options or JiraOptions.from_settings(settings)
    except ValueError as error:
        return [Finding(FAIL, "configuration", str(error))]
    steps: list[Callable[[JiraClient, JiraOptions], Iterator[Finding]]] = [
        check_project,
        check_workflow,
        check_fields_and_search,
    ]
    try:
        client, reachable = check_connection(options)
        findings += [reachable, check_auth(client, options)]
        for step in steps:
            findings += list(step(client, options))
    except Stop as stop:
        findings.append(Finding(FAIL, stop.topic, str(stop)))
    except (JIRAError, requests.RequestException) as error:
        findings.append(Finding(FAIL, "unexpected", f"{type(error).__name__}: {str(error)[:300]}"))
    findings += list(check_registry_side(settings))
    return findings
