"""An upgrade of the engine (ALGORITHM_VERSION raised), as an operator runs it: history
fingerprinted by an older engine, then `crashreg signatures rebuild` (a real process) on SQLite
and PostgreSQL. Old fingerprints become aliases; Jira link, RCA, captures and counts follow;
every event gets the current engine's explanation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update

from registry.capture.models import Capture, CaptureSlot
from registry.core.events import Event
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature, SignatureCounter
from registry.fingerprint import ALGORITHM_VERSION, analyse_console_log
from registry.rca.models import Rca
from registry.signatures.merging import recount
from testkit.reports import crash_report
from tests.support import DATA
from tests.support.cli import crashreg
from tests.support.http import auth

FIXTURES = DATA / "agents"
MLX5 = (FIXTURES / "mlx5_null_deref.log").read_text()
EXT4 = (FIXTURES / "ext4_bug_on.log").read_text()


def crash(client: Any, reporter: str, console_log: str, capture_bytes: int) -> dict[str, Any]:
    """A crash reported, then its full dump recorded (what the reporters do)."""
    answer = client.post("/api/v1/reports", json=crash_report(console_log=console_log),
                         headers=auth(reporter)).json
    capture = {"method": "makedumpfile", "status": "completed", "dump_level": 0, "bytes": capture_bytes,
               "downtime_s": 60.0, "capture_key": f"{answer['event_id']}-makedumpfile"}
    recorded = client.post(f"/api/v1/events/{answer['event_id']}/captures", json=capture,
                           headers=auth(reporter))
    assert recorded.status_code == 201, recorded.json
    return answer


def as_an_older_engine_left_it(database: Any, keep: int, lumped: int) -> None:
    """What an engine of version 0 stored: one signature `old-mlx5` for both bugs (the ext4
    crash lumped in), fingerprints and versions of then, no explanations; triaged, with a
    Jira issue and an RCA."""
    with database.session() as session:
        session.execute(update(Capture).where(Capture.signature_id == lumped).values(signature_id=keep))
        taken = len(session.scalars(select(CaptureSlot.slot).where(CaptureSlot.signature_id == keep)).all())
        session.execute(update(CaptureSlot).where(CaptureSlot.signature_id == lumped)
                        .values(signature_id=keep, slot=CaptureSlot.slot + taken))
        session.execute(update(Event).where(Event.signature_id == lumped).values(signature_id=keep))
        session.execute(delete(SignatureCounter).where(SignatureCounter.signature_id == lumped))
        session.execute(delete(Signature).where(Signature.id == lumped))
        session.execute(update(Signature).where(Signature.id == keep).values(
            fingerprint="old-mlx5", algorithm_version=0, title="old title", status="triaged"))
        session.execute(update(Event).values(fingerprint="old-mlx5", algorithm_version=0, explanation=None))
        session.add(JiraLink(signature_id=keep, issue_key="CRASH-7"))
        session.add(Rca(signature_id=keep, summary="mlx5 rx ring", body="...", author="ana",
                        author_kind="human", token_name="t", checks_passed=True))
        recount(session, [keep])


def savings(client: Any, reader: str, signature_id: str) -> dict[str, Any]:
    answer = client.get(f"/api/v1/captures/savings?signature={signature_id}", headers=auth(reader)).json
    [row] = answer["signatures"]
    return row


def test_rebuild_after_an_engine_upgrade_carries_history_and_fills_explanations(
    db_url, client, database, make_token
) -> None:
    reporter, reader = make_token("report"), make_token("read")
    first = crash(client, reporter, MLX5, 1000)
    crash(client, reporter, MLX5, 3000)
    ext4 = crash(client, reporter, EXT4, 5000)
    mlx5_id, ext4_id = first["signature"]["id"], ext4["signature"]["id"]
    assert mlx5_id != ext4_id
    as_an_older_engine_left_it(database, int(mlx5_id), int(ext4_id))
    old = client.get("/api/v1/signatures/old-mlx5", headers=auth(reader)).json
    assert (old["id"], old["event_count"]) == (mlx5_id, 3)
    assert savings(client, reader, mlx5_id)["full_captures"] == 3

    dry = crashreg(db_url, "signatures", "rebuild", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "moved: 1, merged: 0, split: 1, new: 0" in dry.stdout and "explanations written: 3" in dry.stdout
    with database.session() as session:
        assert session.scalars(select(Event.explanation)).all() == [None] * 3
        assert session.get_one(Signature, int(mlx5_id)).fingerprint == "old-mlx5"

    done = crashreg(db_url, "signatures", "rebuild")
    assert done.returncode == 0, done.stderr
    assert "moved: 1, merged: 0, split: 1, new: 0" in done.stdout, done.stdout

    # The old fingerprint is an alias: links, RCAs and searches by it reach the same row.
    moved = client.get("/api/v1/signatures/old-mlx5", headers=auth(reader)).json
    assert moved["id"] == mlx5_id and moved["fingerprint"] == analyse_console_log(MLX5).fingerprint
    assert (moved["status"], moved["jira_key"], moved["event_count"]) == ("triaged", "CRASH-7", 2)
    split_off = client.get(f"/api/v1/signatures/{analyse_console_log(EXT4).fingerprint}",
                           headers=auth(reader)).json
    assert split_off["id"] != mlx5_id  # (SQLite may reuse the deleted row's id)
    assert (split_off["status"], split_off["event_count"]) == ("triaged", 1)
    # Captures follow their events: savings and the dedup counts read them by signature.
    assert (savings(client, reader, mlx5_id)["full_captures"],
            savings(client, reader, mlx5_id)["median_full_capture_bytes"]) == (2, 2000)
    assert savings(client, reader, split_off["id"])["full_captures"] == 1
    with database.session() as session:
        assert session.scalar(select(Rca.signature_id)) == int(mlx5_id)
        events = session.execute(select(Event.id, Event.signature_id, Event.algorithm_version,
                                        Event.explanation)).all()
        stranded = session.scalars(select(Capture.id).join(Event, Event.id == Capture.event_id)
                                   .where(Capture.signature_id != Event.signature_id)).all()
    assert stranded == []
    assert {version for _, _, version, _ in events} == {ALGORITHM_VERSION}
    expected = {int(mlx5_id): analyse_console_log(MLX5).explanation,
                int(split_off["id"]): analyse_console_log(EXT4).explanation}
    assert all(explanation == expected[sid] for _, sid, _, explanation in events)
    event = client.get(f"/api/v1/events/{first['event_id']}", headers=auth(reader)).json
    assert event["explanation"] == expected[int(mlx5_id)]
    # Capture slots follow their events too: mlx5 has used 2 of its K = 3 full dumps, the
    # split-off ext4 bug 1, so the next crash of each is a full dump (not a skip for mlx5).
    with database.session() as session:
        held = session.execute(select(CaptureSlot.signature_id, CaptureSlot.slot, Event.signature_id)
                               .join(Event, Event.id == CaptureSlot.event_id)).all()
    assert sorted((sid, number) for sid, number, _ in held) == sorted(
        [(int(mlx5_id), 1), (int(mlx5_id), 2), (int(split_off["id"]), 1)])
    assert all(sid == event_sid for sid, _, event_sid in held)
    for log in (MLX5, EXT4):
        again_answer = client.post("/api/v1/reports", json=crash_report(console_log=log),
                                   headers=auth(reporter)).json
        assert again_answer["capture"]["action"] == "full", again_answer
    # Reporters not yet redeployed still send old fingerprints: the bundle routes them.
    bundle = client.get("/api/v1/policy-bundle", headers=auth(reader)).json
    assert {e["fingerprint"]: e["signature_id"] for e in bundle["entries"]}["old-mlx5"] == mlx5_id

    again = crashreg(db_url, "signatures", "rebuild")
    assert again.returncode == 0, again.stderr
    assert "moved: 0, merged: 0, split: 0, new: 0" in again.stdout
    assert "re-fingerprinted: 0" in again.stdout and "explanations written: 0" in again.stdout
