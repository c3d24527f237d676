"""What one report costs the database: statements and pool checkouts, on each database.

The storm's latency is the CPU a report costs (bench/storm.py, docs/scaling.md), and every
statement is a round trip with its share of it: these counts may go down, never up unnoticed.
"""

from __future__ import annotations

from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.statements import counted

# Statements of one report, the caller's token included; SQLite's BEGIN IMMEDIATE is one of
# them (PostgreSQL's BEGIN and every COMMIT are the driver's own, not statements).
# A new bug: read, host, signature, event, counter, slot, decision, report, outbox.
NEW_BUG = {"sqlite": 10, "postgresql": 9}
# The storm's common path (a known bug from a new host, every slot held): read, host, event,
# counter, report; on PostgreSQL the read, then the four writes as one statement, each
# committing by itself (no BEGIN, no COMMIT).
KNOWN_BUG_SLOTS_HELD = {"sqlite": 6, "postgresql": 2}
# The next report of the bug: on PostgreSQL the one write alone, planned on what the worker's
# last read found (registry.ingest.last_read), which the write checks.
KNOWN_BUG_READ_BEFORE = {"sqlite": 6, "postgresql": 1}
# The read; on PostgreSQL the write planned on the last read, which finds the report_id stored
# (in report_keys) and writes nothing, then the first answer read by the report's id (its one
# partition: a resend costs a round trip more so that no new report's write reads `reports`).
REPLAY = {"sqlite": 2, "postgresql": 2}
REJECTED_TOKEN = {"sqlite": 2, "postgresql": 1}  # the read, rolled back
# Pool checkouts of the first report, the storm's common one and a replay. SQLite: one
# transaction each. PostgreSQL: the first report checks out the connection ingest keeps in
# autocommit mode (Database.autocommit) and, a new bug, one for `store`'s transaction; the
# others reuse the kept connection.
CHECKOUTS = {"sqlite": (1, 1, 1), "postgresql": (2, 0, 0)}


def post(client, token, body):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/reports", json=body, headers=auth(token))


def test_statements_of_one_report(client, database, make_token) -> None:
    dialect = database.engine.dialect.name
    token = make_token("report")
    client.get("/api/v1/events/1", headers=auth(token))  # the token's last use is stamped: not counted below
    with counted(database) as first:
        answer = post(client, token, crash_report(host={"hostname": "gpu-0"})).json
    assert answer["capture"]["action"] == "full"
    for number in range(1, 3):  # the other two of K = 3 capture slots
        answer = post(client, token, crash_report(host={"hostname": f"gpu-{number}"})).json
        assert answer["capture"]["action"] == "full"
    report = crash_report(host={"hostname": "gpu-3"})
    with counted(database) as common:
        assert post(client, token, report).json["capture"]["action"] == "skip"
    with counted(database) as next_one:
        next_report = crash_report(host={"hostname": "gpu-4"})
        assert post(client, token, next_report).json["capture"]["action"] == "skip"
    with counted(database) as replay:
        assert post(client, token, report).status_code == 200
    counts = (len(first.statements), len(common.statements), len(next_one.statements), len(replay.statements))
    assert counts == (
        NEW_BUG[dialect],
        KNOWN_BUG_SLOTS_HELD[dialect],
        KNOWN_BUG_READ_BEFORE[dialect],
        REPLAY[dialect],
    ), first.statements + common.statements + next_one.statements + replay.statements
    # The token is checked in the ingest transaction's read: no connection of its own.
    assert (first.checkouts, common.checkouts, replay.checkouts) == CHECKOUTS[dialect]
    # the connection ingest keeps is set up once (Database.autocommit) and asked once whether
    # reports are keyed (registry.core.events.reports_keyed)
    assert (first.setups, common.setups) == ((2, 0) if dialect == "postgresql" else (0, 0))
    assert next_one.checkouts == (0 if dialect == "postgresql" else 1)


def test_a_rejected_token_costs_the_read_alone(client, database, make_token) -> None:
    dialect = database.engine.dialect.name
    token = make_token("read")
    client.get("/api/v1/events/1", headers=auth(token))  # stamped: not counted below
    with counted(database) as forbidden:
        assert post(client, token, crash_report()).status_code == 403
    with counted(database) as unknown:
        assert post(client, "crs_00000000_unknown", crash_report()).status_code == 401
    assert len(forbidden.statements) == len(unknown.statements) == REJECTED_TOKEN[dialect]
    # PostgreSQL: the first checks out the connection ingest keeps, the second reuses it.
    assert (forbidden.checkouts, unknown.checkouts) == ((1, 1) if dialect == "sqlite" else (1, 0))
