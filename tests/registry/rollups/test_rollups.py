"""The rollups equal a scan of every event after each kind of change that touches events:
ingest, a live host's repeats, a merge, `crashreg signatures rebuild` (moves, merges, splits),
deletions, the backfill over an existing registry, and a change whose transaction commits
after a later one; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import delete, select, text, update

from registry.core.events import Event
from registry.core.signatures import Signature, SignatureCounter
from registry.db import Database
from registry.rollups.fold import fold, rebuild
from tests.support.cli import crashreg
from tests.support.http import auth
from tests.support.rollups import GPF, assert_exact, ingest_some, queued, scanned, stored
from tests.support.signatures import report


def test_ingest_counts_every_event_once(database: Database, client: Any, make_token: Any) -> None:
    answers = ingest_some(client, make_token("report"))
    with database.session() as session:
        assert queued(session) >= len(answers)  # ingest appended; nothing folded yet
    assert_exact(database)
    with database.session() as session:
        rows = stored(session)
    gpf = int(answers["gpf"]["signature"]["id"])
    assert sum(v[0] for k, v in rows["signature_daily"].items() if k[0] == gpf) == 2
    assert sum(v[1] for k, v in rows["signature_daily"].items() if k[0] == gpf) == 2  # two hosts
    assert_exact(database)  # folding an empty queue changes nothing


def test_updates_and_deletions_count_out_what_they_counted_in(
    database: Database, client: Any, make_token: Any
) -> None:
    answers = ingest_some(client, make_token("report"))
    assert_exact(database)
    with database.session() as session:
        session.execute(update(Event).where(Event.id == int(answers["warning"]["event_id"]))
                        .values(repeats=Event.repeats + 41, region="ap-3"))
        session.execute(update(Event).where(Event.id == int(answers["gpf"]["event_id"]))
                        .values(regression="regressed", capture_action="skip"))
        session.execute(update(Event).values(title="retitled"))  # counts nothing: queues nothing
        # each changed event counted out as it was, and in as it is
        assert queued(session, ("rollup_changes",)) == 4
    assert_exact(database)
    with database.session() as session:  # what retention deletes, and an event's signature gone
        session.execute(delete(Event).where(Event.id.in_(
            [int(answers["gpf2"]["event_id"]), int(answers["kbug"]["event_id"])])))
    assert_exact(database)


def test_merge_and_rebuild_move_the_counts(db_url: str, database: Database, client: Any,
                                           make_token: Any) -> None:
    reporter, triage = make_token("report"), make_token("triage")
    answers = ingest_some(client, reporter)
    assert_exact(database)
    gpf, warning = int(answers["gpf"]["signature"]["id"]), int(answers["warning"]["signature"]["id"])
    merged = client.post(f"/api/v1/signatures/{gpf}/merge", json={"other": str(warning)},
                         headers=auth(triage))
    assert merged.status_code == 200, merged.json
    assert_exact(database)

    kasan, kbug = int(answers["kasan"]["signature"]["id"]), int(answers["kbug"]["signature"]["id"])
    with database.session() as session:  # as an older engine had it: the kernel BUG under KASAN's
        session.execute(update(Event).where(Event.signature_id == kbug).values(signature_id=kasan))
        session.execute(delete(SignatureCounter).where(SignatureCounter.signature_id == kbug))
        session.execute(delete(Signature).where(Signature.id == kbug))
        session.execute(update(Signature).where(Signature.id == kasan)
                        .values(fingerprint="old-kasan", algorithm_version=0))
        session.execute(update(Event).where(Event.signature_id == kasan)
                        .values(fingerprint="old-kasan", algorithm_version=0))
    assert_exact(database)
    rebuilt = crashreg(db_url, "signatures", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "split: 1" in rebuilt.stdout, rebuilt.stdout
    assert_exact(database)


def test_the_backfill_builds_from_events_and_keeps_what_is_queued_once(
    database: Database, client: Any, make_token: Any
) -> None:
    """As after the migration on a registry with events: the rollups empty and a backfill due;
    changes queued before the build are in its snapshot and are not counted again."""
    reporter = make_token("report")
    ingest_some(client, reporter)
    with database.session() as session:
        for table in ("rollup_breakdown_daily", "rollup_signature_host_daily", "rollup_signature_daily",
                      "rollup_signature_sources"):
            session.execute(text(f"DELETE FROM {table}"))
        session.execute(text("INSERT INTO rollup_backfills (requested_at) VALUES (CURRENT_TIMESTAMP)"))
        assert queued(session) >= 6
    outcome = fold(database)
    assert outcome.rebuilt and outcome.changes == 0
    with database.session() as session:
        assert stored(session) == scanned(session)
        assert session.execute(text("SELECT COUNT(*) FROM rollup_backfills")).scalar_one() == 0
    report(client, reporter, GPF, hostname="node-z")
    assert_exact(database)
    rebuild(database)  # the repair command: the same counts while every event is still there
    with database.session() as session:
        assert queued(session) == 0 and stored(session) == scanned(session)


@pytest.mark.parametrize("group", ["captures", "fleet"])
def test_a_build_of_some_rollups_folds_the_changes_the_others_have_queued(
    group: str, database: Database, client: Any, make_token: Any
) -> None:
    """A backfill of one group of rollups (after the migration that made them) counts its own
    queued changes by its build, but folds every change that feeds a rollup it does not build
    (the events' changes feed the events' rollups and the fleet's)."""
    reporter = make_token("report")
    ingest_some(client, reporter)
    with database.session() as session:
        session.execute(text("INSERT INTO rollup_backfills (requested_at, rollups) "
                             "VALUES (CURRENT_TIMESTAMP, :group)"), {"group": group})
        assert queued(session) >= 6
    assert fold(database).rebuilt
    with database.session() as session:
        assert queued(session) == 0 and stored(session) == scanned(session)


def copy_event(session: Any, event_id: int, boot_key: str) -> None:
    source = session.get_one(Event, event_id)
    columns = {c.key: getattr(source, c.key) for c in Event.__table__.columns
               if c.key not in ("id", "boot_key")}
    session.add(Event(**columns, boot_key=boot_key))
    session.flush()


def test_a_change_committed_after_a_later_one_is_not_lost(
    db_url: str, database: Database, client: Any, make_token: Any
) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite's writers take turns: no transaction commits around another")
    event_id = int(report(client, make_token("report"), GPF, hostname="node-a")["event_id"])
    assert_exact(database)
    early = database.sessions()
    try:
        copy_event(early, event_id, "early")  # queued first (the lower id), committed last
        with database.session() as later:
            copy_event(later, event_id, "later")
        fold(database)
        with database.session() as session:
            assert session.scalar(select(Event.id).where(Event.boot_key == "early")) is None
        early.commit()
    finally:
        early.close()
    assert_exact(database)


def test_the_commands_fold_and_rebuild(db_url: str, database: Database, client: Any, make_token: Any) -> None:
    ingest_some(client, make_token("report"))
    folded = crashreg(db_url, "rollups", "fold")
    assert folded.returncode == 0, folded.stderr
    assert folded.stdout.startswith("folded ") and "changes" in folded.stdout, folded.stdout
    with database.session() as session:
        assert queued(session) == 0 and stored(session) == scanned(session)
        session.execute(text("DELETE FROM rollup_signature_sources"))  # damage, for the repair
    refused = crashreg(db_url, "rollups", "rebuild")  # asks first: no answer, nothing done
    assert refused.returncode != 0
    rebuilt = crashreg(db_url, "rollups", "rebuild", "--yes")
    assert rebuilt.returncode == 0 and "rollups rebuilt from events" in rebuilt.stdout, rebuilt.stderr
    with database.session() as session:
        assert stored(session) == scanned(session)
