"""Retention's gc against the real stores (a local directory; moto's S3 server) on both
databases: it keeps exactly what the policy promises, and an interrupted run is finished by
the next without touching what is kept."""

from __future__ import annotations

import shutil
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from registry.core.events import Event, Report
from registry.core.signatures import Signature
from registry.db import utcnow
from registry.rca.models import Rca
from registry.rca.service import hold_cited_dumps
from registry.retention.gc import collect, mark
from registry.retention.models import ConsoleTrim
from registry.signatures.identify import identify
from registry.storage.models import Dump
from testkit.pages import login
from testkit.reports import crash_report
from tests.support.capture import bug_log, post_capture, report
from tests.support.http import auth
from tests.support.retention import LATER, Fleet


def cited_rca(signature_id: int, *evidence: dict[str, str], status: str = "proposed") -> Rca:
    """A human's RCA of the signature citing `evidence` (checked, as review would leave it)."""
    return Rca(signature_id=signature_id, status=status, summary="s", body="b", author="bob",
               author_kind="human", evidence=list(evidence), token_name="t", checks=[], checks_passed=True)


def test_keeps_the_k_exemplars_pins_and_open_rca_evidence_and_deletes_the_rest(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    fleet = Fleet(client, make_token, database, store)
    exemplars = fleet.crash("retained_bug", 3)  # slot holders
    extra = fleet.crash("retained_bug", 4)  # "N more": no slots, newer than the exemplars
    assert fleet.pin(extra[0]).status_code == 201
    with database.session() as session:
        signature_id = int(fleet.signature_id)
        session.add(cited_rca(signature_id, {"type": "capture", "capture_id": extra[1]}))
        session.add(cited_rca(signature_id, {"type": "capture", "capture_id": extra[2]}, status="rejected"))
    later = utcnow() + LATER

    dry = collect(database, store, gc_settings, dry_run=True, now=later)
    assert (dry.dumps_deleted, dry.bytes_freed) == (2, 2000)
    assert set(fleet.states().values()) == {"stored"} and fleet.present() == set(fleet.captures)

    outcome = collect(database, store, gc_settings, now=later)
    assert (outcome.dumps_deleted, outcome.bytes_freed) == (2, 2000)
    assert outcome.kept_by_rule == {"exemplar": 3, "pinned": 1, "rca": 1}
    gone = {extra[2], extra[3]}  # the rejected RCA's evidence protects nothing
    assert fleet.states() == {c: "deleted" if c in gone else "stored" for c in fleet.captures}
    assert fleet.present() == set(fleet.captures) - gone
    assert set(exemplars) <= fleet.present()
    again = collect(database, store, gc_settings, now=later)  # idempotent
    assert (again.dumps_deleted, again.bytes_freed) == (0, 0)
    assert fleet.pin(extra[3]).status_code == 409  # a deleted dump cannot be pinned back


def test_a_resolved_signature_loses_its_dumps_after_the_grace_unless_it_regresses(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    fleet = Fleet(client, make_token, database, store)
    captures = fleet.crash("fixed_bug", 3)
    assert fleet.pin(captures[0]).status_code == 201
    resolved_at = utcnow()
    grace = timedelta(days=gc_settings.retention.resolved_grace_days)

    def resolve(status: str) -> None:
        with database.session() as session:
            session.execute(
                update(Signature)
                .where(Signature.id == int(fleet.signature_id))
                .values(status=status, resolved_at=resolved_at)
            )

    resolve("resolved")
    assert (
        collect(database, store, gc_settings, now=resolved_at + grace - timedelta(minutes=1)).dumps_deleted
        == 0
    )
    resolve("regressed")
    assert collect(database, store, gc_settings, now=resolved_at + grace + LATER).dumps_deleted == 0
    resolve("resolved")
    outcome = collect(database, store, gc_settings, now=resolved_at + grace)
    assert outcome.dumps_deleted == 2 and outcome.kept_by_rule == {"pinned": 1}
    assert fleet.present() == {captures[0]}


def test_an_interrupted_gc_is_finished_by_the_next_run_without_touching_what_is_kept(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    """The local store's disk refuses one deletion (a directory where the object's file was):
    the run dies after deleting some objects and before recording them. The next run, the disk
    repaired, deletes what is left, records every one (no error on objects already gone), and
    restores nothing it should not; a dump pinned while marked is refused, not lost."""
    fleet = Fleet(client, make_token, database, store)
    exemplars = fleet.crash("busy_bug", 3)
    doomed = fleet.crash("busy_bug", 6)
    with database.session() as session:
        keys = dict(session.execute(select(Dump.capture_id, Dump.key)).all())
    blocked = store.root / keys[int(doomed[3])]  # type: ignore[attr-defined]
    blocked.unlink()
    (blocked / "in-use").mkdir(parents=True)  # unlink() on it fails: IsADirectoryError
    later = utcnow() + LATER
    with pytest.raises(IsADirectoryError):
        collect(database, store, gc_settings, now=later)
    states = fleet.states()
    assert {states[c] for c in doomed} == {"deleting"} and {states[c] for c in exemplars} == {"stored"}
    assert fleet.present() == set(exemplars) | set(doomed[4:])  # the first three went, then it stopped
    assert fleet.pin(doomed[5]).status_code == 409  # marked: retention is deleting it

    shutil.rmtree(blocked)
    outcome = collect(database, store, gc_settings, now=later)
    assert outcome.dumps_deleted == 6 and outcome.bytes_freed == 6000
    assert fleet.states() == {c: "stored" if c in exemplars else "deleted" for c in fleet.captures}
    assert fleet.present() == set(exemplars)


def test_a_marked_dump_the_policy_keeps_again_goes_back_to_stored(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    """Killed after marking a resolved signature's dumps; the signature regresses before the
    rerun: the dumps still in the store are exemplars again and stay."""
    fleet = Fleet(client, make_token, database, store)
    captures = fleet.crash("back_bug", 3)
    with database.session() as session:
        session.execute(update(Dump).values(state="deleting"))
        session.execute(
            update(Signature)
            .where(Signature.id == int(fleet.signature_id))
            .values(status="regressed", resolved_at=utcnow())
        )
        key = session.scalar(select(Dump.key).where(Dump.capture_id == int(captures[0])))
    store.delete(key)  # this one went before the kill
    outcome = collect(database, store, gc_settings, now=utcnow() + LATER)
    assert (outcome.dumps_restored, outcome.dumps_deleted) == (2, 1)
    assert fleet.states() == {captures[0]: "deleted", captures[1]: "stored", captures[2]: "stored"}
    assert fleet.present() == set(captures[1:])


def test_a_pin_and_an_rca_made_while_the_gc_runs_keep_their_dumps(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    """The gc plans, then marks and deletes a dump per batch: a pin and an RCA made after the
    plan (here, after its first deletion) are read again by the mark, and their dumps stay."""
    fleet = Fleet(client, make_token, database, store)
    fleet.crash("raced_bug", 3)
    extra = fleet.crash("raced_bug", 4)
    made: list[int] = []

    def protect_two(line: str) -> None:
        if not made:
            made.append(fleet.propose_rca(extra[1], by_event=True).status_code)
            made.append(fleet.pin(extra[2]).status_code)

    outcome = collect(database, store, gc_settings, now=utcnow() + LATER, progress=protect_two, batch=1)
    assert made == [201, 201] and outcome.dumps_deleted == 2
    states = fleet.states()
    assert [states[c] for c in extra] == ["deleted", "stored", "stored", "deleted"]
    assert fleet.present() >= {extra[1], extra[2]}


def lock_waiters(database) -> int:  # type: ignore[no-untyped-def]
    with database.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM pg_locks WHERE NOT granted").scalar() or 0)


def test_the_gcs_mark_waits_for_an_rca_holding_the_dump_and_then_keeps_it(
    client, make_token, database, store
) -> None:  # type: ignore[no-untyped-def]
    """An RCA's transaction holds its cited dump's row while the gc marks it: the mark waits
    (PostgreSQL: it is seen waiting on the row lock; SQLite: one writer at a time), reads the
    RCA once it committed, and leaves the dump stored. The other order (the mark first) is the
    RCA's 409 (test_an_rca_citing_a_dump_being_deleted_is_refused)."""
    fleet = Fleet(client, make_token, database, store)
    [capture] = fleet.crash("held_bug", 1)
    with database.session() as session:
        dump_id = session.scalar(select(Dump.id).where(Dump.capture_id == int(capture)))
    marked: list[object] = []
    waiting = threading.Thread(target=lambda: marked.append(mark(database, [dump_id])))
    with database.session() as session:
        evidence = [{"type": "capture", "capture_id": capture}]
        hold_cited_dumps(session, evidence)
        rca = cited_rca(int(fleet.signature_id), *evidence)
        session.add(rca)
        session.flush()
        waiting.start()
        if database.engine.dialect.name == "postgresql":
            deadline = time.monotonic() + 60
            while lock_waiters(database) == 0:
                assert time.monotonic() < deadline, "the mark never waited for the RCA's lock"
                time.sleep(0.01)
    waiting.join(timeout=60)
    assert marked == [[]]
    assert fleet.states() == {capture: "stored"}


def test_an_rca_citing_a_dump_being_deleted_is_refused_and_one_citing_a_deleted_dump_is_not(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    fleet = Fleet(client, make_token, database, store)
    fleet.crash("going_bug", 3)
    [going] = fleet.crash("going_bug", 1)
    with database.session() as session:
        dump_id = session.scalar(select(Dump.id).where(Dump.capture_id == int(going)))
    assert len(mark(database, [dump_id])) == 1  # a gc run marked it, then stopped
    for by_event in (False, True):
        refused = fleet.propose_rca(going, by_event=by_event)
        assert refused.status_code == 409, refused.json
        assert refused.json["error"]["fields"]["evidence"] == [
            f"capture {going}: dump being deleted by retention"
        ]
    assert collect(database, store, gc_settings, now=utcnow() + LATER).dumps_deleted == 1
    assert fleet.propose_rca(going).status_code == 201  # history now: nothing for it to keep


BOOT = "".join(
    f"[    {i / 1000:.6f}] pci 0000:{i % 256:02x}:00.0: reg 0x10: [mem 0x{i:08x}]\n" for i in range(2000)
)


def test_old_console_logs_keep_the_crash_report_unless_exemplar_pinned_or_cited(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    reporter, triage = make_token("report"), make_token("triage")
    events = []
    for _ in range(7):  # the first 3 take the capture slots: the exemplars
        body = crash_report(console_log=BOOT + bug_log("chatty_bug"), host={"hostname": f"h-{len(events)}"})
        events.append(report(client, reporter, body)["event_id"])
    pinned_capture = post_capture(client, reporter, events[3], status="failed").json["id"]
    assert client.put(f"/api/v1/captures/{pinned_capture}/pin", headers=auth(triage)).status_code == 201
    with database.session() as session:
        signature_id = session.scalar(select(Event.signature_id).where(Event.id == int(events[4])))
        session.add(cited_rca(signature_id, {"type": "event", "event_id": events[4]}))

    def logs() -> dict[str, str]:
        with database.session() as session:
            return {str(e): log for e, log in session.execute(select(Report.event_id, Report.console_log))}

    whole = logs()
    later = utcnow() + timedelta(days=gc_settings.retention.log_days, minutes=1)
    dry = collect(database, store, gc_settings, dry_run=True, now=later)
    assert dry.logs_trimmed == 2 and logs() == whole
    recent = collect(
        database, store, gc_settings, now=utcnow() + timedelta(days=gc_settings.retention.log_days - 1)
    )
    assert recent.logs_trimmed == 0 and logs() == whole

    outcome = collect(database, store, gc_settings, now=later)
    assert outcome.logs_trimmed == 2 and outcome.logs_kept_by_rule == {
        "exemplar": 3,
        "dump-kept": 1,
        "rca": 1,
    }
    after = logs()
    assert {e for e in events if after[e] != whole[e]} == {events[5], events[6]}
    assert outcome.log_bytes_freed == sum(len(whole[e]) - len(after[e]) for e in events[5:])
    with database.session() as session:
        fingerprints = dict(session.execute(select(Event.id, Event.fingerprint)).all())
        trims = {str(t.event_id): t for t in session.scalars(select(ConsoleTrim))}
    for event in events[5:]:
        assert after[event].endswith(bug_log("chatty_bug")) and len(after[event]) < len(whole[event]) / 10
        assert identify(after[event], None).fingerprint == fingerprints[int(event)]  # type: ignore[union-attr]
        assert (trims[event].first_line, trims[event].total_lines) == (2000 - 8 + 1, 2004)
    login(client, make_token("read"))
    page = client.get(f"/events/{events[5]}").get_data(as_text=True)
    assert "BUG: unable to handle page fault in chatty_bug" in page  # the excerpt still shows the oops
    again = collect(database, store, gc_settings, now=later + LATER)
    assert again.logs_trimmed == 0 and logs() == after


class Killed(Exception):
    """Stands for the process being killed where the gc says how far it got."""


def test_a_gc_killed_halfway_through_the_logs_is_finished_by_the_next_run_with_the_same_result(
    client, make_token, database, store, gc_settings
) -> None:  # type: ignore[no-untyped-def]
    """Logs are read a range of report ids at a time (memory stays flat over years of history),
    each range trimmed before the next is read. Killed after the first ranges, the registry
    holds whole logs and trimmed ones, each trimmed one recorded; the next run passes over them
    and ends where an uninterrupted run ends: every old log trimmed once, the exemplars whole."""
    reporter = make_token("report")
    events = [report(client, reporter, crash_report(console_log=BOOT + bug_log("long_bug"),
                                                    host={"hostname": f"h-{n}"}))["event_id"]
              for n in range(9)]  # the first 3 take the capture slots: the exemplars

    def trimmed() -> dict[str, int]:
        with database.session() as session:
            return {str(e): n for e, n in session.execute(
                select(ConsoleTrim.event_id, func.count()).group_by(ConsoleTrim.event_id))}

    later = utcnow() + timedelta(days=gc_settings.retention.log_days, minutes=1)
    lines: list[str] = []

    def killed_after_two_ranges(line: str) -> None:
        lines.append(line)
        if sum(line.startswith("console logs:") for line in lines) == 2:
            raise Killed

    with pytest.raises(Killed):
        collect(database, store, gc_settings, now=later, progress=killed_after_two_ranges, log_range=2)
    halfway = trimmed()
    assert 0 < len(halfway) < 6 and set(halfway) <= set(events[3:])
    assert lines[-1].startswith("console logs: reports up to id")

    rest = collect(database, store, gc_settings, now=later, log_range=2)
    assert trimmed() == {event: 1 for event in events[3:]}  # each old log trimmed once
    assert rest.logs_trimmed == 6 - len(halfway) and rest.logs_kept_by_rule == {"exemplar": 3}
    again = collect(database, store, gc_settings, now=later, log_range=2)
    assert again.logs_trimmed == 0 and trimmed() == {event: 1 for event in events[3:]}
