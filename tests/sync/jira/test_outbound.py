"""Registry -> Jira, against both flavours on both databases."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest
import requests
from sqlalchemy import delete

from registry.app import JsonLogFormatter
from registry.core.jira_links import JiraLink
from registry.outbox import publish
from sync.jira.client import JiraClient
from sync.jira.config import CreateRule
from sync.jira.content import BLOCK_BEGIN, global_id, signature_label
from sync.jira.drain import requeue_refused
from sync.jira.reconcile import reconcile
from tests.support.jira import function_name


def test_a_new_signature_gets_one_issue_with_facts_labels_and_a_link_back(harness):
    answer = harness.crash()
    signature = answer["signature"]
    report = harness.sync()
    assert report.drain.processed == 1 and not report.errors
    (issue,) = harness.emulator.find_by_label(signature_label(signature["fingerprint"]))
    assert issue.fields["labels"] == ["crashreg", signature_label(signature["fingerprint"])]
    assert issue.fields["issuetype"]["name"] == "Bug"
    assert issue.fields["summary"] == signature["title"]
    assert BLOCK_BEGIN in issue.fields["description"]
    assert "||Events|1|" in issue.fields["description"]
    assert "6.8.0-52-generic (1)" in issue.fields["description"]
    assert "||Epidemiology|not analysed yet|" in issue.fields["description"]
    (remote,) = issue.remote_links
    assert remote["globalId"] == global_id(signature["fingerprint"])
    assert remote["object"]["url"] == f"http://crashreg.test/signatures/{signature['id']}"
    link = harness.link(signature["id"])
    assert link.issue_key == issue.key and link.last_error is None
    # a second run has nothing to do: no second issue, no second link
    harness.sync()
    assert len(harness.emulator.issues) == 1 and len(issue.remote_links) == 1


def test_link_state_is_in_the_api_and_in_metrics(harness, client, make_token):
    signature = harness.crash()["signature"]
    harness.sync()
    listing = client.get("/api/v1/integrations/jira/links",
                         headers={"Authorization": f"Bearer {make_token('read')}"}).json
    (link,) = listing["links"]
    assert link["signature_id"] == signature["id"] and link["issue_key"] == "CRASH-1"
    assert link["last_synced_at"] and link["last_error"] is None and link["failures"] == 0
    assert listing["outbox"] == {"pending": 0, "oldest_pending": None, "failed": 0}
    assert client.get("/api/v1/integrations/jira/links").status_code == 401
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'crashreg_jira_link_error{issue_key="CRASH-1"} 0.0' in metrics
    assert 'crashreg_jira_link_last_synced_timestamp_seconds{issue_key="CRASH-1"}' in metrics
    assert client.get(f"/api/v1/signatures/{signature['id']}",
                      headers={"Authorization": f"Bearer {make_token('read')}"}).json["jira_key"] == "CRASH-1"


def test_a_threshold_create_rule_files_the_signature_once_it_is_met(harness):
    harness.options = replace(harness.options, create_rule=CreateRule.parse("events>=3,hosts>=2"))
    signature = harness.crash(host="a")["signature"]
    harness.crash(host="a")
    harness.sync()
    assert not harness.emulator.issues and harness.link(signature["id"]) is None
    harness.crash(host="b")
    assert harness.sync().created == 1
    assert harness.link(signature["id"]).issue_key == "CRASH-1"
    with pytest.raises(ValueError, match="events>=N"):
        CreateRule.parse("events>3")


def test_a_lost_create_response_makes_no_duplicate(harness):
    signature = harness.crash()["signature"]
    harness.emulator.lose_next_create = True
    first = harness.sync()
    assert first.drain.failed == 1 and "cannot reach Jira" in first.drain.errors[0]
    assert len(harness.emulator.issues) == 1, "Jira did make the issue"
    assert harness.link(signature["id"]) is None
    harness.later(minutes=1)
    second = harness.sync()
    assert second.drain.processed == 1
    assert len(harness.emulator.issues) == 1
    assert harness.link(signature["id"]).issue_key == "CRASH-1"
    (remote,) = harness.emulator.issue("CRASH-1").remote_links
    assert remote["object"]["url"].endswith(f"/signatures/{signature['id']}")


def test_an_issue_reconciliation_found_first_after_a_lost_create_links_back(harness):
    """Reconciliation ran before the create's retry and linked the issue Jira had made by its
    labels; the retry then found the link and never posted the issue's remote link back to the
    signature. The first facts update posts it."""
    signature = harness.crash()["signature"]
    harness.emulator.lose_next_create = True
    assert harness.sync(with_reconcile=False).drain.failed == 1
    harness.later(minutes=1)
    reconcile(harness.database, JiraClient(harness.options), harness.options, harness.clock())
    assert harness.link(signature["id"]).issue_key == "CRASH-1"  # from its labels
    harness.later(minutes=20)
    harness.sync()
    harness.later(minutes=20)
    harness.sync()
    assert len(harness.emulator.issues) == 1
    (remote,) = harness.emulator.issue("CRASH-1").remote_links
    assert remote["object"]["url"].endswith(f"/signatures/{signature['id']}")


def test_a_lagging_search_index_after_a_lost_create_makes_no_duplicate(harness):
    """Cloud indexes new issues for search with a delay: a quick retry must not trust a miss."""
    harness.emulator.index_lag = timedelta(seconds=90)
    signature = harness.crash()["signature"]
    harness.emulator.lose_next_create = True
    assert harness.sync(with_reconcile=False).drain.failed == 1
    harness.later(seconds=31)  # the first retry: the search does not see CRASH-1 yet
    waiting = harness.sync(with_reconcile=False)
    assert "search index" in waiting.drain.errors[0]
    assert len(harness.emulator.issues) == 1
    harness.later(minutes=2)
    harness.sync(with_reconcile=False)
    assert len(harness.emulator.issues) == 1
    assert harness.link(signature["id"]).issue_key == "CRASH-1"


def test_the_link_is_recovered_from_jira_if_the_table_is_lost(harness):
    signature = harness.crash()["signature"]
    harness.sync()
    with harness.database.session() as session:
        session.execute(delete(JiraLink))
    harness.later(minutes=3)
    harness.emulator.edit("CRASH-1", {"summary": "renamed by an engineer"})
    harness.sync()  # reconciliation finds the issue by label and rebuilds the row
    assert harness.link(signature["id"]).issue_key == "CRASH-1"
    assert len(harness.emulator.issues) == 1


def test_a_second_issue_for_a_signature_is_reported_not_adopted(harness):
    signature = harness.crash()["signature"]
    harness.sync()
    harness.later(minutes=3)
    harness.jira().create_issue(fields={
        "project": {"key": "CRASH"}, "issuetype": {"name": "Bug"}, "summary": "same crash, by hand",
        "labels": ["crashreg", signature_label(signature["fingerprint"])]})
    harness.later(minutes=3)
    harness.sync()
    link = harness.link(signature["id"])
    assert link.issue_key == "CRASH-1"
    assert "second issue CRASH-2" in link.last_error


def test_facts_updates_are_throttled_and_keep_engineers_text(harness):
    signature = harness.crash()["signature"]
    harness.sync()
    harness.emulator.edit("CRASH-1", {"description": "Engineer notes: see bisect.\n\n"
                                      + harness.emulator.issue("CRASH-1").fields["description"]})
    puts_before = len(harness.emulator.calls("PUT", r"/issue/CRASH-1$"))
    for minute in range(12):
        harness.crash(host=f"gpu-{minute:03d}", kernel="6.8.0-55-generic")
        harness.later(minutes=1)
        harness.sync(with_reconcile=False)
    puts = len(harness.emulator.calls("PUT", r"/issue/CRASH-1$")) - puts_before
    assert 2 <= puts <= 3, f"12 minutes at one update per 5 minutes, not {puts}"
    description = harness.emulator.issue("CRASH-1").fields["description"]
    assert description.startswith("Engineer notes: see bisect.")
    assert description.count(BLOCK_BEGIN) == 1
    assert harness.signature(signature["id"]).status == "new"


def test_a_permanent_refusal_is_recorded_not_retried(harness, client, make_token):
    harness.options = replace(harness.options, issue_type="Epic-that-does-not-exist")
    harness.crash()
    report = harness.sync()
    assert report.drain.given_up == 1
    harness.later(hours=1)
    assert harness.sync().drain.processed == 0
    listing = client.get("/api/v1/integrations/jira/links",
                         headers={"Authorization": f"Bearer {make_token('read')}"}).json
    assert listing["outbox"]["failed"] == 1 and listing["outbox"]["pending"] == 0
    metrics = client.get("/metrics").get_data(as_text=True)
    assert "crashreg_jira_outbox_failed 1.0" in metrics
    harness.options = replace(harness.options, issue_type="Bug")  # the operator fixes the cause
    assert requeue_refused(harness.database) == 1
    assert harness.sync().drain.processed == 1
    assert len(harness.emulator.issues) == 1


@pytest.mark.parametrize("mode", ["refuse", "503"])
def test_jira_down_for_an_hour_then_back_loses_nothing(harness, mode):
    harness.crash(function="mlx5e_poll_rx_cq")
    harness.emulator.go_down(mode)
    calls_before = len(harness.emulator.request_log)
    for minute in range(0, 60, 2):
        harness.crash(function=function_name(minute), host=f"h{minute}")
        harness.later(minutes=2)
        try:
            harness.sync()
        except (requests.ConnectionError, Exception) as error:  # Jira unreachable at connect
            assert "Connection" in type(error).__name__ or "503" in str(error)
    assert not harness.emulator.issues
    assert len(harness.emulator.request_log) - calls_before <= 60, "no hammering while down"
    harness.emulator.come_back()
    for _ in range(3):
        harness.later(minutes=15)
        harness.sync()
    assert len(harness.emulator.issues) == 31
    assert len(harness.links()) == 31
    assert all(link.last_error is None for link in harness.links())


def test_429_retry_after_is_honoured(harness):
    harness.emulator.throttle(10, window_s=120)
    for n in range(4):
        harness.crash(function=function_name(n), host=f"h{n}")
    report = harness.sync()
    assert report.drain.stopped and "429" in report.drain.stopped
    calls = len(harness.emulator.request_log)
    harness.later(seconds=60)
    assert harness.sync().paused_until is not None
    assert len(harness.emulator.request_log) == calls, "no call before Retry-After"
    for _ in range(8):
        harness.later(seconds=121)
        harness.sync(with_reconcile=False)
    assert len(harness.links()) == 4
    assert len(harness.emulator.issues) == 4


def test_deleted_issues_are_marked_gone_and_never_starve_the_live_ones(harness):
    ids = [harness.crash(function=function_name(n), host=f"h{n}")["signature"]["id"] for n in range(3)]
    harness.sync()
    harness.options = replace(harness.options, batch=2)  # facts updates per round, as 200 of 10,000
    keys = [harness.link(i).issue_key for i in ids]
    for key in keys[:2]:  # the two oldest facts: first in line for every update
        harness.emulator.delete(key)
    for n in range(3):
        harness.crash(function=function_name(n), host=f"second-{n}")
    for _ in range(3):
        harness.later(minutes=6)
        harness.sync()
    assert "||Events|2|" in harness.emulator.issue(keys[2]).fields["description"]
    for signature_id, key in zip(ids[:2], keys[:2], strict=True):
        link = harness.link(signature_id)
        assert link.status_category == "gone" and key in link.last_error
    reads = len(harness.emulator.calls("GET", "|".join(rf"/issue/{k}$" for k in keys[:2])))
    harness.crash(function=function_name(0), host="third")
    harness.later(minutes=6)
    harness.sync()
    assert len(harness.emulator.calls("GET", "|".join(rf"/issue/{k}$" for k in keys[:2]))) == reads
    # the documented recovery: an issue given the signature's labels is linked instead
    fingerprint = harness.signature(ids[0]).fingerprint
    new = harness.jira().create_issue(fields={
        "project": {"key": "CRASH"}, "issuetype": {"name": "Bug"}, "summary": "filed again",
        "labels": ["crashreg", signature_label(fingerprint)]})
    harness.later(minutes=6)
    harness.sync()
    assert harness.link(ids[0]).issue_key == new.key
    harness.later(minutes=1)
    harness.sync()  # the facts: in the round after the one that linked it
    assert "||Events|3|" in harness.emulator.issue(new.key).fields["description"]


def test_a_hosts_rule_is_not_starved_by_signatures_that_do_not_meet_it(harness):
    """Single-host signatures (the lowest ids, a batch's worth) never block one that has earned
    its issue."""
    harness.options = replace(harness.options, create_rule=CreateRule.parse("hosts>=2"), batch=2)
    for n in range(3):
        harness.crash(function=function_name(n), host="lonely")
    earned = harness.crash(function=function_name(9), host="a")["signature"]
    for _ in range(2):  # the outbox's signature.created messages: none meets the rule yet
        harness.later(minutes=1)
        harness.sync()
    assert not harness.emulator.issues
    harness.crash(function=function_name(9), host="b")
    for _ in range(2):
        harness.later(minutes=1)
        harness.sync()
    assert harness.link(earned["id"]) is not None
    assert len(harness.emulator.issues) == 1


def test_facts_updates_put_back_the_labels_inbound_sync_searches_by(harness):
    signature = harness.crash()["signature"]
    harness.sync()
    label = signature_label(signature["fingerprint"])
    harness.emulator.edit("CRASH-1", {"labels": [label, "triage"]})  # someone tidied the labels
    harness.crash(host="gpu-b2")
    harness.later(minutes=6)
    harness.sync()
    assert sorted(harness.emulator.issue("CRASH-1").fields["labels"]) == ["crashreg", label, "triage"]
    harness.later(minutes=3)
    harness.emulator.transition("CRASH-1", "done")
    harness.later(minutes=3)
    harness.sync()  # reconciliation searches labels = crashreg
    assert harness.signature(signature["id"]).status == "resolved"


def test_a_failed_message_is_logged_with_its_message_and_its_outbox_id_apart(harness, caplog):
    harness.options = replace(harness.options, issue_type="Epic-that-does-not-exist")
    harness.crash()
    with caplog.at_level("WARNING", logger="crashreg.jira"):
        harness.sync(with_reconcile=False)
    (record,) = [r for r in caplog.records if r.name == "crashreg.jira"]
    line = json.loads(JsonLogFormatter().format(record))
    assert line["message"] == "Jira sync failed"
    assert isinstance(line["outbox_message"], int) and "400" in line["error"]


def test_a_comment_refused_for_a_gone_issue_is_posted_once_the_signature_is_linked_again(harness):
    signature = harness.crash()["signature"]
    harness.sync()
    harness.emulator.delete("CRASH-1")
    with harness.database.session() as session:
        publish(session, "rca.confirmed", int(signature["id"]), rca_id=3, summary="CQ race")
    assert harness.sync(with_reconcile=False).drain.given_up == 1
    new = harness.jira().create_issue(fields={
        "project": {"key": "CRASH"}, "issuetype": {"name": "Bug"}, "summary": "filed again",
        "labels": ["crashreg", signature_label(signature["fingerprint"])]})
    harness.later(minutes=3)
    harness.sync()
    assert harness.link(signature["id"]).issue_key == new.key
    assert requeue_refused(harness.database) == 1
    assert harness.sync().drain.processed == 1
    assert ["CQ race" in c["body"] for c in harness.emulator.issue(new.key).comments] == [True]
