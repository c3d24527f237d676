"""The Jira emulator behaves as Jira does for what crashreg uses, through the real `jira` library."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator

import jira
import pytest
import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.support.http import SERVER_POLL_S

from .jira import JiraEmulator


def connect(emulator: JiraEmulator, retries: int = 0) -> jira.JIRA:
    """How crashreg connects: a PAT on Data Center, e-mail + API token on Cloud."""
    if emulator.cloud:
        return jira.JIRA(server=emulator.url, basic_auth=("crashbot@example.com", "bot-api-token"),
                         max_retries=retries)
    return jira.JIRA(server=emulator.url, token_auth="bot-pat", max_retries=retries)


def new_issue(client: jira.JIRA, label: str = "crashreg-sig-1", **extra) -> jira.Issue:
    return client.create_issue(fields={"project": {"key": "CRASH"}, "issuetype": {"name": "Bug"},
                                       "summary": "BUG: unable to handle page fault",
                                       "labels": ["crashreg", label], **extra})


class Receiver:
    """A webhook target answering with scripted statuses and recording what arrived."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.server = make_server("127.0.0.1", 0, self)
        threading.Thread(target=self.server.serve_forever, args=(SERVER_POLL_S,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def __call__(self, environ, start_response):
        req = Request(environ)
        self.received.append((dict(req.headers), req.get_data()))
        status = self.statuses.pop(0) if self.statuses else 200
        return Response("", status)(environ, start_response)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    target = Receiver()
    yield target
    target.server.shutdown()


def test_server_info_tells_the_library_which_flavour_it_is(jira_emulator):
    client = connect(jira_emulator)
    info = client.server_info()
    assert client._is_cloud == (jira_emulator.flavour == "cloud")
    assert info["deploymentType"] == ("Cloud" if jira_emulator.cloud else "DataCenter")
    me = client.myself()
    assert ("accountId" in me) == jira_emulator.cloud
    assert ("name" in me) == (not jira_emulator.cloud)


def test_bad_credentials_are_refused(jira_emulator):
    with pytest.raises(jira.JIRAError) as err:
        jira.JIRA(server=jira_emulator.url, basic_auth=("crashbot", "wrong"), max_retries=0)\
            .myself()
    assert err.value.status_code == 401
    # Cloud takes no personal access tokens: a Bearer PAT is an unauthenticated request there
    bearer = jira.JIRA(server=jira_emulator.url, token_auth="bot-pat", max_retries=0)
    if jira_emulator.cloud:
        with pytest.raises(jira.JIRAError) as err:
            bearer.myself()
        assert err.value.status_code == 401
    else:
        assert bearer.myself()["name"] == "crashbot"


def test_create_get_update_with_fields_labels_and_custom_field(jira_emulator):
    client = connect(jira_emulator)
    field_id = next(f["id"] for f in client.fields() if f["name"] == "Crash Signature")
    issue = new_issue(client, description="facts", **{field_id: "abc123"})
    assert issue.key == "CRASH-1"
    assert issue.fields.status.statusCategory.key == "new"
    assert getattr(issue.fields, field_id) == "abc123"
    issue.update(fields={"description": "new facts"}, update={"labels": [{"add": "extra"}]})
    again = client.issue(issue.key)
    assert again.fields.description == "new facts"
    assert again.fields.labels == ["crashreg", "crashreg-sig-1", "extra"]
    with pytest.raises(jira.JIRAError) as err:
        again.update(fields={"labels": ["has space"]})
    assert err.value.status_code == 400 and "contains spaces" in err.value.text
    with pytest.raises(jira.JIRAError) as err:
        again.update(fields={"customfield_99999": "x"})
    assert err.value.status_code == 400 and "cannot be set" in err.value.text


def test_api_v3_speaks_atlassian_document_format_on_cloud_only(jira_emulator):
    client = connect(jira_emulator)
    issue = new_issue(client, description="line one\nline two")
    v3 = requests.get(f"{jira_emulator.url}/rest/api/3/issue/{issue.key}",
                      auth=("crashbot@example.com", "bot-api-token"), timeout=5)
    if jira_emulator.cloud:
        assert v3.json()["fields"]["description"]["type"] == "doc"
        assert v3.json()["fields"]["description"]["content"][1]["content"][0]["text"] == \
            "line two"
    else:
        assert v3.status_code == 404


def test_transitions_carry_status_categories_and_set_and_clear_resolution(jira_emulator):
    client = connect(jira_emulator)
    issue = new_issue(client)
    transitions = client.transitions(issue, expand="transitions.fields")
    done = next(t for t in transitions if t["to"]["statusCategory"]["key"] == "done")
    assert "resolution" in done["fields"]
    client.transition_issue(issue, done["id"], fields={"resolution": {"name": "Won't Fix"}})
    resolved = client.issue(issue.key)
    assert resolved.fields.status.statusCategory.key == "done"
    assert resolved.fields.resolution.name == "Won't Fix"
    assert resolved.fields.resolutiondate
    out = [t for t in client.transitions(issue) if t["to"]["statusCategory"]["key"] != "done"]
    assert out, "a done issue can be reopened"
    client.transition_issue(issue, out[0]["id"])
    reopened = client.issue(issue.key)
    assert reopened.fields.resolution is None and reopened.fields.resolutiondate is None
    with pytest.raises(jira.JIRAError) as err:
        client.transition_issue(issue, "999")
    assert err.value.status_code == 400


def test_comments_assignee_and_fix_versions(jira_emulator):
    client = connect(jira_emulator)
    issue = new_issue(client)
    client.add_comment(issue, "regressed on 6.8.0-60")
    assert [c.body for c in client.comments(issue)] == ["regressed on 6.8.0-60"]
    client.assign_issue(issue, "alice" if not jira_emulator.cloud
                        else jira_emulator.users["alice"].account_id)
    issue.update(fields={"fixVersions": [{"name": "6.9.0"}]})
    fetched = client.issue(issue.key)
    assert fetched.fields.assignee.displayName == "Alice Engineer"
    assert [v.name for v in fetched.fields.fixVersions] == ["6.9.0"]
    with pytest.raises(jira.JIRAError):
        issue.update(fields={"fixVersions": [{"name": "no-such-version"}]})


def test_remote_link_with_same_global_id_is_updated_not_added(jira_emulator):
    client = connect(jira_emulator)
    issue = new_issue(client)
    first = client.add_remote_link(issue.key, {"url": "http://r/sig/1", "title": "old"},
                                   globalId="crashreg:signature:abc")
    second = client.add_remote_link(issue.key, {"url": "http://r/sig/1", "title": "new"},
                                    globalId="crashreg:signature:abc")
    links = client.remote_links(issue.key)
    assert len(links) == 1 and first.id == second.id
    assert links[0].object.title == "new"
    one = requests.get(f"{jira_emulator.url}/rest/api/2/issue/{issue.key}/remotelink",
                       params={"globalId": "crashreg:signature:abc"},
                       headers=client._session.headers, auth=client._session.auth, timeout=5)
    assert one.json()["globalId"] == "crashreg:signature:abc"


def test_search_pages_the_way_each_flavour_does(jira_emulator, clock):
    client = connect(jira_emulator)
    for n in range(7):
        new_issue(client, label=f"crashreg-sig-{n}")
        clock.advance(minutes=1)
    if jira_emulator.cloud:
        page = client.enhanced_search_issues("labels = crashreg ORDER BY key", maxResults=3,
                                             json_result=True)
        assert len(page["issues"]) == 3 and page["isLast"] is False
        everything = client.enhanced_search_issues("labels = crashreg", maxResults=0)
        assert len(everything) == 7
        gone = requests.get(f"{jira_emulator.url}/rest/api/2/search", params={"jql": "x"},
                            auth=("crashbot@example.com", "bot-api-token"), timeout=5)
        assert gone.status_code == 410
        with pytest.raises(jira.JIRAError) as err:
            client.enhanced_search_issues("ORDER BY key")
        assert "Unbounded" in err.value.text
    else:
        page = client.search_issues("labels = crashreg ORDER BY key", maxResults=3)
        assert len(page) == 3 and page.total == 7
        everything = client.search_issues("labels = crashreg", maxResults=False)
        assert len(everything) == 7
    recent = client.search_issues('project = CRASH AND updated >= "2026-11-29 12:05" '
                                  "ORDER BY updated ASC", maxResults=50)
    assert [i.key for i in recent] == ["CRASH-6", "CRASH-7"]
    with pytest.raises(jira.JIRAError) as err:
        client.search_issues('project = CRASH AND updated >= "2026-11-29 12:05:30"')
    assert "Valid formats include" in err.value.text


def test_webhooks_are_signed_and_retried_with_the_same_identifier(jira_emulator, clock, receiver):
    jira_emulator.register_webhook(receiver.url, secret="s3cret")
    client = connect(jira_emulator)
    receiver.statuses = [503, 200]
    issue = new_issue(client)
    jira_emulator.deliver_webhooks()
    assert len(receiver.received) == 1
    assert jira_emulator.deliver_webhooks() == [], "a retry waits minutes, not at once"
    clock.advance(minutes=16)
    jira_emulator.deliver_webhooks()
    (h1, body1), (h2, body2) = receiver.received
    assert body1 == body2, "a retry resends the same event"
    assert h1["X-Atlassian-Webhook-Identifier"] == h2["X-Atlassian-Webhook-Identifier"]
    assert h2["X-Atlassian-Webhook-Retry"] == "1"
    expected = hmac.new(b"s3cret", body2, hashlib.sha256).hexdigest()
    assert h2["X-Hub-Signature"] == f"sha256={expected}"
    payload = json.loads(body2)
    assert payload["webhookEvent"] == "jira:issue_created"
    assert payload["issue"]["key"] == issue.key


def test_webhook_gives_up_after_five_retries(jira_emulator, clock, receiver):
    client = connect(jira_emulator)
    registered = client._session.post(f"{jira_emulator.url}/rest/webhooks/1.0/webhook",
                                      data=json.dumps({"name": "crashreg", "url": receiver.url,
                                                       "events": ["jira:issue_created"]}))
    assert registered.status_code == 201
    receiver.statuses = [500] * 10
    new_issue(client)
    for _ in range(8):
        jira_emulator.deliver_webhooks()
        clock.advance(minutes=16)
    assert len(receiver.received) == 6
    assert jira_emulator.deliveries[0].outcome == "failed"


def test_rate_limit_answers_429_with_retry_after(jira_emulator, clock):
    client = connect(jira_emulator)
    jira_emulator.throttle(2, window_s=60)
    client.myself()
    client.myself()
    with pytest.raises(jira.JIRAError) as err:
        client.myself()
    assert err.value.status_code == 429
    assert err.value.response.headers["Retry-After"] == "60"
    clock.advance(seconds=60)
    assert client.myself()


def test_outage_then_recovery(jira_emulator):
    client = connect(jira_emulator)
    jira_emulator.go_down("503")
    with pytest.raises(jira.JIRAError) as err:
        client.myself()
    assert err.value.status_code == 503
    jira_emulator.come_back()
    jira_emulator.go_down("refuse")
    with pytest.raises(requests.ConnectionError):
        client.myself()
    jira_emulator.come_back()
    assert client.myself()


def test_lost_create_response_still_creates_the_issue(jira_emulator):
    client = connect(jira_emulator)
    jira_emulator.lose_next_create = True
    with pytest.raises(requests.ConnectionError):
        new_issue(client, label="crashreg-sig-lost")
    assert [i.key for i in jira_emulator.find_by_label("crashreg-sig-lost")] == ["CRASH-1"]
    found = client.search_issues("project = CRASH AND labels = crashreg-sig-lost")
    assert [i.key for i in found] == ["CRASH-1"]
