"""Jira -> registry: webhooks (signed, deduplicated, read back) and reconciliation."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import replace

import pytest
from sqlalchemy import select
from werkzeug.serving import make_server

from registry.app import create_app
from registry.config import Settings
from registry.core.events import Event
from registry.core.signatures import Signature
from registry.outbox import OutboxMessage, publish
from registry.rca.bundle import triage_bundle
from tests.support.http import SERVER_POLL_S
from tests.support.jira import WEBHOOK_SECRET, function_name

WEBHOOK_PATH = "/api/v1/integrations/jira/webhook"


def signed(body: bytes, secret: str = WEBHOOK_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_hook(client, body: bytes, signature: str | None, identifier: str | None = "d-1"):
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers["X-Hub-Signature"] = signature
    if identifier is not None:
        headers["X-Atlassian-Webhook-Identifier"] = identifier
    return client.post(WEBHOOK_PATH, data=body, headers=headers)


def hints(database) -> list[OutboxMessage]:
    with database.session() as session:
        return list(session.scalars(select(OutboxMessage).where(
            OutboxMessage.topic == "jira.issue_changed")))


def test_webhook_forgery_is_rejected_and_redelivery_is_deduplicated(client, database):
    body = json.dumps({"webhookEvent": "jira:issue_updated", "issue": {"key": "CRASH-1"}}).encode()
    assert post_hook(client, body, None).status_code == 401
    assert post_hook(client, body, signed(body, "guessed-secret")).status_code == 401
    assert post_hook(client, body + b" ", signed(body)).status_code == 401, "body was altered"
    assert post_hook(client, body, signed(body).upper().replace("SHA256", "sha1")).status_code == 401
    missing = post_hook(client, body, signed(body), identifier=None)
    assert missing.status_code == 400
    assert "X-Atlassian-Webhook-Identifier" in missing.json["error"]["fields"]
    assert not hints(database)
    first = post_hook(client, body, signed(body))
    again = post_hook(client, body, signed(body))
    assert first.status_code == 202 and again.status_code == 200 and again.json["duplicate"]
    assert [m.payload["issue_key"] for m in hints(database)] == ["CRASH-1"]
    bad_json = post_hook(client, b"{not json", signed(b"{not json"), identifier="d-2")
    assert bad_json.status_code == 400 and bad_json.json["error"]["code"] == "malformed_json"
    assert post_hook(client, body, "sha256=\xe9", identifier="d-3").status_code == 401  # a 500 before
    # a signed delivery naming no Jira issue's key (past the receipts' column: a 500 on PostgreSQL)
    odd = json.dumps({"webhookEvent": "jira:issue_updated", "issue": {"key": "K" * 65}}).encode()
    assert post_hook(client, odd, signed(odd), identifier="d-4").status_code == 202
    assert [m.payload["issue_key"] for m in hints(database)] == ["CRASH-1"]


def test_webhooks_are_refused_when_no_secret_is_configured(db_url, database):
    app = create_app(Settings(database_url=db_url), database)
    body = b'{"issue": {"key": "CRASH-1"}}'
    answer = post_hook(app.test_client(), body, signed(body))
    assert answer.status_code == 403
    assert "CRASHREG_JIRA_WEBHOOK_SECRET" in answer.json["error"]["message"]


@pytest.fixture
def engineer(harness):
    return harness.jira()


def resolve_in_jira(harness, engineer, key: str, resolution: str, versions=()):
    """What an engineer does: set fix versions, assign, and move the issue to done."""
    for name in versions:
        if all(v["name"] != name for v in harness.emulator.projects["CRASH"]["versions"]):
            harness.emulator.add_version("CRASH", name)
    issue = engineer.issue(key)
    if versions:
        issue.update(fields={"fixVersions": [{"name": v} for v in versions]})
    engineer.assign_issue(key, "alice" if not harness.emulator.cloud
                          else harness.emulator.users["alice"].account_id)
    done = next(t for t in engineer.transitions(key) if t["to"]["statusCategory"]["key"] == "done")
    engineer.transition_issue(key, done["id"], fields={"resolution": {"name": resolution}})


def test_resolution_is_pulled_by_webhook_and_read_back(harness, engineer, live_server):
    harness.emulator.register_webhook(live_server + WEBHOOK_PATH, WEBHOOK_SECRET)
    signature = harness.crash()["signature"]
    harness.sync(with_reconcile=False)
    harness.emulator.deliver_webhooks()  # our own create: a hint that changes nothing
    harness.sync(with_reconcile=False)
    harness.later(minutes=3)
    resolve_in_jira(harness, engineer, "CRASH-1", "Fixed", versions=["6.8.0-60"])
    delivered = harness.emulator.deliver_webhooks()
    assert delivered and all(d.outcome == "delivered" for d in delivered)
    harness.later(minutes=1)
    harness.sync(with_reconcile=False)
    resolved = harness.signature(signature["id"])
    assert resolved.status == "resolved"
    assert resolved.resolution == "Fixed"
    assert resolved.fix_versions == ["6.8.0-60"]
    assert resolved.fixed_in_kernel == "6.8.0-60"
    assert resolved.resolved_at is not None
    assert resolved.owner == "Alice Engineer"
    assert harness.link(signature["id"]).status_category == "done"


def test_jira_retries_a_delivery_the_registry_missed(harness, engineer, app):
    """The registry is down when Jira calls; Jira's retry (same identifier) gets through once."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    port = server.server_port
    server.server_close()  # nothing listens: the first delivery is refused
    harness.emulator.register_webhook(f"http://127.0.0.1:{port}{WEBHOOK_PATH}", WEBHOOK_SECRET)
    signature = harness.crash()["signature"]
    harness.sync()
    harness.emulator.deliveries.clear()
    harness.later(minutes=3)
    resolve_in_jira(harness, engineer, "CRASH-1", "Fixed")
    harness.emulator.deliver_webhooks()
    assert {d.outcome for d in harness.emulator.deliveries} == {"pending"}
    server = make_server("127.0.0.1", port, app, threaded=True)
    threading.Thread(target=server.serve_forever, args=(SERVER_POLL_S,), daemon=True).start()
    try:
        harness.later(minutes=16)
        harness.emulator.deliver_webhooks()
        assert {d.outcome for d in harness.emulator.deliveries} == {"delivered"}
        assert all(d.retry == 1 for d in harness.emulator.deliveries)
        harness.sync(with_reconcile=False)
        assert harness.signature(signature["id"]).status == "resolved"
    finally:
        server.shutdown()


