"""A host's `pstore_first_crash_at` (migration 0041): the newest crash a pstore record without
the crashed boot's boot_id opened an event for, kept by a trigger on `events` and given by the
migration to the hosts that had such events before it. Ingest's one-statement write reads it
instead of `events` (tests/registry/ingest/test_last_read.py shows both sides of that)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from registry.core.hosts import Host
from registry.migrate import downgrade, upgrade
from testkit.reports import crash_report
from tests.support.capture import report

BEFORE = "0040_dump_encodings"


def marks(database: Any) -> dict[str, datetime | None]:
    with database.session() as session:
        rows = session.execute(select(Host.hostname, Host.pstore_first_crash_at)).all()
    return {hostname: at.astimezone(UTC) if at else None for hostname, at in rows}


def at(time: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-29T{time}+00:00")


def record(client: Any, token: str, hostname: str, time: str, **fields: Any) -> dict[str, Any]:
    host = {"hostname": hostname}
    return report(client, token, crash_report(source="pstore", boot_id=None, host=host,
                                              crashed_at=f"2026-11-29T{time}Z") | fields)


def test_the_newest_crash_a_record_opened_marks_its_host_and_the_migration_finds_it(
    client, database, db_url: str, make_token
) -> None:
    token = make_token("report")
    report(client, token, crash_report(host={"hostname": "kdump-only"}))
    # A record that names its boot joins or opens the event of that boot like any report.
    record(client, token, "booted", "12:00:00", boot_id="boot-known")
    record(client, token, "records", "12:00:00")
    assert marks(database) == {"kdump-only": None, "booted": None, "records": at("12:00:00")}
    record(client, token, "records", "09:00:00")  # an older crash's record, read late
    assert marks(database)["records"] == at("12:00:00")
    record(client, token, "records", "15:30:00")
    assert marks(database)["records"] == at("15:30:00")
    # A registry of before the migration: the hosts with such events get the newest.
    database.dispose()
    downgrade(db_url, BEFORE)
    upgrade(db_url)
    assert marks(database) == {"kdump-only": None, "booted": None, "records": at("15:30:00")}
    record(client, token, "booted", "16:00:00")  # the trigger is back
    assert marks(database)["booted"] == at("16:00:00")
