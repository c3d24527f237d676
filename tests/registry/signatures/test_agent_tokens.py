"""An agent token (an AI triaging, whatever its scope) proposes RCAs; it never changes the record
by judgement: a signature's fields and capture policy, merges, unpins. A human's token does."""

from __future__ import annotations

from tests.support.capture import post_capture
from tests.support.http import auth
from tests.support.signatures import GPF_LOG, WARNING_LOG, report, signature


def test_agent_tokens_are_refused_the_record_s_decisions(client, make_token) -> None:  # type: ignore[no-untyped-def]
    reporter, human = make_token("report"), make_token("triage", name="alice")
    a = report(client, reporter, GPF_LOG)
    b = report(client, reporter, WARNING_LOG)["signature"]
    capture = post_capture(client, reporter, a["event_id"], bytes=1 << 20).json["id"]
    assert client.put(f"/api/v1/captures/{capture}/pin", headers=auth(human)).status_code == 201
    a_id = a["signature"]["id"]
    before = signature(client, human, a_id)
    for scope in ("triage", "admin"):
        agent = make_token(scope, kind="agent")
        writes = [
            client.patch(f"/api/v1/signatures/{a_id}", headers=auth(agent),
                         json={"status": "resolved", "title": "Root cause: cosmic ray (AI verified)"}),
            client.patch(f"/api/v1/signatures/{a_id}", headers=auth(agent),
                         json={"capture_policy": {"mode": "skip"}}),
            client.post(f"/api/v1/signatures/{a_id}/merge", headers=auth(agent), json={"other": b["id"]}),
            client.delete(f"/api/v1/captures/{capture}/pin", headers=auth(agent)),
        ]
        assert [w.status_code for w in writes] == [403] * 4, [w.json for w in writes]
        assert all("agent tokens may not" in w.json["error"]["message"] for w in writes)
    assert signature(client, human, a_id) == before
    assert signature(client, human, b["id"])["id"] == b["id"]  # not merged
    pins = client.get(f"/api/v1/captures/{capture}/pins", headers=auth(human)).json["pins"]
    assert [p["unpinned_by"] for p in pins] == [None]
    # a human's token does each
    assert client.patch(f"/api/v1/signatures/{a_id}", headers=auth(human),
                        json={"status": "resolved"}).json["status"] == "resolved"
    assert client.post(f"/api/v1/signatures/{a_id}/merge", headers=auth(human),
                       json={"other": b["id"]}).status_code == 200
    assert client.delete(f"/api/v1/captures/{capture}/pin", headers=auth(human)).status_code == 200