def test_engineers_comments_reach_the_triage_bundle(harness, engineer, database):
    signature = harness.crash()["signature"]
    harness.sync()
    key = harness.link(signature["id"]).issue_key
    harness.later(minutes=5)
    engineer.add_comment(key, "bisected to the CQ doorbell change; see LKML thread")
    harness.later(minutes=5)
    harness.sync()
    with database.session() as session:
        bundle = triage_bundle(session, session.get_one(Signature, int(signature["id"])),
                               "http://crashreg.test")
    comments = bundle["jira"]["comments"]
    assert [c["body"] for c in comments] == ["bisected to the CQ doorbell change; see LKML thread"]
    assert comments[0]["author"] and comments[0]["created"]


def test_missed_webhooks_are_caught_by_reconciliation(harness, engineer):
    wont = harness.crash(function=function_name(1))["signature"]
    dup = harness.crash(function=function_name(2))["signature"]
    original = harness.crash(function=function_name(3))["signature"]
    harness.sync()
    keys = {s["id"]: harness.link(s["id"]).issue_key for s in (wont, dup, original)}
    harness.later(minutes=5)
    resolve_in_jira(harness, engineer, keys[wont["id"]], "Won't Fix" if not harness.emulator.cloud
                    else "Won't Do")
    harness.emulator.link_duplicate(keys[dup["id"]], keys[original["id"]])
    resolve_in_jira(harness, engineer, keys[dup["id"]], "Duplicate")
    harness.later(minutes=5)
    harness.sync()
    assert harness.signature(wont["id"]).status == "ignored"
    assert harness.signature(dup["id"]).merged_into_id == int(original["id"])
    assert harness.signature(original["id"]).status == "new"
    harness.later(minutes=5)
    harness.emulator.transition(keys[wont["id"]], "new")  # reopened: back to triage
    harness.later(minutes=5)
    harness.sync()
    reopened = harness.signature(wont["id"])
    assert reopened.status == "triaged" and reopened.resolution is None


