"""A panic's report (DPU, crash kernel) and its pstore record (read back after the reboot,
without the crashed boot's boot_id) stored at the same moment join one event, whichever
transaction takes the host first. On PostgreSQL the two interleavings are forced: a lock this
test holds on the signature's row stops each report past its host step, so the other arrives
while the first is still uncommitted. SQLite serialises its writers (BEGIN IMMEDIATE), which
leaves no interleaving to force; there the two reports are released together."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
import requests
from sqlalchemy import Connection, select, text

from registry.core.events import Event
from registry.core.hosts import Host
from testkit.reports import crash_report
from tests.support.http import auth, release_together

HOSTNAME = "gpu-race"
K = 3  # full captures a bug gets in its window (the settings' default)
PATHS = pytest.mark.parametrize("slots_held", [True, False], ids=["planned-write", "store"])
THE_EARLIER_CRASH = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
WAIT_S = 30


def panic_and_record() -> tuple[dict, dict]:
    """A DPU's report of a panic and the pstore record of the same panic (fingerprint, host,
    times 32 s apart, within the join window)."""
    host = {"hostname": HOSTNAME}
    dpu = crash_report(source="dpu", host=host, crashed_at="2026-11-29T12:00:30Z")
    record = crash_report(source="pstore", boot_id=None, host=host, crashed_at="2026-11-29T11:59:58Z")
    return dpu, record


def known_host_and_bug(url: str, token: str, slots_held: bool) -> int:
    """The host and the bug known from an earlier panic (an hour before: another crash); with
    `slots_held`, the bug's K full captures taken by other hosts too, so that the panic's report
    needs no claim and takes the one planned write, else a slot is free and it takes `store`'s
    steps. The signature's id."""
    earlier = crash_report(
        source="dpu", host={"hostname": HOSTNAME}, crashed_at=THE_EARLIER_CRASH.isoformat()
    )
    others = [crash_report(source="dpu", host={"hostname": f"gpu-{n}"}) for n in range(slots_held * K)]
    answers = [sent(url, token, body) for body in (earlier, *others)]
    assert [answer.status_code for answer in answers] == [201] * len(answers)
    assert (answers[-1].json()["capture"]["action"] == "skip") == slots_held
    return int(answers[0].json()["signature"]["id"])


def crashes_of_the_panic(database) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """The sources of each event of the host in the panic's minute."""
    with database.session() as session:
        rows = session.scalars(
            select(Event.sources)
            .join(Host, Host.id == Event.host_id)
            .where(Host.hostname == HOSTNAME, Event.crashed_at > THE_EARLIER_CRASH)
        )
        return [sorted(sources) for sources in rows]


def waiting_on_locks(probe: Connection) -> int:
    return probe.execute(
        text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
    ).scalar_one()


@contextmanager
def signature_held(database, signature_id: int) -> Iterator[Connection]:  # type: ignore[no-untyped-def]
    """The signature's row locked FOR UPDATE until the block ends: an event's foreign key to it
    waits. Yields a second connection to watch the waiters from."""
    with database.engine.connect() as holder, database.engine.connect() as probe:
        holder.execute(text("SELECT id FROM signatures WHERE id = :id FOR UPDATE"), {"id": signature_id})
        yield probe
        holder.rollback()


def until_waiting(probe: Connection, count: int, pending: list[Future]) -> None:
    """Until `count` backends wait on a lock (each request stopped where this test wants it),
    or a request has ended, which the assertions then judge."""
    deadline = time.monotonic() + WAIT_S
    while waiting_on_locks(probe) < count and not any(future.done() for future in pending):
        probe.commit()  # a new snapshot of pg_stat_activity
        assert time.monotonic() < deadline, f"fewer than {count} requests waiting on a lock"
        time.sleep(0.01)


def sent(url: str, token: str, body: dict) -> requests.Response:
    with requests.Session() as http:
        return http.post(f"{url}/api/v1/reports", json=body, headers=auth(token), timeout=120)


def one_after_another_in_flight(  # type: ignore[no-untyped-def]
    url: str, token: str, database, signature_id: int, first: dict, second: dict
) -> list[requests.Response]:
    """`first` sent and stopped before its commit, `second` sent while it is in flight, then
    both let go."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("SQLite serialises writers: no interleaving to force (see the released-together test)")
    with ThreadPoolExecutor(2) as pool, signature_held(database, signature_id) as probe:
        pending = [pool.submit(sent, url, token, first)]
        until_waiting(probe, 1, pending)
        pending.append(pool.submit(sent, url, token, second))
        until_waiting(probe, 2, pending)
    return [future.result() for future in pending]


def joined(responses: list[requests.Response], database) -> None:  # type: ignore[no-untyped-def]
    """Both acknowledged, one event with both sources, one answer (the first half's)."""
    assert [r.status_code for r in responses] == [201, 201]
    first, second = (r.json() for r in responses)
    assert (first["event_id"], first["capture"]) == (second["event_id"], second["capture"])
    assert crashes_of_the_panic(database) == [["dpu", "pstore"]]


@PATHS
@pytest.mark.parametrize("record_first", [False, True], ids=["record-second", "panic-second"])
def test_one_half_of_a_panic_arriving_while_the_other_is_uncommitted_joins_it(
    live_server, make_token, database, slots_held: bool, record_first: bool
) -> None:
    token = make_token("report")
    signature_id = known_host_and_bug(live_server, token, slots_held)
    dpu, record = panic_and_record()
    first, second = (record, dpu) if record_first else (dpu, record)
    joined(one_after_another_in_flight(live_server, token, database, signature_id, first, second), database)


@PATHS
def test_a_panic_s_report_and_its_record_released_together_make_one_event(
    live_server, make_token, database, slots_held: bool
) -> None:
    token = make_token("report")
    known_host_and_bug(live_server, token, slots_held)
    joined(release_together(live_server, token, list(panic_and_record())), database)
