"""Merges and Jira: a Duplicate resolved in Jira is the registry's own merge, never a cycle."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from registry.core.events import Event
from registry.core.signatures import Signature, SignatureAlias
from registry.db import utcnow
from registry.migrate import downgrade, upgrade
from registry.signatures.service import signature_stats
from tests.support.jira import Harness, function_name


def close_as_duplicate(harness: Harness, duplicate_key: str, original_key: str) -> None:
    """What an engineer does: link the issue as a duplicate, then resolve it as one."""
    harness.emulator.link_duplicate(duplicate_key, original_key)
    harness.emulator.transition(duplicate_key, "done", resolution="Duplicate")


def listed_ids(client, make_token) -> set[str]:
    answer = client.get("/api/v1/signatures?limit=100",
                        headers={"Authorization": f"Bearer {make_token('read')}"})
    return {s["id"] for s in answer.json["signatures"]}


@pytest.mark.parametrize("rounds", ["same-round", "separate-rounds"])
def test_issues_closed_as_duplicates_of_each_other_never_make_a_cycle(harness, client, make_token,
                                                                      rounds, caplog):
    x = harness.crash(function=function_name(1))["signature"]
    y = harness.crash(function=function_name(2), host="gpu-b2")["signature"]
    harness.sync()
    x_key, y_key = harness.link(x["id"]).issue_key, harness.link(y["id"]).issue_key
    harness.later(minutes=5)
    close_as_duplicate(harness, x_key, y_key)
    if rounds == "separate-rounds":
        harness.later(minutes=5)
        harness.sync()
    harness.later(minutes=1)
    close_as_duplicate(harness, y_key, x_key)
    harness.later(minutes=5)
    with caplog.at_level("WARNING", logger="crashreg.jira"):
        harness.sync()
    merged = {s["id"]: harness.signature(s["id"]).merged_into_id for s in (x, y)}
    assert merged == {x["id"]: int(y["id"]), y["id"]: None}, "X into Y once, and never Y into X"
    assert any("cycle" in getattr(record, "fields", {}).get("reason", "") for record in caplog.records)
    assert harness.link(y["id"]).issue_key == y_key, "the issue stays linked"
    assert y["id"] in listed_ids(client, make_token)
    later = harness.crash(function=function_name(1), host="gpu-c3")
    assert later["signature"]["id"] == y["id"], "X's crashes land on the signature it became"


def test_a_jira_duplicate_is_the_registrys_merge_events_and_counts_move(harness, database):
    dup = harness.crash(function=function_name(1), host="gpu-a1")["signature"]
    harness.crash(function=function_name(1), host="gpu-a2")
    original = harness.crash(function=function_name(2), host="gpu-b1")["signature"]
    harness.sync()
    harness.later(minutes=5)
    close_as_duplicate(harness, harness.link(dup["id"]).issue_key,
                       harness.link(original["id"]).issue_key)
    harness.later(minutes=5)
    harness.sync()
    harness.later(minutes=5)
    harness.sync()  # read back again (reconciliation's overlap): still one merge, no error
    with database.session() as session:
        assert signature_stats(session, int(original["id"]))[0] == 3
        assert signature_stats(session, int(dup["id"]))[0] == 0
        hosts = session.scalar(select(func.count(func.distinct(Event.host_id)))
                               .where(Event.signature_id == int(original["id"])))
        assert hosts == 3
        alias = session.get_one(SignatureAlias, dup["fingerprint"])
        assert alias.signature_id == int(original["id"])
    assert harness.signature(dup["id"]).merged_into_id == int(original["id"])
    assert harness.link(dup["id"]).last_error is None


def test_an_api_merge_updates_the_survivors_issue_and_says_so_on_the_merged_one(
        harness, client, make_token):
    """The merged signature's crashes are older than the survivor's last facts update: only
    the merge itself can tell the sync that the survivor's counts changed."""
    harness.later(minutes=-30)  # the crashes: older than anything the API stamps
    survivor = harness.crash(function=function_name(1), host="gpu-a1")["signature"]
    other = harness.crash(function=function_name(2), host="gpu-b1")["signature"]
    harness.crash(function=function_name(2), host="gpu-b2")
    harness.sync()
    survivor_key, other_key = harness.link(survivor["id"]).issue_key, harness.link(other["id"]).issue_key
    harness.clock.advance(seconds=(utcnow() - harness.clock()).total_seconds())  # the real time
    harness.sync()  # the facts, as of now: nothing has changed since
    answer = client.post(f"/api/v1/signatures/{survivor['id']}/merge", json={"other": other["id"]},
                         headers={"Authorization": f"Bearer {make_token('triage')}"})
    assert answer.status_code == 200
    for _ in range(2):
        harness.later(minutes=6)
        harness.sync()
    description = harness.emulator.issue(survivor_key).fields["description"]
    assert "||Events|3|" in description and "||Hosts|3|" in description
    merged = harness.emulator.issue(other_key)
    assert "||Events|2|" in merged.fields["description"], "its last facts, not zeros"
    (comment,) = [c["body"] for c in merged.comments]
    assert "Merged" in comment and survivor_key in comment


@pytest.mark.parametrize("jira_flavour", ["datacenter"], indirect=True)
def test_signatures_an_earlier_release_merged_into_themselves_are_repaired(harness, db_url):
    """Migration 0046: what the cycle left behind (merged_into_id = its own id) stands again."""
    database = harness.database
    database.dispose()
    downgrade(db_url, "0045_symbol_file_links")
    harness.crash(function=function_name(1))
    with database.session() as session:
        session.execute(update(Signature).values(merged_into_id=Signature.id))
    database.dispose()
    upgrade(db_url)
    assert harness.signature(1).merged_into_id is None