def test_regression_is_pushed_and_old_kernels_are_not_regressions(harness, engineer):
    signature = harness.crash(kernel="6.8.0-52-generic")["signature"]
    harness.sync()
    harness.later(minutes=5)
    resolve_in_jira(harness, engineer, "CRASH-1", "Fixed", versions=["6.8.0-60"])
    harness.later(minutes=5)
    harness.sync()
    assert harness.signature(signature["id"]).status == "resolved"
    harness.later(hours=2)
    old = harness.crash(kernel="6.8.0-52-generic", host="not-upgraded-yet")
    assert old["signature"]["status"] == "resolved"
    with harness.database.session() as session:
        assert session.get(Event, int(old["event_id"])).regression == "old-kernel"
    harness.later(minutes=5)
    harness.sync()
    assert harness.emulator.issue("CRASH-1").fields["status"]["statusCategory"]["key"] == "done"
    new = harness.crash(kernel="6.8.0-61-generic", host="upgraded")
    assert new["signature"]["status"] == "regressed"
    harness.later(minutes=5)
    harness.sync()
    issue = harness.emulator.issue("CRASH-1")
    assert issue.fields["status"]["statusCategory"]["key"] == "new"
    (comment,) = [c for c in issue.comments if "Regression" in c["body"]]
    assert "6.8.0-61-generic" in comment["body"] and "reopened" in comment["body"]
    for _ in range(2):  # reading Jira back does not undo our own regression
        harness.later(minutes=5)
        harness.sync()
    assert harness.signature(signature["id"]).status == "regressed"
    assert len([c for c in issue.comments if "Regression" in c["body"]]) == 1


def test_a_confirmed_rca_is_posted_once(harness, database):
    signature = harness.crash()["signature"]
    harness.sync()
    with database.session() as session:
        publish(session, "rca.confirmed", int(signature["id"]), rca_id=7, summary="mlx5 CQ race",
                author="bob", author_kind="human", reviewer="alice", fix_commit="abc123",
                fixed_in_kernel="6.8.0-60", url="http://crashreg.test/signatures/1#rca-7")
    harness.sync()
    harness.sync()
    comments = [c["body"] for c in harness.emulator.issue("CRASH-1").comments]
    assert len(comments) == 1
    assert "mlx5 CQ race" in comments[0] and "abc123" in comments[0]


def test_a_flagged_rca_is_posted_once_with_its_failed_checks(harness, database):
    signature = harness.crash()["signature"]
    harness.sync()
    failed = [{"name": "functions_in_frames", "status": "fail",
               "message": "cited function mlx5e_xmit never appears in this signature's frames"}]
    with database.session() as session:
        for _ in range(2):  # a recheck may flag the same RCA again: still one comment
            publish(session, "rca.flagged", int(signature["id"]), rca_id=9, summary="a guess",
                    author="triage-bot", author_kind="ai", checks_passed=False, failed_checks=failed,
                    url="http://crashreg.test/signatures/1#rca-9")
    harness.sync()
    harness.sync()
    comments = [c["body"] for c in harness.emulator.issue("CRASH-1").comments]
    assert len(comments) == 1
    assert "flagged" in comments[0] and "mlx5e_xmit" in comments[0] and "triage-bot (ai)" in comments[0]


def regressed_with_reopening_off(harness, engineer):  # type: ignore[no-untyped-def]
    """Comment-only mode: a signature resolved in Jira (fixed in 6.8.0-60) that crashed on a
    newer kernel, before the sync tells Jira; the signature."""
    harness.options = replace(harness.options, reopen_category="none")
    signature = harness.crash(kernel="6.8.0-52-generic")["signature"]
    harness.sync()
    harness.later(minutes=5)
    resolve_in_jira(harness, engineer, "CRASH-1", "Fixed", versions=["6.8.0-60"])
    harness.later(minutes=5)
    harness.sync()
    harness.later(hours=1)
    assert harness.crash(kernel="6.8.1-1-generic", host="new")["signature"]["status"] == "regressed"
    harness.later(minutes=5)
    return signature


def test_with_reopening_off_a_regression_is_only_commented(harness, engineer):
    signature = regressed_with_reopening_off(harness, engineer)
    harness.sync()
    issue = harness.emulator.issue("CRASH-1")
    assert issue.fields["status"]["statusCategory"]["key"] == "done"
    (comment,) = [c["body"] for c in issue.comments if "Regression" in c["body"]]
    assert "did not reopen" in comment
    harness.later(minutes=5)
    harness.sync()  # our own comment is not an engineer resolving it again
    assert harness.signature(signature["id"]).status == "regressed"


