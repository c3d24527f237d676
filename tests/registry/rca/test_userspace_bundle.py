"""The triage bundle of a userspace signature built from real cores (the demo program's return
to null in ring_buffer_commit, two releases): every frame of every sampled event, the guilty
one marked, labels with their evidence, the process, the cores' commands, and an AGENTS.md
written for a userspace crash."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import replace

from registry.config import DumpStoreSettings
from registry.rca.commands import write_bundle
from registry.storage.store import open_store
from tests.support.capture import post_capture, report
from tests.support.cli import crashreg_for
from tests.support.demo_cores import core_report
from tests.support.http import auth
from tests.support.rca import post_rca
from tests.support.retention import store_dump

PUBLIC = "http://crashreg.test"
RING = "ingest::ring_buffer_commit"
CRASHES = [("3.1.4", "vm-a1", 0), ("3.1.4", "vm-a2", 1), ("3.2.0", "vm-b1", 0), ("3.2.0", "vm-b2", 1)]


def test_a_userspace_bundle_lists_every_frame_labels_with_evidence_process_and_cores(
    client, make_token, database, settings, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    answers = [report(client, reporter, core_report("ring", release, host, f"2026-11-2{i}T10:00:00Z", copy))
               for i, (release, host, copy) in enumerate(CRASHES)]
    signature_id = answers[0]["signature"]["id"]
    assert {a["signature"]["id"] for a in answers} == {signature_id}
    capture = post_capture(client, reporter, answers[0]["event_id"], method="core", status="completed",
                           bytes=4096).json
    store_dump(database, open_store(DumpStoreSettings(url=str(tmp_path / "dumps")), settings.public_url),
               capture["id"])

    bundle = client.get(f"/api/v1/signatures/{signature_id}/triage-bundle",
                        headers=auth(make_token("read"))).json
    assert len(bundle["events"]) == len(CRASHES)
    for event in bundle["events"]:
        crash = event["userspace"]
        sent = [f for f in crash["frames"] if f["index"] is not None]
        assert len(sent) == 5  # the bad pc, the thread's entry, libstdc++, two libc frames
        assert crash["frames"][crash["guilty"]]["function"] == RING
        # every frame named: the red zone's function, unnamed ones as module+offset
        assert event["frames"][:2] == ["0x0", RING]
        assert [name.rsplit("+0x")[0] for name in event["frames"][3:]] == ["libstdc++.so.6.0.30", "libc.so.6",
                                                                       "libc.so.6"]
        assert [label["label"] for label in crash["labels"]] == ["return-to-null", "segfault"]
        assert crash["process"]["version"] in ("3.1.4", "3.2.0") and crash["process"]["started_at"]
        assert event["captures"] == [] or event["captures"][0]["debug_packages"] == []
    assert bundle["debuginfo"] == [] and bundle["dumps"] == []
    assert [v["program_version"] for v in bundle["facts"]["program_versions"]] == ["3.1.4", "3.2.0"]
    [with_core] = [e for e in bundle["events"] if e["core_commands"]]
    opened = with_core["core_commands"][0]["open"]
    assert f" && DEBUGINFOD_URLS={PUBLIC}/debuginfod/ DEBUGINFOD_HEADERS_FILE=" in opened

    agents = bundle["agents_md"]
    assert "console" not in agents.lower() and "None (" not in agents
    for kernel_only in ("kernels it crashed on", "fixed in kernel", "drgn", "vmlinux", "lore.kernel.org"):
        assert kernel_only not in agents
    assert f"=> #- {RING} [ingest-worker]" in agents  # the guilty frame, from the red zone
    unnamed = r"^- #4 libc\.so\.6\+0x[0-9a-f]+ build-id [0-9a-f]{40} \(userspace-runtime\)$"
    assert re.search(unnamed, agents, re.M)
    assert "- label `return-to-null`: pc 0; the slot `ret` popped (%rsp-8) held 0" in agents
    assert "- program releases it crashed in: 3.1.4 (2 crashes, 2026-11-20 to 2026-11-21), 3.2.0 (2 crashes" \
        in agents
    assert "release 3.1.4, build-id " in agents and "started 2026-11-18T08:00:00Z" in agents
    commands = with_core["core_commands"][0]
    assert commands["fetch"] in agents and commands["open"] in agents
    assert "## The population: what the program's crashes say" in agents
    assert re.search(r"^- thread \d+: .*std::thread::join\(\) \[libstdc\+\+\.so\.6\.0\.30\+0x[0-9a-f]+\] <- "
                     r"main \[ingest-worker\+0x[0-9a-f]+\] <- ", agents, re.M)

    example = json.loads(re.search(r"```json\n(.*?)\n```", agents, re.S).group(1))  # type: ignore[union-attr]
    assert example["fix"] == {"commit": "0123456789ab"}
    posted = post_rca(client, make_token("triage", kind="agent"), signature_id, example)
    assert posted.status_code == 201, posted.json
    statuses = {c["name"]: c["status"] for c in posted.json["checks"]}
    assert statuses["functions_in_frames"] == "pass" and posted.json["checks_passed"] is True
    # the program's own source line, cited without a kernel version (a kernel's RCA names one)
    cited = dict(example, evidence=[*example["evidence"], {"type": "source", "file": "ring.c", "line": 4,
                                                          "function": RING}])
    with_source = post_rca(client, make_token("triage", kind="agent"), signature_id, cited)
    assert with_source.status_code == 201 and with_source.json["checks_passed"] is True, with_source.json


def test_a_userspace_bundles_workspace_fetches_its_cores_for_gdb(
    app, client, make_token, database, settings, live_server, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """`crashreg triage-bundle` of a userspace signature writes a workspace for its cores: a
    setup.sh that downloads each stored core beside bundle.json under the name AGENTS.md's gdb
    commands use, with no kernel tooling (drgn's inspect-dump.py, a Containerfile for drgn, an
    empty console/), where it wrote the kernel's, whose setup.sh found "no capture"."""
    app.extensions["crashreg.settings"] = replace(settings, public_url=live_server)
    reporter = make_token("report")
    answer = report(client, reporter, core_report("ring", "3.1.4", "vm-a1", "2026-11-20T10:00:00Z", 0))
    capture = post_capture(client, reporter, answer["event_id"], method="core", status="completed",
                           bytes=1000).json
    store_dump(database, open_store(settings.dump_store, live_server), capture["id"])
    read = make_token("read")
    path = f"/api/v1/signatures/{answer['signature']['id']}/triage-bundle"
    bundle = client.get(path, headers=auth(read)).json
    # the command writes it too, reading the registry's symbols beside its own transaction (on
    # SQLite it waited 30 s for the write lock it held, then failed)
    cli = tmp_path / "cli"
    command = crashreg_for(settings, "triage-bundle", answer["signature"]["id"], "--out", str(cli))
    assert command.returncode == 0, command.stderr
    assert sorted(path.name for path in cli.iterdir()) == ["AGENTS.md", "bundle.json", "setup.sh"]
    out = tmp_path / "bundle"
    written = write_bundle(bundle, out)
    assert sorted(path.name for path in written) == ["AGENTS.md", "bundle.json", "setup.sh"]
    assert sorted(path.name for path in out.iterdir()) == ["AGENTS.md", "bundle.json", "setup.sh"]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}

    def setup(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "setup.sh"], cwd=out, env=env | extra, capture_output=True, text=True,
                              timeout=120)

    refused = setup()
    assert refused.returncode == 1 and "set CRASHREG_TOKEN to a read token" in refused.stderr
    done = setup(CRASHREG_TOKEN=read)
    assert done.returncode == 0, done.stderr
    events = json.loads((out / "bundle.json").read_text())["events"]
    [core] = [c for event in events for c in event["core_commands"]]
    assert (out / core["file"]).read_bytes() == b"\0" * 1000
    assert f"{core['file']} downloaded" in done.stderr and core["file"] in (out / "AGENTS.md").read_text()
    assert (out / "debuginfod-headers").read_text() == f"Authorization: Bearer {read}\n"

