"""`crashreg storage gc --dry-run` names each dump it would delete (dump, capture, event,
signature, size, rule, key; with --json the rule's reason too) and changes nothing. Local
store, both databases."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import select, update

from registry.capture.models import Capture
from registry.cli import main
from registry.cli_support import CliContext
from registry.config import DumpStoreSettings, Settings
from registry.core.signatures import Signature
from registry.db import Database, utcnow
from registry.storage.models import Dump
from registry.storage.store import open_store
from tests.support.retention import Fleet


def listed(database: Database, captures: list[str], rule: str) -> list[dict[str, object]]:
    """What the dry run must say of these captures' dumps."""
    query = (
        select(Dump.id, Dump.capture_id, Capture.event_id, Capture.signature_id, Dump.key, Dump.bytes)
        .join(Capture, Capture.id == Dump.capture_id)
        .where(Dump.capture_id.in_([int(c) for c in captures]))
    )
    with database.session() as session:
        return [
            {"dump_id": row.id, "capture_id": row.capture_id, "event_id": row.event_id,
             "signature_id": row.signature_id, "key": row.key, "bytes": row.bytes, "state": "stored",
             "rule": rule}
            for row in session.execute(query)
        ]


def test_the_dry_run_lists_each_dump_it_would_delete_with_its_rule(
    client, make_token, database: Database, settings: Settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    aged = replace(
        settings,
        dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")),
        retention=replace(settings.retention, dump_days=0, resolved_grace_days=1),
    )
    fleet = Fleet(client, make_token, database, open_store(aged.dump_store, aged.public_url))
    exemplars = fleet.crash("listed_bug", 3)
    extra = fleet.crash("listed_bug", 2)  # "N more": past the dump age of 0 days
    fixed = fleet.crash("fixed_listed_bug", 2)  # resolved two days ago, past its grace
    with database.session() as session:
        session.execute(update(Signature).where(Signature.id == int(fleet.signature_id))
                        .values(status="resolved", resolved_at=utcnow() - timedelta(days=2)))
    expected = sorted(listed(database, extra, "expired") + listed(database, fixed, "resolved"),
                      key=lambda dump: dump["dump_id"])

    runner = CliRunner()
    dry = runner.invoke(main, ["storage", "gc", "--dry-run"], obj=CliContext(aged))
    assert dry.exit_code == 0, dry.output
    heading, *rows, dumps_line, _logs_line, _symbols_line = dry.stdout.splitlines()
    assert heading.split() == ["DUMP", "CAPTURE", "EVENT", "SIGNATURE", "BYTES", "RULE", "KEY"]
    columns = ("dump_id", "capture_id", "event_id", "signature_id", "bytes", "rule", "key")
    assert [row.split() for row in rows] == [[str(d[name]) for name in columns] for d in expected]
    assert dumps_line.startswith("dumps: would delete 4 (4000 bytes), restored 0, kept by rule: exemplar 3")

    as_json = runner.invoke(main, ["storage", "gc", "--dry-run", "--json"], obj=CliContext(aged))
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert [{k: v for k, v in d.items() if k != "reason"} for d in answer["dumps"]] == expected
    reasons = {d["rule"]: d["reason"] for d in answer["dumps"]}
    assert reasons["expired"] == "not an exemplar and older than 0 days"
    assert reasons["resolved"].startswith("signature resolved ")
    assert reasons["resolved"].endswith("its 1-day grace is over")
    assert answer["dry_run"] is True
    assert answer["summary"]["dumps_deleted"] == 4 and answer["summary"]["kept_by_rule"] == {"exemplar": 3}

    assert set(fleet.states().values()) == {"stored"}  # a dry run changes nothing
    assert fleet.present() == set(exemplars + extra + fixed)
