"""RCAs of signatures merged by hand, on both databases: the bug keeps one confirmed RCA, an RCA
of the merged signature is checked and confirmed as the survivor's, and a recheck of every
signature flags nothing that holds."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from registry.core.signatures import Signature
from registry.rca.models import Rca
from tests.support.cli import crashreg_for
from tests.support.http import auth
from tests.support.rca import Seeded, ai_rca, post_rca, review, seed


def confirmed_rca(client: Any, make_token: Any, seeded: Seeded, fix: str, reviewer: str) -> str:
    body = ai_rca(seeded, author="alice", author_kind="human", agent=None, fix={"kernel_version": fix})
    posted = post_rca(client, make_token("triage", name="alice"), seeded.signature_id,
                      {k: v for k, v in body.items() if v is not None})
    assert posted.status_code == 201 and posted.json["checks_passed"], posted.json
    done = review(client, make_token("triage", name=reviewer), posted.json["id"], "confirmed", "holds")
    assert done.status_code == 200, done.json
    return str(posted.json["id"])


def test_a_merged_signature_s_rcas_are_the_survivor_s(client, database, make_token, settings) -> None:  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    survivor = seed(client, database, reporter, "ext4_evict_inode", [("gpu-a1", "6.8.0-52", "us-east")])
    merged = seed(client, database, reporter, "ext4_put_super", [("gpu-b1", "6.8.0-52", "us-east")],
                  caller="kill_block_super")
    kept = confirmed_rca(client, make_token, survivor, "10.5", "bob")
    given_way = confirmed_rca(client, make_token, merged, "12.0", "carol")
    # an agent's RCA of the merged signature, proposed before the merge, citing its event
    agent = make_token("triage", kind="agent")
    proposed = post_rca(client, agent, merged.signature_id, ai_rca(merged)).json["id"]

    dave = make_token("triage", name="dave")
    merging = client.post(f"/api/v1/signatures/{survivor.signature_id}/merge",
                          json={"other": merged.signature_id}, headers=auth(dave))
    assert merging.status_code == 200, merging.json

    listed = client.get(f"/api/v1/signatures/{survivor.signature_id}/rcas",
                        headers=auth(make_token("read"))).json["rcas"]
    statuses = {rca["id"]: rca["status"] for rca in listed}
    assert statuses == {kept: "confirmed", given_way: "superseded", str(proposed): "proposed"}
    # the merged signature's event is the survivor's now: its RCA's checks hold, no override needed
    confirmed = review(client, make_token("triage", name="erin"), str(proposed), "confirmed", "holds")
    assert confirmed.status_code == 200, confirmed.json
    assert confirmed.json["checks_passed"] is True
    with database.session() as session:
        rcas = {rca.id: rca.status for rca in session.scalars(select(Rca))}
        assert sorted(rcas.values()) == ["confirmed", "superseded", "superseded"]
        assert rcas[int(proposed)] == "confirmed"
        assert session.get_one(Signature, int(survivor.signature_id)).fixed_in_kernel == "6.8.0-100"
        assert session.get_one(Signature, int(merged.signature_id)).fixed_in_kernel == "12.0"  # untouched

    rechecked = crashreg_for(settings, "rca", "recheck")
    assert rechecked.returncode == 0, rechecked.stderr
    assert "rechecked RCAs of 1 signatures; 0 newly flagged" in rechecked.stderr