def test_an_issue_of_an_odd_shape_is_logged_and_skipped_not_a_stop(harness, engineer, caplog):
    """A Jira whose search answer lacks a field (projected differently, a custom workflow):
    that issue is skipped with a warning; reconciliation goes on for all the others."""
    odd = harness.crash(function=function_name(1))["signature"]
    fine = harness.crash(function=function_name(2), host="gpu-b2")["signature"]
    harness.sync(with_reconcile=False)
    odd_key, fine_key = harness.link(odd["id"]).issue_key, harness.link(fine["id"]).issue_key
    harness.later(minutes=3)
    resolve_in_jira(harness, engineer, odd_key, "Fixed")
    resolve_in_jira(harness, engineer, fine_key, "Fixed")
    del harness.emulator.issue(odd_key).fields["status"]
    harness.later(minutes=1)
    with caplog.at_level("WARNING", logger="crashreg.jira.reconcile"):
        report = harness.sync()
    assert report.reconcile is not None and report.reconcile.skipped == 1
    warnings = [record.getMessage() for record in caplog.records]
    assert any(odd_key in message and "KeyError" in message for message in warnings)
    assert harness.signature(fine["id"]).status == "resolved"
    assert harness.signature(odd["id"]).status != "resolved"


def test_text_postgresql_cannot_store_does_not_stop_reconciliation(harness, engineer):
    """A NUL in a comment (jsonb refuses \\u0000), a display name past the owner column, a fix
    version longer than any kernel: the text is made storable; the issue and every other issue
    of the round are applied, and the cursor moves on."""
    odd = harness.crash(function=function_name(1))["signature"]
    fine = harness.crash(function=function_name(2), host="gpu-b2")["signature"]
    harness.sync(with_reconcile=False)
    odd_key, fine_key = harness.link(odd["id"]).issue_key, harness.link(fine["id"]).issue_key
    harness.later(minutes=3)
    harness.emulator.users["alice"].display_name = "Alice\x00 " + "E" * 300
    engineer.add_comment(odd_key, "core at /srv/a\x00b, lost")
    resolve_in_jira(harness, engineer, odd_key, "Fixed", versions=["6.8.0-60-" + "x" * 200])
    harness.later(minutes=1)
    resolve_in_jira(harness, engineer, fine_key, "Fixed")
    harness.later(minutes=1)
    report = harness.sync()
    assert report.reconcile is not None and report.reconcile.skipped == 0
    assert harness.signature(fine["id"]).status == "resolved"
    resolved = harness.signature(odd["id"])
    assert resolved.status == "resolved" and resolved.owner.startswith("Alice E")
    (comment,) = harness.link(odd["id"]).comments
    assert comment["body"] == "core at /srv/ab, lost" and "\x00" not in comment["author"]
    assert resolved.fixed_in_kernel is None, "no kernel's version is that long"


def test_a_webhook_carrying_text_postgresql_cannot_store_is_accepted(client, database):
    """Jira does not retry a 4xx: a NUL in a comment it sends must not lose the hint."""
    body = json.dumps({"webhookEvent": "comment_created\x00", "issue": {"key": "CRASH-7"},
                       "comment": {"body": "a\x00b"}}).encode()
    answer = post_hook(client, body, signed(body), identifier="d-nul")
    assert answer.status_code == 202
    assert [m.payload["issue_key"] for m in hints(database)] == ["CRASH-7"]


def regression_comments(harness, key: str) -> list[str]:
    return [c["body"] for c in harness.emulator.issue(key).comments if "Regression" in c["body"]]


def test_the_syncs_own_facts_update_is_not_news_from_jira(harness, engineer):
    """Comment-only mode (or a workflow with no way out of done): the facts update the sync
    writes after a regression bumps the issue's `updated`; that is no engineer resolving it
    again, in the same round or later, and later crashes make no new regressions."""
    signature = regressed_with_reopening_off(harness, engineer)
    puts = len(harness.emulator.calls("PUT", r"/issue/CRASH-1$"))
    harness.sync()
    assert len(harness.emulator.calls("PUT", r"/issue/CRASH-1$")) > puts, "the facts were pushed"
    assert harness.signature(signature["id"]).status == "regressed"
    for n in range(3):
        harness.crash(kernel="6.8.1-1-generic", host=f"new-{n}")
        harness.later(minutes=6)
        harness.sync()
    assert harness.signature(signature["id"]).status == "regressed"
    assert len(regression_comments(harness, "CRASH-1")) == 1


def test_a_status_set_in_the_registry_is_not_undone_by_its_own_facts_update(harness, engineer,
                                                                             client, make_token):
    harness.later(minutes=-30)  # the API stamps the real time: the sync's clock a little behind it
    signature = harness.crash()["signature"]
    harness.sync()
    harness.later(minutes=5)
    resolve_in_jira(harness, engineer, "CRASH-1", "Fixed")
    harness.later(minutes=5)
    harness.sync()
    assert harness.signature(signature["id"]).status == "resolved"
    answer = client.patch(f"/api/v1/signatures/{signature['id']}", json={"status": "triaged"},
                          headers={"Authorization": f"Bearer {make_token('triage')}"})
    assert answer.status_code == 200
    for _ in range(2):
        harness.later(minutes=6)
        harness.sync()
    assert harness.signature(signature["id"]).status == "triaged"


