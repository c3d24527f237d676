"""RCA lifecycle over HTTP on both databases: propose, checks, review, refusals, supersede."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from registry.core.signatures import Signature
from registry.db import utcnow
from registry.outbox import OutboxMessage
from registry.rca.models import Rca
from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.rca import Seeded, ai_rca, post_rca, review, seed

CRASHES = [
    ("gpu-a1", "6.8.0-52", "us-east"),
    ("gpu-a2", "6.8.0-52", "eu-west"),
    ("gpu-a3", "6.8.0-58", "us-east"),
]


@pytest.fixture
def seeded(client, database, make_token):  # type: ignore[no-untyped-def]
    return seed(client, database, make_token("report"), "ext4_evict_inode", CRASHES)


def outbox(database, topic: str) -> list[dict]:  # type: ignore[no-untyped-def]
    with database.session() as session:
        return [m.payload for m in session.scalars(select(OutboxMessage).where(OutboxMessage.topic == topic))]


def test_agent_proposes_an_rca_whose_evidence_holds(client, database, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    agent = make_token("triage", kind="agent", name="bot-token")
    response = post_rca(client, agent, seeded.signature_id, ai_rca(seeded))
    assert response.status_code == 201, response.json
    rca = response.json
    assert rca["status"] == "proposed"
    assert rca["agent"] == {"name": "triage-bot", "model": "model-x-2026"}
    assert rca["posted_by"] == "bot-token"
    assert rca["checks_passed"] is True and rca["flagged"] is False
    statuses = {c["name"]: c["status"] for c in rca["checks"]}
    assert statuses == {
        "cites_checkable_evidence": "pass",
        "events_belong_to_signature": "pass",
        "captures_belong_to_signature": "skip",
        "functions_in_frames": "pass",
        "kernel_versions_crashed_on": "pass",
        "fix_version_consistent": "pass",
    }
    reader = make_token("read")
    assert client.get(f"/api/v1/rcas/{rca['id']}", headers=auth(reader)).json == rca
    listed = client.get(f"/api/v1/signatures/{seeded.signature_id}/rcas", headers=auth(reader)).json
    assert [r["id"] for r in listed["rcas"]] == [rca["id"]]
    assert outbox(database, "rca.flagged") == []


def test_hallucinated_evidence_is_flagged_stored_and_published(client, database, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    other = seed(
        client, database, make_token("report"), "tcp_sendmsg_locked", [("net-1", "6.8.0-52", "us-east")]
    )
    body = ai_rca(
        seeded,
        evidence=[
            {"type": "event", "event_id": other.event_ids[0]},
            {"type": "event", "event_id": "987654"},
            {"type": "event", "event_id": "0" + seeded.event_ids[0]},  # the signature's own, as "01058"
            {"type": "function", "function": "btrfs_commit_transaction"},
            {"type": "kernel", "kernel_version": "6.9.1"},
        ],
        fix={"kernel_version": "6.8.0-58"},
    )
    response = post_rca(client, make_token("triage", kind="agent"), seeded.signature_id, body)
    assert response.status_code == 201
    rca = response.json
    assert rca["checks_passed"] is False and rca["flagged"] is True
    failed = {c["name"]: c["problems"] for c in rca["checks"] if c["status"] == "fail"}
    assert failed["events_belong_to_signature"] == [
        f"event {other.event_ids[0]} belongs to signature {other.signature_id}, not {seeded.signature_id}",
        "event 987654 does not exist",
    ]
    assert failed["functions_in_frames"] == [
        "function btrfs_commit_transaction is in none of the signature's frames"
    ]
    assert "6.9.1" in failed["kernel_versions_crashed_on"][0]
    assert failed["fix_version_consistent"][0].startswith("crashed on 6.8.0-58 (>= fix 6.8.0-58): 1 events")
    flagged = outbox(database, "rca.flagged")
    assert len(flagged) == 1 and flagged[0]["rca_id"] == int(rca["id"])
    assert {c["name"] for c in flagged[0]["failed_checks"]} == set(failed)
    with database.session() as session:
        assert session.get(Rca, int(rca["id"])).checks_passed is False  # the column Grafana reads


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"evidence": [{"type": "rumour", "text": "x"}]}, "evidence"),
        ({"evidence": [{"type": "commit", "commit": "not-a-sha"}]}, "evidence"),
        ({"evidence": [{"type": "source", "file": "a.c", "line": 0, "kernel_version": "6.8"}]}, "evidence"),
        ({"agent": None}, "agent"),
        ({"confidence": 1.5}, "confidence"),
        ({"author_kind": "robot"}, "author_kind"),
        ({"fix": {"kernel_version": "latest"}}, "fix"),
        # each a 500 before: a type that is no name, values past the RCA row's columns
        ({"evidence": [{"type": []}]}, "evidence"),
        ({"evidence": [{"type": {"a": 1}}]}, "evidence"),
        ({"fix": {"kernel_version": "6.1" + "x" * 200}}, "fix"),
        ({"fix": {"url": "https://x.example/" + "a" * 1100}}, "fix"),
        # ids past the id column (a 500 on PostgreSQL before), none, or no id at all
        ({"evidence": [{"type": "event", "event_id": "2147483648"}]}, "evidence"),
        ({"evidence": [{"type": "capture", "capture_id": "999999999999999999"}]}, "evidence"),
        ({"evidence": [{"type": "event", "event_id": "0"}]}, "evidence"),
        ({"evidence": [{"type": "event", "event_id": "\u0661"}]}, "evidence"),
        ({"evidence": [{"type": "kernel", "kernel_version": "6." + "1" * 400}]}, "evidence"),
        # a kernel signature's source line is read at a kernel version
        ({"evidence": [{"type": "source", "file": "fs/ext4/super.c", "line": 3}]}, "evidence"),
    ],
)
def test_malformed_rcas_are_refused_naming_the_field(
    client, database, make_token, seeded, change, field
) -> None:  # type: ignore[no-untyped-def]
    body = {k: v for k, v in (ai_rca(seeded) | change).items() if v is not None}
    response = post_rca(client, make_token("triage"), seeded.signature_id, body)
    assert response.status_code == 400
    assert field in response.json["error"]["fields"]


def test_agent_tokens_cannot_pass_as_humans_or_post_without_triage(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    human_body = ai_rca(seeded, author_kind="human", author="alice")
    response = post_rca(client, make_token("triage", kind="agent"), seeded.signature_id, human_body)
    assert response.status_code == 400
    assert response.json["error"]["fields"] == {
        "author_kind": ['must be "ai" when posted with an agent token']
    }
    assert post_rca(client, make_token("read"), seeded.signature_id, ai_rca(seeded)).status_code == 403
    assert post_rca(client, make_token("triage"), "99999", ai_rca(seeded)).status_code == 404


def test_review_refusals_agent_self_and_read_scope(client, database, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    poster = make_token("triage", name="alice-laptop")
    body = ai_rca(seeded, author="alice", author_kind="human")
    body.pop("agent")
    rca_id = post_rca(client, poster, seeded.signature_id, body).json["id"]

    agent = review(client, make_token("triage", kind="agent"), rca_id, "confirmed")
    assert agent.status_code == 403
    assert "agent tokens may propose RCAs but never review them" in agent.json["error"]["message"]
    own_token = review(client, poster, rca_id, "confirmed")
    assert (
        own_token.status_code == 403 and "someone else must review it" in own_token.json["error"]["message"]
    )
    own_name = review(client, make_token("triage", name="Alice"), rca_id, "confirmed")
    assert own_name.status_code == 403
    assert review(client, make_token("read"), rca_id, "confirmed").status_code == 403
    assert review(client, make_token("triage"), "424242", "confirmed").status_code == 404
    with database.session() as session:
        assert session.get(Rca, int(rca_id)).status == "proposed"


def test_an_agent_naming_itself_after_a_reviewer_does_not_keep_that_reviewer_out(
        client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    """An AI-written RCA's author is its agent: a human reviewer of the same name may review it
    (the reviewer of that name was refused, 403); the page says which token posted it."""
    from testkit.pages import login

    body = ai_rca(seeded, author="bob", agent={"name": "bob", "model": "model-x-2026"})
    rca_id = post_rca(client, make_token("triage", kind="agent", name="claude-runner"), seeded.signature_id,
                      body).json["id"]
    reviewed = review(client, make_token("triage", name="bob"), rca_id, "rejected", "not the mechanism")
    assert reviewed.status_code == 200, reviewed.json
    login(client, make_token("read"))
    page = client.get(f"/signatures/{seeded.signature_id}").get_data(as_text=True)
    assert "posted with token claude-runner" in page


def test_confirm_sets_fix_version_and_a_second_confirm_supersedes(
    client, database, make_token, seeded
) -> None:  # type: ignore[no-untyped-def]
    agent, reviewer = make_token("triage", kind="agent"), make_token("triage", name="bob")
    first = post_rca(client, agent, seeded.signature_id, ai_rca(seeded)).json
    confirmed = review(client, reviewer, first["id"], "confirmed", "matches the dumps")
    assert confirmed.status_code == 200, confirmed.json
    assert confirmed.json["status"] == "confirmed"
    assert confirmed.json["reviews"][0] | {"created_at": None} == {
        "verdict": "confirmed",
        "note": "matches the dumps",
        "reviewer": "bob",
        "checks_passed": True,
        "created_at": None,
    }
    with database.session() as session:
        assert session.get(Signature, int(seeded.signature_id)).fixed_in_kernel == "6.8.0-100"
    published = outbox(database, "rca.confirmed")
    assert published[0]["rca_id"] == int(first["id"]) and published[0]["fixed_in_kernel"] == "6.8.0-100"

    again = review(client, make_token("triage"), first["id"], "rejected", "changed my mind")
    assert again.status_code == 409 and "only proposed RCAs are reviewed" in again.json["error"]["message"]

    second = post_rca(
        client, agent, seeded.signature_id, ai_rca(seeded, fix={"kernel_version": "6.8.0-90"})
    ).json
    assert review(client, reviewer, second["id"], "confirmed", "better analysis").status_code == 200
    rcas = {
        r["id"]: r
        for r in client.get(f"/api/v1/signatures/{seeded.signature_id}/rcas", headers=auth(reviewer)).json[
            "rcas"
        ]
    }
    assert rcas[first["id"]]["status"] == "superseded"
    assert rcas[first["id"]]["superseded_by"] == second["id"]
    assert rcas[second["id"]]["status"] == "confirmed"
    assert [r["status"] for r in rcas.values()].count("confirmed") == 1
    with database.session() as session:
        assert session.get(Signature, int(seeded.signature_id)).fixed_in_kernel == "6.8.0-90"
    assert outbox(database, "rca.confirmed")[1]["superseded"] == [int(first["id"])]


def test_rejection_needs_a_note_and_keeps_it(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    rca_id = post_rca(client, make_token("triage", kind="agent"), seeded.signature_id, ai_rca(seeded)).json[
        "id"
    ]
    reviewer = make_token("triage")
    missing = review(client, reviewer, rca_id, "rejected")
    assert missing.status_code == 400 and "note" in missing.json["error"]["fields"]
    rejected = review(client, reviewer, rca_id, "rejected", "the inode is not freed there")
    assert rejected.json["status"] == "rejected"
    assert rejected.json["reviews"][0]["note"] == "the inode is not freed there"


def test_flagged_rca_is_confirmed_only_with_an_explicit_override(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    body = ai_rca(seeded, fix={"kernel_version": "6.8.0-52"})  # it still crashes on 6.8.0-52 and -58
    rca_id = post_rca(client, make_token("triage", kind="agent"), seeded.signature_id, body).json["id"]
    reviewer = make_token("triage")
    refused = review(client, reviewer, rca_id, "confirmed")
    assert refused.status_code == 409
    assert refused.json["error"]["code"] == "checks_failed"
    assert [c["name"] for c in refused.json["error"]["fields"]["checks"]] == ["fix_version_consistent"]
    assert review(client, reviewer, rca_id, "confirmed", override_checks=True).status_code == 400
    for slip in ("yes", 1, "no", 0):  # a JSON boolean only: nothing else is read as a decision
        sloppy = review(client, reviewer, rca_id, "confirmed", "backported", override_checks=slip)
        assert sloppy.status_code == 400 and "override_checks" in sloppy.json["error"]["fields"]
    forced = review(
        client, reviewer, rca_id, "confirmed", "fix was backported to -52 late", override_checks=True
    )
    assert forced.status_code == 200
    assert forced.json["status"] == "confirmed" and forced.json["reviews"][0]["checks_passed"] is False


def test_database_allows_one_confirmed_rca_per_signature(database, client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    def row(status: str) -> Rca:
        return Rca(
            signature_id=int(seeded.signature_id),
            status=status,
            summary="s",
            body="b",
            author="a",
            author_kind="human",
            token_name="t",
            checks_passed=True,
            checked_at=utcnow(),
        )

    with database.session() as session:
        session.add_all([row("confirmed"), row("proposed"), row("superseded"), row("superseded")])
    with pytest.raises(IntegrityError), database.session() as session:
        session.add(row("confirmed"))


def test_concurrent_confirms_leave_one_confirmed_rca_and_a_consistent_history(  # type: ignore[no-untyped-def]
    live_server, client, make_token, seeded
) -> None:
    agent = make_token("triage", kind="agent")
    ids = [post_rca(client, agent, seeded.signature_id, ai_rca(seeded)).json["id"] for _ in range(4)]
    reviewers = [make_token("triage", name=f"reviewer-{i}") for i in range(4)]
    barrier = threading.Barrier(len(ids))

    def confirm(rca_id: str, token: str) -> int:
        barrier.wait()
        url = f"{live_server}/api/v1/rcas/{rca_id}/review"
        return requests.post(
            url, json={"verdict": "confirmed", "note": "race"}, headers=auth(token), timeout=60
        ).status_code

    with ThreadPoolExecutor(len(ids)) as pool:
        statuses = list(pool.map(confirm, ids, reviewers))
    assert set(statuses) <= {200, 409} and 200 in statuses
    rcas = client.get(f"/api/v1/signatures/{seeded.signature_id}/rcas", headers=auth(reviewers[0])).json[
        "rcas"
    ]
    by_status = [r["status"] for r in rcas]
    assert by_status.count("confirmed") == 1
    assert by_status.count("superseded") == statuses.count(200) - 1
    confirmed = next(r for r in rcas if r["status"] == "confirmed")
    assert all(r["superseded_by"] is not None for r in rcas if r["status"] == "superseded")
    assert confirmed["superseded_by"] is None


def test_functions_are_checked_against_frames_read_from_console_logs(client, make_token) -> None:  # type: ignore[no-untyped-def]
    answer = client.post("/api/v1/reports", json=crash_report(), headers=auth(make_token("report"))).json
    body = {
        "summary": "NAPI poll dereferences a freed CQ",
        "body": "…",
        "author": "eve",
        "author_kind": "human",
        "evidence": [
            {"type": "event", "event_id": answer["event_id"]},
            {"type": "function", "function": "__napi_poll"},
            {"type": "function", "function": "tcp_v4_rcv"},
        ],
    }
    rca = post_rca(client, make_token("triage"), answer["signature"]["id"], body).json
    functions = next(c for c in rca["checks"] if c["name"] == "functions_in_frames")
    assert functions["status"] == "fail"
    assert functions["problems"] == ["function tcp_v4_rcv is in none of the signature's frames"]


def test_confirmed_fix_version_decides_regressions_of_the_resolved_signature(  # type: ignore[no-untyped-def]
    client, database, make_token, seeded
) -> None:
    triage = make_token("triage", name="frank")
    rca_id = post_rca(
        client,
        make_token("triage", kind="agent"),
        seeded.signature_id,
        ai_rca(seeded, fix={"kernel_version": "6.8.0-60"}),
    ).json["id"]
    assert review(client, triage, rca_id, "confirmed", "fixed upstream").status_code == 200
    patched = client.patch(
        f"/api/v1/signatures/{seeded.signature_id}", json={"status": "resolved"}, headers=auth(triage)
    )
    assert patched.status_code == 200

    reporter = make_token("report")
    old = seed(client, database, reporter, "ext4_evict_inode", [("late-upgrader", "6.8.0-58", "us-east")])
    event = client.get(f"/api/v1/events/{old.event_ids[0]}", headers=auth(triage)).json
    assert event["regression"] == "old-kernel"
    assert event["signature"]["status"] == "resolved"

    new = seed(client, database, reporter, "ext4_evict_inode", [("patched-host", "6.8.0-61", "us-east")])
    event = client.get(f"/api/v1/events/{new.event_ids[0]}", headers=auth(triage)).json
    assert event["regression"] == "regressed"
    assert event["signature"]["status"] == "regressed"


def test_a_function_as_long_as_a_frame_may_name_it_can_be_cited(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    """C++ names run to 16,384 characters (a frame's limit); evidence stopped at 255."""
    key = "std::basic_string<char, std::char_traits<char>, std::allocator<char> >, "
    name = "std::map<" + key * 6 + ">::at"
    body = ai_rca(seeded, evidence=[*ai_rca(seeded)["evidence"], {"type": "function", "function": name}])
    posted = post_rca(client, make_token("triage", kind="agent"), seeded.signature_id, body)
    assert posted.status_code == 201, posted.json
    assert f"function {name} is in none of the signature's frames" in str(posted.json["checks"])


def test_a_frame_of_the_console_trace_beyond_the_engines_window_can_be_cited(
        client, database, make_token) -> None:  # type: ignore[no-untyped-def]
    """A report with only a console log: the engine hashes three frames, but every frame of the
    trace is the crash's (an RCA citing a deeper one was flagged as naming none of its frames)."""
    from tests.support.golden import golden

    answer = client.post("/api/v1/reports", headers=auth(make_token("report")), json=crash_report(
        console_log=golden("kinds/gpf"), host={"hostname": "gpu-t1", "kernel_version": "6.8.0-52"})).json
    seeded = Seeded(answer["signature"]["id"], [answer["event_id"]], ["tcf_exts_destroy"])
    deeper = {"type": "function", "function": "entry_SYSCALL_64_after_hwframe"}
    body = ai_rca(seeded, evidence=[{"type": "event", "event_id": answer["event_id"]}, deeper], fix=None)
    posted = post_rca(client, make_token("triage", kind="agent"), seeded.signature_id,
                      {k: v for k, v in body.items() if v is not None})
    assert posted.status_code == 201, posted.json
    statuses = {c["name"]: c["status"] for c in posted.json["checks"]}
    assert statuses["functions_in_frames"] == "pass", posted.json["checks"]
