"""`crashreg signatures rebuild` and `crashreg signature`, as real processes,
on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, delete, func, insert, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from registry.core.events import Event
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature, SignatureCounter
from registry.domains import wiring
from registry.fingerprint import ALGORITHM_VERSION, analyse_console_log
from registry.rca.models import Rca
from registry.signatures.checkpoint import RebuildFingerprint
from registry.signatures.rebuild import Rebuild, RebuildSummary, rebuild
from tests.support.cli import crashreg
from tests.support.golden import golden
from tests.support.http import auth
from tests.support.signatures import report, signature

GPF, WARNING, KASAN, KBUG = (golden(f"kinds/{name}") for name in ("gpf", "warning", "kasan",
                                                                   "kernel-bug"))


def age(database: Any, signature_id: int, old_fingerprint: str) -> None:
    """Make a signature look fingerprinted by an older algorithm (version 0)."""
    with database.session() as session:
        session.execute(update(Signature).where(Signature.id == signature_id)
                        .values(fingerprint=old_fingerprint, algorithm_version=0, title="old"))
        session.execute(update(Event).where(Event.signature_id == signature_id)
                        .values(fingerprint=old_fingerprint, algorithm_version=0))


def test_rebuild_moves_merges_and_splits_carrying_triage(db_url, client, database, make_token) -> None:
    reporter, triage = make_token("report"), make_token("triage")
    gpf = report(client, reporter, GPF)["signature"]
    warn = report(client, reporter, WARNING)["signature"]
    second_warning_event = report(client, reporter, WARNING)["event_id"]
    kasan = report(client, reporter, KASAN)["signature"]
    report(client, reporter, KASAN)
    kbug = report(client, reporter, KBUG)["signature"]

    with database.session() as session:
        # move: gpf under an old fingerprint, triaged, with a Jira issue
        session.add(JiraLink(signature_id=int(gpf["id"]), issue_key="CRASH-1"))
        session.execute(update(Signature).where(Signature.id == int(gpf["id"])).values(status="triaged"))
        # merge: the old algorithm had split the warning into two signatures
        twin = Signature(fingerprint="old-warning-b", algorithm_version=0, title="old", kind="warning",
                         first_seen=session.get_one(Signature, int(warn["id"])).first_seen,
                         status="triaged")
        session.add(twin)
        session.flush()
        session.execute(update(Event).where(Event.id == int(second_warning_event))
                        .values(signature_id=twin.id))
        session.add(JiraLink(signature_id=twin.id, issue_key="CRASH-2"))
        session.add(Rca(signature_id=twin.id, summary="driver bug", body="...", author="ana",
                        author_kind="human", token_name="t", checks_passed=True))
        # split: the old algorithm had lumped the kernel BUG into the KASAN signature
        session.execute(update(Event).where(Event.signature_id == int(kbug["id"]))
                        .values(signature_id=int(kasan["id"])))
        session.execute(delete(SignatureCounter).where(SignatureCounter.signature_id == int(kbug["id"])))
        session.execute(delete(Signature).where(Signature.id == int(kbug["id"])))
        session.execute(update(Signature).where(Signature.id == int(kasan["id"])).values(owner="bo"))
    age(database, int(gpf["id"]), "old-gpf")
    age(database, int(warn["id"]), "old-warning-a")
    age(database, twin.id, "old-warning-b")
    age(database, int(kasan["id"]), "old-kasan")

    rebuilt = crashreg(db_url, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "moved: 3, merged: 1, split: 1, new: 0" in rebuilt.stdout, rebuilt.stdout
    assert "re-fingerprinting events: 6 of 6 (done)" in rebuilt.stderr  # a log's progress, on stderr
    assert f"merged  {twin.id} -> {warn['id']}" in rebuilt.stdout
    assert "Jira CRASH-2 carried; 1 RCA(s) carried" in rebuilt.stdout

    moved = signature(client, triage, "old-gpf")
    assert moved["id"] == gpf["id"] and moved["fingerprint"] == gpf["fingerprint"]
    assert (moved["status"], moved["jira_key"], moved["event_count"]) == ("triaged", "CRASH-1", 1)

    merged = signature(client, triage, warn["fingerprint"])
    assert merged["id"] == warn["id"] and merged["event_count"] == 2
    assert (merged["status"], merged["jira_key"]) == ("triaged", "CRASH-2")
    assert signature(client, triage, "old-warning-b")["id"] == warn["id"]
    with database.session() as session:
        assert session.scalar(select(Rca.signature_id)) == int(warn["id"])

    kept = signature(client, triage, kasan["fingerprint"])
    assert kept["id"] == kasan["id"] and kept["event_count"] == 2
    split_off = signature(client, triage, kbug["fingerprint"])
    assert split_off["id"] not in (kasan["id"], kbug["id"]) and split_off["event_count"] == 1
    with database.session() as session:
        assert session.get_one(Signature, int(split_off["id"])).owner == "bo"
        versions = set(session.scalars(select(Event.algorithm_version)).all())
    assert versions == {ALGORITHM_VERSION}

    again = crashreg(db_url, "signatures", "rebuild")
    assert again.returncode == 0, again.stderr
    assert "moved: 0, merged: 0, split: 0, new: 0" in again.stdout
    assert "re-fingerprinted: 0" in again.stdout


def test_rebuild_keeps_a_title_set_by_hand_and_writes_the_engines_over_the_rest(
        db_url, client, database, make_token) -> None:
    """A triager's title (PATCH) survives the move a rebuild makes; a title the engine wrote is
    the new engine's. Before, the hand-set title went back to the engine's."""
    reporter, triage = make_token("report"), make_token("triage")
    named, plain = report(client, reporter, GPF)["signature"], report(client, reporter, WARNING)["signature"]
    patched = client.patch(f"/api/v1/signatures/{named['id']}", json={"title": "mlx5 RX ring GPF (ana)"},
                           headers=auth(triage))
    assert patched.status_code == 200, patched.text
    for old in (named, plain):
        with database.session() as session:  # as `age` does, but the title as it stands
            session.execute(update(Signature).where(Signature.id == int(old["id"]))
                            .values(fingerprint=f"old-{old['id']}", algorithm_version=0))
            session.execute(update(Event).where(Event.signature_id == int(old["id"]))
                            .values(fingerprint=f"old-{old['id']}", algorithm_version=0))
        with database.session() as session:
            session.execute(update(Signature).where(Signature.id == int(plain["id"])).values(title="old"))
    rebuilt = crashreg(db_url, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "moved: 2" in rebuilt.stdout, rebuilt.stdout
    assert signature(client, triage, named["id"])["title"] == "mlx5 RX ring GPF (ana)"
    assert signature(client, triage, plain["id"])["title"] == plain["title"]


def test_a_title_set_by_hand_goes_with_its_bug_into_the_signature_it_is_merged_into(
        db_url, client, database, make_token) -> None:
    """Symbols arriving a build-id at a time move one release's signature to the named
    fingerprint first; the next release's, holding the triager's title (the name Jira shows),
    is merged into it. Its status and owner were carried, its title lost."""
    reporter, triage = make_token("report"), make_token("triage")
    standing = report(client, reporter, WARNING)["signature"]
    events = [report(client, reporter, WARNING)["event_id"] for _ in range(2)]
    with database.session() as session:  # the other release's signature, under its old fingerprint
        twin = Signature(fingerprint="old-release-2", algorithm_version=0, title="old", kind="warning",
                         first_seen=session.get_one(Signature, int(standing["id"])).first_seen)
        session.add(twin)
        session.flush()
        session.execute(update(Event).where(Event.id.in_([int(e) for e in events]))
                        .values(signature_id=twin.id, fingerprint="old-release-2", algorithm_version=0))
    titled = client.patch(f"/api/v1/signatures/{twin.id}", json={"title": "Decoder crash (OPS-42)",
                                                                   "owner": "alice"}, headers=auth(triage))
    assert titled.status_code == 200, titled.text
    rebuilt = crashreg(db_url, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"merged  {twin.id} -> {standing['id']}" in rebuilt.stdout, rebuilt.stdout
    merged = signature(client, triage, standing["id"])
    assert (merged["title"], merged["owner"], merged["event_count"]) == ("Decoder crash (OPS-42)", "alice", 3)
    again = crashreg(db_url, "signatures", "rebuild")  # still a hand-set title: the engine's does not return
    assert again.returncode == 0
    assert signature(client, triage, standing["id"])["title"] == "Decoder crash (OPS-42)"


def test_a_fingerprint_an_alias_routes_stays_with_its_signature_on_rebuild(
        db_url, client, database, make_token) -> None:
    """Ingest sends a crash whose fingerprint is an alias to the aliased signature (a release
    with only a symbol table names its bug as the signature did before DWARF moved it); the
    rebuild split those crashes off into a signature of their own, honouring only merge rules."""
    from registry.signatures.merging import REBUILD, set_alias

    reporter, triage = make_token("report"), make_token("triage")
    named = report(client, reporter, GPF)["signature"]
    joined = report(client, reporter, WARNING)
    with database.session() as session:  # the WARNING crash joined by an alias, as ingest does
        set_alias(session, joined["signature"]["fingerprint"], int(named["id"]), REBUILD, "rebuild")
        session.execute(update(Event).where(Event.id == int(joined["event_id"]))
                        .values(signature_id=int(named["id"])))
        session.execute(delete(SignatureCounter).where(
            SignatureCounter.signature_id == int(joined["signature"]["id"])))
        session.execute(delete(Signature).where(Signature.id == int(joined["signature"]["id"])))
    for run in range(2):
        rebuilt = crashreg(db_url, "signatures", "rebuild")
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert "moved: 0, merged: 0, split: 0, new: 0" in rebuilt.stdout, (run, rebuilt.stdout)
    assert signature(client, triage, named["id"])["event_count"] == 2
    assert signature(client, triage, joined["signature"]["fingerprint"])["id"] == named["id"]


def test_rebuild_keeps_a_hand_merge_and_dry_run_changes_nothing(db_url, client, database,
                                                               make_token) -> None:
    reporter, triage = make_token("report"), make_token("triage")
    a = report(client, reporter, GPF)["signature"]
    b = report(client, reporter, WARNING)["signature"]
    client.post(f"/api/v1/signatures/{a['id']}/merge", json={"other": b["id"]}, headers=auth(triage))
    age(database, int(a["id"]), "old-a")

    dry = crashreg(db_url, "signatures", "rebuild", "--dry-run")
    assert dry.returncode == 0
    assert "dry run: the lines above say what a rebuild would do; nothing was written" in dry.stdout
    assert signature(client, triage, a["id"])["fingerprint"] == "old-a"

    done = crashreg(db_url, "signatures", "rebuild")
    assert done.returncode == 0, done.stderr
    both = signature(client, triage, a["id"])
    assert both["fingerprint"] == a["fingerprint"] and both["event_count"] == 2
    assert signature(client, triage, b["fingerprint"])["id"] == a["id"]
    assert report(client, reporter, WARNING)["signature"]["id"] == a["id"]


def test_rebuild_takes_in_what_live_ingest_did_meanwhile(db_url, client, database, make_token) -> None:
    """Ingest goes on while history is fingerprinted: an event stored meanwhile under a
    signature live ingest created with the new fingerprint is caught up and folded in, not
    collided with; while the changes apply, nobody else can create a signature."""
    reporter, triage = make_token("report"), make_token("triage")
    old = report(client, reporter, GPF)["signature"]
    with database.session() as session:
        session.add(JiraLink(signature_id=int(old["id"]), issue_key="CRASH-7"))
    age(database, int(old["id"]), "old-gpf")

    job = Rebuild(RebuildSummary(), wiring().signatures)
    with database.session() as session:
        assert job.fingerprint_history(session, lambda _: None) == 1
    live = report(client, reporter, GPF)  # the running registry fingerprints with the new engine
    assert live["known"] is False and live["signature"]["id"] != old["id"]

    with database.session() as session:
        job.session = session
        job.hold_signatures()
        with pytest.raises(OperationalError):
            create_signature_without_waiting(database, "another")
        job.fingerprint_history(session, lambda _: None)
        job.read_placement()
        job.apply()

    assert job.summary.events == 2 and job.summary.merged, job.summary.lines()
    survivor = signature(client, triage, "old-gpf")
    assert survivor["id"] == live["signature"]["id"] and survivor["event_count"] == 2
    assert (survivor["fingerprint"], survivor["jira_key"]) == (old["fingerprint"], "CRASH-7")
    with database.session() as session:
        assert set(session.scalars(select(Event.signature_id)).all()) == {int(survivor["id"])}
        assert session.get_one(Signature, int(old["id"])).merged_into_id == int(survivor["id"])
    assert report(client, reporter, GPF)["signature"]["id"] == survivor["id"]
    create_signature_without_waiting(database, "another")  # the rebuild is over: no wait now


class Stopped(Exception):
    """Stands for the process being killed in the middle of a rebuild."""


def test_a_rebuild_stopped_halfway_is_continued_by_the_next_and_ends_the_same(
        db_url, client, database, make_token) -> None:
    """Each chunk's fingerprints are written with it: stopped in its third chunk, the registry
    is as it was (nothing applied) but for two chunks' rows; the next rebuild fingerprints only
    the rest, applies the whole plan and leaves no rows behind."""
    reporter, triage = make_token("report"), make_token("triage")
    gpf = report(client, reporter, GPF)["signature"]
    warn = report(client, reporter, WARNING)["signature"]
    for body in (GPF, WARNING, GPF, WARNING):
        report(client, reporter, body)
    age(database, int(gpf["id"]), "old-gpf")
    age(database, int(warn["id"]), "old-warning")

    def stop_at(events: int) -> Any:
        done = [0]

        def progress(count: int) -> None:
            done[0] += count
            if done[0] >= events:
                raise Stopped
        return progress

    with pytest.raises(Stopped):
        rebuild(database, wiring().signatures, stop_at(5), chunk=2)
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(RebuildFingerprint)) == 4
    assert signature(client, triage, "old-gpf")["fingerprint"] == "old-gpf"  # nothing applied yet

    told: list[int] = []
    summary = rebuild(database, wiring().signatures, told.append, chunk=2)
    assert told[0] == 4 and summary.events == 2 and len(summary.moved) == 2, summary.lines()
    assert any(note.startswith("continued after event") for note in summary.notes)
    for old, new in ((gpf, "old-gpf"), (warn, "old-warning")):
        now = signature(client, triage, new)
        assert (now["id"], now["fingerprint"], now["event_count"]) == (old["id"], old["fingerprint"], 3)
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(RebuildFingerprint)) == 0
        assert set(session.scalars(select(Event.algorithm_version))) == {ALGORITHM_VERSION}
    again = rebuild(database, wiring().signatures, chunk=2)
    assert (again.events, again.refingerprinted, again.moved, again.notes) == (6, 0, [], [])


def create_signature_without_waiting(database: Any, fingerprint: str) -> None:
    """Another writer, on a connection of its own, that gives up at once if it must wait."""
    url = database.engine.url
    gives_up = {"timeout": 0} if url.get_backend_name() == "sqlite" else {"options": "-c lock_timeout=1ms"}
    engine = create_engine(url, poolclass=NullPool, connect_args=gives_up)
    try:
        with engine.begin() as connection:
            connection.execute(insert(Signature).values(
                fingerprint=fingerprint, algorithm_version=1, title="t", kind="warning",
                first_seen=datetime.now(UTC), status="new"))
    finally:
        engine.dispose()


def test_signature_command_prints_the_contract_json(db_url, tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text(GPF)
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    stack_report = tmp_path / "report.json"
    stack_report.write_text(json.dumps({"stack": {"signal": "SIGABRT", "frames": [
        {"function": "abort"}, {"function": "check_invariants", "module": "app"}]}}))
    done = crashreg(db_url, "signature", "--json", str(log), str(empty), str(stack_report))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    expected = analyse_console_log(GPF)
    assert {k: lines[0][k] for k in ("file", "fingerprint", "title", "kind", "function", "frames",
                                     "labels")} == {
        "file": str(log), "fingerprint": expected.fingerprint, "title": expected.title,
        "kind": "gpf", "function": "tcf_exts_destroy", "frames": expected.frames, "labels": []}
    assert lines[1]["fingerprint"] is None and lines[1]["file"] == str(empty)
    assert (lines[2]["kind"], lines[2]["function"]) == ("userspace", "check_invariants")
    missing = crashreg(db_url, "signature", str(tmp_path / "nope.log"))
    assert missing.returncode == 2