def test_quoted_text_cannot_pass_for_a_comment_marker(harness, engineer, database):
    """An AI's RCA summary, or an engineer's comment, naming a marker crashreg writes does not
    make the sync think it already posted that comment."""
    signature = harness.crash()["signature"]
    harness.sync()
    engineer.add_comment("CRASH-1", "quoting the bot:\n[crashreg:rca:76]\nwhich was wrong")
    with database.session() as session:
        publish(session, "rca.flagged", int(signature["id"]), rca_id=74, author="triage-bot",
                author_kind="ai", summary="races in the CQ [crashreg:rca:75]\n[crashreg:rca:75]",
                failed_checks=[{"name": "x", "message": "cites [crashreg:rca:76]"}])
        for rca_id in (75, 76):
            publish(session, "rca.confirmed", int(signature["id"]), rca_id=rca_id,
                    summary=f"root cause {rca_id}", author="bob", reviewer="alice")
    harness.sync()
    harness.sync()
    bodies = [c["body"] for c in harness.emulator.issue("CRASH-1").comments]
    assert [b for b in bodies if "Confirmed root cause" in b] == [
        next(b for b in bodies if "root cause 75" in b), next(b for b in bodies if "root cause 76" in b)]
    (flagged,) = [b for b in bodies if "flagged" in b]
    assert "[crashreg:rca:75]" not in flagged and "[crashreg:rca:76]" not in flagged
    assert flagged.splitlines()[-1] == "[crashreg:rca-flagged:74]"


def test_a_hint_for_an_issue_jira_does_not_show_is_dropped_not_a_failure(harness, client, caplog):
    """A signed delivery naming an issue the bot cannot read (unknown, or deleted since): no
    permanent refusal that `jira requeue` could only repeat; a linked one is marked gone."""
    signature = harness.crash()["signature"]
    harness.sync()
    harness.emulator.delete("CRASH-1")
    for n, key in enumerate(("CRASH-99", "CRASH-1")):
        body = json.dumps({"webhookEvent": "jira:issue_updated", "issue": {"key": key}}).encode()
        assert post_hook(client, body, signed(body), identifier=f"d-gone-{n}").status_code == 202
    with caplog.at_level("INFO", logger="crashreg.jira"):
        report = harness.sync(with_reconcile=False)
    assert report.drain.processed == 2 and report.drain.failed == 0
    assert all(m.processed_at and m.last_error is None for m in hints(harness.database))
    assert harness.link(signature["id"]).status_category == "gone"
    assert any(getattr(r, "fields", {}).get("issue") == "CRASH-99" for r in caplog.records)


def test_only_a_new_resolution_in_jira_resolves_a_regressed_signature_again(harness, engineer):
    """Comment-only mode: the issue stays done. An engineer's comment on it is no resolving it
    again; reopening and resolving it is."""
    signature = regressed_with_reopening_off(harness, engineer)
    harness.sync()
    harness.later(minutes=1)
    engineer.add_comment("CRASH-1", "looking at the new crash")
    harness.later(minutes=1)
    harness.sync()
    assert harness.signature(signature["id"]).status == "regressed"
    assert harness.link(signature["id"]).comments[-1]["body"] == "looking at the new crash"
    harness.emulator.transition("CRASH-1", "new")
    harness.later(minutes=1)
    resolve_in_jira(harness, engineer, "CRASH-1", "Fixed", versions=["6.8.0-60", "6.8.1-2"])
    harness.later(minutes=1)
    harness.sync()
    resolved = harness.signature(signature["id"])
    assert resolved.status == "resolved" and resolved.fixed_in_kernel == "6.8.1-2"


def test_an_issue_moved_to_another_project_keeps_its_link(harness, database):
    """Moved, the issue keeps its id and gets a new key: it is the same issue, not a second one."""
    harness.emulator.add_project("OPS")
    signature = harness.crash()["signature"]
    harness.sync()
    harness.later(minutes=3)
    new_key = harness.emulator.move("CRASH-1", "OPS")
    with database.session() as session:  # the webhook's hint, as Jira sends it after a move
        publish(session, "jira.issue_changed", None, issue_key=new_key, event="jira:issue_updated")
    harness.sync(with_reconcile=False)
    link = harness.link(signature["id"])
    assert (link.issue_key, link.last_error) == (new_key, None)
    assert link.url.endswith(f"/browse/{new_key}")
