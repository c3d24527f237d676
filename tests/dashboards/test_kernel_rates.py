"""The epidemiology dashboard's crash rate by kernel version is crashes per 1,000 host-days of
the kernel in the range, read through Grafana's read-only door: during a rollout it must show
the new kernel worse when it is, where crashes over the hosts running a kernel *now* showed
the old one worse.

A planted rollout, loaded as a fleet loads it (inventory observations with `observed_at`,
crash reports with `crashed_at`), whose host-days are computed by hand below.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from dashboards import build_dashboards
from registry.db import Database
from sync.grafana.rollups import refresh_rollups
from testkit.grafana_sql import TimeRange, expand_target
from testkit.reports import crash_report
from tests.support.fleet import iso
from tests.support.grafana import Runner, dialect_of

OLD, NEW = "6.8.0-50", "6.8.0-60"
D0 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=60)


def day(n: float) -> datetime:
    return D0 + timedelta(days=n)


# The range a manager picks: from D0+9d 13:00 to D0+39d 15:00. The daily panels count the
# whole UTC days whose start lies in it, D0+10 .. D0+39: host-days over [D0+10d, D0+40d).
RANGE = TimeRange(day(9) + timedelta(hours=13), day(39) + timedelta(hours=15))

# Host-days over [D0+10d, D0+40d), by hand:
# OLD: h07-h09 all along (3 x 30); h10 until retired at D0+25d 06:00 (15.25); h01-h06 until
#      the rollout at D0+20d 12:00 (6 x 10.5); h15, known only from a back-filled crash on
#      D0+12d, from that day (28): 90 + 15.25 + 63 + 28.
# NEW: h11, h12 all along (2 x 30); h01-h06 from the rollout (6 x 19.5); h14 from its first
#      sighting at D0+30d (10): 60 + 117 + 10. h13 has no kernel recorded: left out.
HOST_DAYS = {OLD: 196.25, NEW: 187.0}
HOSTS = {OLD: 11, NEW: 9}
# Crashes in the counted days (one after the range's end on its last day, D0+39d 18:00, counts:
# the day does); two outside them do not.
OLD_CRASHES = [("h07", 11), ("h08", 15.5), ("h01", 18), ("h15", 12 + 8 / 24), ("h09", 39.75)]
NEW_CRASHES = [("h11", 10.5), ("h02", 21), ("h03", 22), ("h01", 26), ("h14", 31), ("h12", 33),
               ("h05", 35), ("h04", 38)]
OUTSIDE = [("h07", 5, OLD), ("h11", 41, NEW)]


def host(name: str, kernel: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"hostname": name, "region": "us-east", "memory_gb": 512}
    if kernel:
        fields["kernel_version"] = kernel
    return fields


@pytest.fixture
def rollout(client: Any, make_token: Callable[..., str], database: Database) -> dict[str, int]:
    """The planted fleet, in the order things happened; returns the crashes per kernel."""
    headers = {"Authorization": f"Bearer {make_token('report')}"}
    kernels = {f"h{i:02d}": OLD for i in range(1, 11)} | {"h11": NEW, "h12": NEW, "h13": None}

    def observe(when: datetime, names: list[str]) -> None:
        body = {"hosts": [host(n, kernels[n]) for n in names], "observed_at": iso(when)}
        answer = client.post("/api/v1/hosts", json=body, headers=headers)
        assert answer.status_code == 200, answer.get_json()

    def crash(name: str, when: datetime, kernel: str) -> None:
        boot = f"{name}-{int(when.timestamp())}"
        report = crash_report(crashed_at=iso(when), host=host(name, kernel), boot_id=boot)
        answer = client.post("/api/v1/reports", json=report, headers=headers)
        assert answer.status_code == 201, answer.get_json()

    def roll_out(when: datetime, moved: dict[str, str]) -> None:
        kernels.update(moved)
        observe(when, list(moved))

    steps: list[tuple[datetime, Callable[[], None]]] = [
        (day(0), lambda: observe(day(0), list(kernels))),
        (day(20.5), lambda: roll_out(day(20.5), {f"h0{i}": NEW for i in range(1, 7)})),
        (day(30), lambda: roll_out(day(30), {"h14": NEW})),
    ]
    planted = [(h, n, OLD) for h, n in OLD_CRASHES] + [(h, n, NEW) for h, n in NEW_CRASHES] + OUTSIDE
    steps += [(day(n), lambda h=h, n=n, k=k: crash(h, day(n), k)) for h, n, k in planted if h != "h15"]
    for _, step in sorted(steps, key=lambda s: s[0]):
        step()
    crash("h15", day(12 + 8 / 24), OLD)  # back-filled later: known from this crash only
    with database.session() as session:  # retired (no API retires a host)
        session.execute(text("UPDATE hosts SET retired_at = :at WHERE hostname = 'h10'"),
                        {"at": day(25.25)})
    refresh_rollups(database)  # as the scheduler's job does before Grafana reads
    return {OLD: len(OLD_CRASHES), NEW: len(NEW_CRASHES)}


def kernel_rate_target(dialect: str) -> dict[str, Any]:
    board = next(b for b in build_dashboards(dialect, "x") if b["uid"] == "crashreg-epidemiology")
    panel = next(p for p in board["panels"] if p["title"].startswith("Crash rate by kernel version"))
    return panel["targets"][0]


def test_kernel_crash_rate_is_per_host_day_of_the_kernel_in_the_range(
    rollout: dict[str, int], read_only: Runner, db_url: str
) -> None:
    columns, rows = read_only(expand_target(kernel_rate_target(dialect_of(db_url)), {}, RANGE))
    # the planted regression shows: the new kernel crashes more per host-day, listed first
    # (per host running it now, the old kernel came first: 5 / 4 hosts against 8 / 9)
    assert [row[0] for row in rows] == [NEW, OLD]
    assert columns == ["kernel_version", "crashes", "hosts", "host_days", "crashes_per_1k_host_days"]
    got = {row[0]: dict(zip(columns, row, strict=True)) for row in rows}
    for kernel in (OLD, NEW):
        assert int(got[kernel]["crashes"]) == rollout[kernel]
        assert int(got[kernel]["hosts"]) == HOSTS[kernel]
        # exact to the second (SQLite's epoch seconds): well within 1e-6 host-days
        assert float(got[kernel]["host_days"]) == pytest.approx(HOST_DAYS[kernel], abs=1e-6)
        expected = rollout[kernel] * 1000 / HOST_DAYS[kernel]
        assert float(got[kernel]["crashes_per_1k_host_days"]) == pytest.approx(expected, rel=1e-9)


def test_the_kernel_rate_panel_says_what_its_figure_is() -> None:
    for dialect in ("postgresql", "sqlite"):
        board = next(b for b in build_dashboards(dialect, "x") if b["uid"] == "crashreg-epidemiology")
        titles = [p["title"] for p in board["panels"] if p["title"].startswith("Crash rate by kernel")]
        assert titles == ["Crash rate by kernel version (crashes per 1,000 host-days)"]
        assert "crashes_per_1k_host_days" in kernel_rate_target(dialect).get("rawSql", "") + \
            kernel_rate_target(dialect).get("rawQueryText", "")


def test_kernel_crash_rate_counts_no_host_time_outside_the_range(
    rollout: dict[str, int], read_only: Runner, db_url: str
) -> None:
    """Before the fleet: no host-days, no rows. A range reaching past now counts until now."""
    target = kernel_rate_target(dialect_of(db_url))
    assert read_only(expand_target(target, {}, TimeRange(day(-30), day(-1) - timedelta(seconds=1))))[1] == []
    now = datetime.now(UTC)
    ahead = TimeRange(now - timedelta(days=2), now + timedelta(days=3))
    _, rows = read_only(expand_target(target, {}, ahead))
    by_kernel = {row[0]: float(row[3]) for row in rows}
    # since yesterday's midnight, to now: 9 hosts on NEW (h11, h12, h01-h06, h14), 4 on OLD
    since_midnight = (now - now.replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds() / 86400
    for kernel, hosts in ((NEW, 9), (OLD, 4)):
        assert by_kernel[kernel] == pytest.approx(hosts * (1 + since_midnight), abs=hosts * 2 / 86400)


def rates(read_only: Runner, db_url: str, window: TimeRange) -> dict[str, tuple[int, int, float]]:
    """Per kernel: crashes, hosts, host-days."""
    _, rows = read_only(expand_target(kernel_rate_target(dialect_of(db_url)), {}, window))
    return {row[0]: (int(row[1]), int(row[2]), float(row[3] or 0)) for row in rows}


def test_changes_to_days_already_rolled_up_are_counted_again(
    rollout: dict[str, int], read_only: Runner, db_url: str, client: Any, make_token: Callable[..., str],
    database: Database,
) -> None:
    """After the rollup folded the rollout: a back-dated observation (h07 on NEW since D0+15d), a
    rollback (h01 back on OLD at D0+27d: one host on OLD, not two) and a retirement (h11 at
    D0+35d) move the host-days of the range exactly."""
    headers = {"Authorization": f"Bearer {make_token('report')}"}
    for name, kernel, when in (("h07", NEW, day(15)), ("h01", OLD, day(27))):
        body = {"hosts": [host(name, kernel)], "observed_at": iso(when)}
        assert client.post("/api/v1/hosts", json=body, headers=headers).status_code == 200
    with database.session() as session:
        session.execute(text("UPDATE hosts SET retired_at = :at WHERE hostname = 'h11'"), {"at": day(35)})
    refresh_rollups(database)
    # h07: 25 days from OLD to NEW; h01: 13 from NEW to OLD; h11: 5 off NEW
    expected = {OLD: (rollout[OLD], 11, HOST_DAYS[OLD] - 25 + 13),
                NEW: (rollout[NEW], 10, HOST_DAYS[NEW] + 25 - 13 - 5)}
    got = rates(read_only, db_url, RANGE)
    assert {k: v[:2] for k, v in got.items()} == {k: v[:2] for k, v in expected.items()}
    for kernel, (_, _, host_days) in expected.items():
        assert got[kernel][2] == pytest.approx(host_days, abs=1e-6)


def test_today_counts_up_to_now(
    rollout: dict[str, int], read_only: Runner, db_url: str, client: Any, make_token: Callable[..., str],
    database: Database,
) -> None:
    """A host first seen today counts from its sighting, a kernel changed today moves the host at
    that moment, and neither counts past now."""
    headers = {"Authorization": f"Bearer {make_token('report')}"}
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    when = midnight + (datetime.now(UTC) - midnight) / 2
    body = {"hosts": [host("h16", NEW), host("h12", OLD)], "observed_at": iso(when)}
    assert client.post("/api/v1/hosts", json=body, headers=headers).status_code == 200
    refresh_rollups(database)
    now = datetime.now(UTC)
    got = rates(read_only, db_url, TimeRange(now - timedelta(days=2), now + timedelta(days=3)))
    today, half = (now - midnight).total_seconds() / 86400, (when - midnight).total_seconds() / 86400
    # NEW: 9 hosts since yesterday's midnight, h16 from `when`, h12 until it; OLD: 4, h12 from `when`
    expected = {NEW: (10, 9 * (1 + today) + (today - half) - (today - half)),
                OLD: (5, 4 * (1 + today) + (today - half))}
    for kernel, (hosts, host_days) in expected.items():
        assert got[kernel][1] == hosts
        assert got[kernel][2] == pytest.approx(host_days, abs=12 * 2 / 86400)  # the read's now is later


def test_a_range_holding_no_whole_day_counts_no_host_days(rollout: dict[str, int], read_only: Runner,
                                                          db_url: str) -> None:
    """Two hours inside one day: no day starts in it (the daily panels show nothing), so no host
    counts either (the view read before 0048 gave every running host negative host-days)."""
    inside = TimeRange(day(20) + timedelta(hours=13), day(20) + timedelta(hours=15))
    assert rates(read_only, db_url, inside) == {}
