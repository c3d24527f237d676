"""The triage bundle over HTTP and from the CLI, and `crashreg rca recheck`, on both databases."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from registry.cli import main
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.outbox import OutboxMessage
from registry.rca.bundle import WORKSPACE
from tests.support.http import auth
from tests.support.rca import ai_rca, post_rca, review, seed

RHEL = "5.14.0-362.8.1.el9_3.x86_64"
CRASHES = [
    ("gpu-c1", "6.8.0-52-generic", "us-east"),
    ("gpu-c1", "6.8.0-52-generic", "us-east"),
    ("gpu-c1", "6.8.0-52-generic", "us-east"),
    ("gpu-c1", "6.8.0-52-generic", "us-east"),
    ("gpu-c2", "6.8.0-52-generic", "us-east"),
    ("gpu-c3", RHEL, "eu-west"),
    ("gpu-c1", "6.8.0-52-generic", "us-east"),
    ("gpu-c1", "6.8.0-52-generic", "us-east"),
]


@pytest.fixture
def world(client, database, make_token):  # type: ignore[no-untyped-def]
    """A signature with 8 crashes on 3 hosts, a capture, a Jira issue, a reviewed RCA and a sibling."""
    reporter = make_token("report")
    main_sig = seed(client, database, reporter, "xfs_iget_cache_hit", CRASHES)
    sibling = seed(client, database, reporter, "xfs_inode_free", [("gpu-z9", "6.8.0-52-generic", "us-east")])
    unrelated = seed(client, database, reporter, "tcp_ack_update", [("net-9", "6.8.0-52-generic", "us-east")])
    with database.session() as session:
        for sig, function in ((sibling, "xfs_iget_cache_hit"), (unrelated, "tcp_ack_update")):
            session.execute(
                update(Signature)
                .where(Signature.id == int(sig.signature_id))
                .values(
                    function=function, frames=[function, "tcp_v4_rcv"] if sig is unrelated else sig.frames
                )
            )
        session.add(
            JiraLink(
                signature_id=int(main_sig.signature_id),
                issue_key="CRASH-42",
                url="https://jira.example/browse/CRASH-42",
            )
        )
    rhel_event = main_sig.event_ids[5]
    capture = client.post(
        f"/api/v1/events/{rhel_event}/captures",
        json={
            "method": "makedumpfile",
            "status": "completed",
            "uri": "s3://dumps/gpu-c3/vmcore",
            "dump_level": 31,
        },
        headers=auth(reporter),
    )
    assert capture.status_code == 201, capture.json
    rca = post_rca(client, make_token("triage", kind="agent"), main_sig.signature_id, ai_rca(main_sig)).json
    review(client, make_token("triage", name="dana"), rca["id"], "rejected", "not the free path")
    return {
        "sig": main_sig,
        "sibling": sibling,
        "unrelated": unrelated,
        "capture": capture.json,
        "rhel_event": rhel_event,
    }


def test_bundle_has_facts_diverse_events_debuginfo_rcas_jira_and_similar(client, make_token, world) -> None:  # type: ignore[no-untyped-def]
    sig = world["sig"]
    response = client.get(
        f"/api/v1/signatures/{sig.signature_id}/triage-bundle", headers=auth(make_token("read"))
    )
    assert response.status_code == 200
    bundle = response.json
    assert bundle["facts"]["events"] == 8 and bundle["facts"]["hosts"] == 3
    assert {k["kernel_version"]: k["events"] for k in bundle["facts"]["kernels"]} == {
        "6.8.0-52-generic": 7,
        RHEL: 1,
    }

    events = bundle["events"]
    assert {e["hostname"] for e in events} == {"gpu-c1", "gpu-c2", "gpu-c3"}
    assert {e["host"]["region"] for e in events} == {"us-east", "eu-west"}
    assert all("BUG: unable to handle page fault in xfs_iget_cache_hit" in e["console_log"] for e in events)
    assert all(e["frames"] == sig.frames for e in events)
    captured = next(e for e in events if e["id"] == world["rhel_event"])
    assert captured["captures"][0]["uri"] == "s3://dumps/gpu-c3/vmcore"
    assert captured["captures"][0]["debug_packages"] == [
        "kernel-debuginfo-5.14.0-362.8.1.el9_3",
        "kernel-debuginfo-common-5.14.0-362.8.1.el9_3",
    ]
    sources = {d["kernel_version"]: d["source_ref"] for d in bundle["debuginfo"]}
    assert sources[RHEL] == "kernel-5.14.0-362.8.1.el9_3"
    assert sources["6.8.0-52-generic"].startswith("Ubuntu-6.8.0-52")

    assert bundle["rcas"][0]["status"] == "rejected"
    assert bundle["rcas"][0]["reviews"][0]["note"] == "not the free path"
    assert bundle["jira"]["key"] == "CRASH-42" and bundle["jira"]["url"].endswith("/CRASH-42")
    similar = {s["id"]: s for s in bundle["similar_signatures"]}
    assert world["sibling"].signature_id in similar
    assert similar[world["sibling"].signature_id]["why"][0] == "same guilty function xfs_iget_cache_hit"
    assert world["unrelated"].signature_id not in similar
    assert bundle["epidemiology"]["verdict"] in {"single-host", "hardware-config", "software", "inconclusive"}
    assert set(bundle["evidence_format"]["item_types"]) == {
        "event",
        "capture",
        "function",
        "source",
        "kernel",
        "commit",
        "link",
    }


def test_agents_md_sets_budgets_and_its_example_evidence_passes_the_checks(client, make_token, world) -> None:  # type: ignore[no-untyped-def]
    sig = world["sig"]
    bundle = client.get(
        f"/api/v1/signatures/{sig.signature_id}/triage-bundle", headers=auth(make_token("read"))
    ).json
    agents = bundle["agents_md"]
    for rule in ("## Budget", "## Stop conditions", "registry API requests | 60", "never review"):
        assert rule in agents
    assert f"/api/v1/signatures/{sig.signature_id}/rcas" in agents
    example = json.loads(re.search(r"```json\n(.*?)\n```", agents, re.S).group(1))  # type: ignore[union-attr]
    example.pop("fix")  # its fix version is a placeholder for the agent to fill in
    posted = post_rca(client, make_token("triage", kind="agent"), sig.signature_id, example)
    assert posted.status_code == 201, posted.json
    statuses = {c["name"]: c["status"] for c in posted.json["checks"]}
    assert statuses["events_belong_to_signature"] == "pass"
    assert statuses["functions_in_frames"] == "pass"
    assert statuses["kernel_versions_crashed_on"] == "pass"
    assert posted.json["checks_passed"] is True


def test_bundle_refusals(client, make_token, world) -> None:  # type: ignore[no-untyped-def]
    assert client.get(f"/api/v1/signatures/{world['sig'].signature_id}/triage-bundle").status_code == 401
    assert (
        client.get("/api/v1/signatures/777777/triage-bundle", headers=auth(make_token("read"))).status_code
        == 404
    )


@pytest.fixture
def cli(db_url, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CRASHREG_DATABASE_URL", db_url)
    monkeypatch.setenv("CRASHREG_PUBLIC_URL", "http://crashreg.test")
    return CliRunner()


def test_cli_writes_bundle_agents_md_and_console_logs(cli, client, make_token, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sig = world["sig"]
    fingerprint = client.get(f"/api/v1/signatures/{sig.signature_id}", headers=auth(make_token("read"))).json[
        "fingerprint"
    ]
    out = tmp_path / "bundle"
    result = cli.invoke(main, ["triage-bundle", fingerprint, "--out", str(out)])
    assert result.exit_code == 0, result.output
    bundle = json.loads((out / "bundle.json").read_text())
    assert bundle["signature"]["id"] == sig.signature_id and "agents_md" not in bundle
    agents_md = (out / "AGENTS.md").read_text()
    assert agents_md.startswith(f"# Triage rules for signature {sig.signature_id}:")
    for event in bundle["events"]:
        assert "console_log" not in event
        log = (out / event["console_log_file"]).read_text()
        assert "BUG: unable to handle page fault in xfs_iget_cache_hit" in log
    assert len(list((out / "console").iterdir())) == len(bundle["events"])
    # The triage workspace: the s3 capture's dump, its kernel's vmlinux, the drgn command for it.
    capture = world["capture"]
    dump = f"dumps/{world['rhel_event']}-{capture['id']}.vmcore"
    assert bundle["dumps"] == [{
        "event_id": str(world["rhel_event"]), "capture_id": capture["id"], "kernel_version": RHEL,
        "kernel_dir": RHEL,
        "target": None, "uri": "s3://dumps/gpu-c3/vmcore", "dump": dump, "vmlinux": f"debug/{RHEL}/vmlinux",
        "kernel_build_id": None, "modules": [],  # no report carried the kernel's build-id
        "drgn": f"drgn -q -c {dump} -s debug/{RHEL}/vmlinux inspect-dump.py",
        # a capture whose uri someone wrote, not a dump in the store: no link to hand out
        "download_url": None, "download_expires_at": None, "encoding": None,
    }]
    assert f"sh setup.sh\ndrgn -q -c {dump} -s debug/{RHEL}/vmlinux inspect-dump.py\n" in agents_md
    for name in ("setup.sh", "inspect-dump.py", "Containerfile"):
        assert (out / name).read_bytes() == (WORKSPACE / name).read_bytes()

    missing = cli.invoke(main, ["triage-bundle", "no-such-signature", "--out", str(tmp_path / "x")])
    assert (
        missing.exit_code != 0 and "no signature with id or fingerprint 'no-such-signature'" in missing.output
    )


def test_recheck_flags_a_confirmed_rca_when_it_crashes_on_the_fix_kernel(
    cli, client, database, make_token, world
) -> None:  # type: ignore[no-untyped-def]
    sig = world["sig"]
    body = ai_rca(
        sig,
        evidence=[
            {"type": "event", "event_id": sig.event_ids[0]},
            {"type": "function", "function": sig.frames[0]},
        ],
    )
    rca = post_rca(
        client,
        make_token("triage", kind="agent"),
        sig.signature_id,
        body | {"fix": {"kernel_version": "6.8.0-60-generic"}},
    ).json
    assert review(client, make_token("triage"), rca["id"], "confirmed", "ok").status_code == 200

    unchanged = cli.invoke(main, ["rca", "recheck"])
    assert unchanged.exit_code == 0 and "0 newly flagged" in unchanged.output
    seed(
        client,
        database,
        make_token("report"),
        "xfs_iget_cache_hit",
        [("gpu-c4", "6.8.0-61-generic", "us-west")],
    )
    result = cli.invoke(main, ["rca", "recheck", sig.signature_id])
    assert result.exit_code == 0 and "1 newly flagged" in result.output
    after = client.get(f"/api/v1/rcas/{rca['id']}", headers=auth(make_token("read"))).json
    assert after["status"] == "confirmed" and after["flagged"] is True
    fix_check = next(c for c in after["checks"] if c["name"] == "fix_version_consistent")
    assert fix_check["problems"][0].startswith("crashed on 6.8.0-61-generic (>= fix 6.8.0-60-generic)")
    with database.session() as session:
        topics = session.scalars(
            select(OutboxMessage.payload).where(OutboxMessage.topic == "rca.flagged")
        ).all()
    assert [p["rca_id"] for p in topics] == [int(rca["id"])]
