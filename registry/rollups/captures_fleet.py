"""The captures' and the fleet's rollups (migration 0037): what a batch of queued changes adds
to them, and how they are built from the database.

`rollup_capture_daily` is additive: each capture counted in (+1) or out (-1) with its event's
crash day, decision and memory. The fleet is not quite: a host joins on the earliest of its
first sighting and its crashes, so `rollup_host_days` keeps every such mark per host and day
(a delete or a corrected crash time moves the host's start exactly), and a batch moves the
host's +1 in `rollup_fleet_daily` from its earliest day before the batch to its earliest day
after. Retirements are additive.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, text

from .deltas import add_deltas
from .dialect import DAY, DURATION

NO_ACTION, NO_NUMBER = "", -1  # the key's stand-ins for NULL (durations and memory are >= 0)
CAPTURE_KEY = ("day", "capture_action", "status", "memory_gb", "duration_s")
CAPTURE_COUNTS = ("captures", "bytes", "bytes_known", "downtime_us", "downtime_known")


def capture_columns(dialect: str, event: str = "", capture: str = "") -> dict[str, str]:
    """A capture's rollup key and measures: from a queued change (no prefixes) or from
    `captures c JOIN events e` (prefixes 'e.' and 'c.'); the same SQL both ways, so a change
    counted out matches what it, or the build, counted in."""
    return {
        "day": DAY[dialect](f"{event}crashed_at"),
        "capture_action": f"COALESCE({event}capture_action, '{NO_ACTION}')",
        "status": f"{capture}status",
        "memory_gb": f"COALESCE({event}memory_gb, {NO_NUMBER})",
        "duration_s": f"COALESCE({DURATION[dialect](f'{capture}duration_s')}, {NO_NUMBER})",
        "bytes": f"{capture}bytes",
        "downtime_us": f"CAST(round({capture}downtime_s * 1000000) AS BIGINT)",
    }


def capture_returning(dialect: str) -> str:
    return ", ".join(["delta", *(f"{sql} AS {name}" for name, sql in capture_columns(dialect).items())])


def host_returning(dialect: str) -> str:
    return (f"delta, host_id, {DAY[dialect]('first_seen')} AS first_day, "
            f"{DAY[dialect]('retired_at')} AS retired_day")


def capture_deltas(changes: Iterable[dict[str, Any]], totals: dict[tuple[Any, ...], list[int]]) -> None:
    """Add queued capture changes to `totals` (key -> CAPTURE_COUNTS)."""
    for change in changes:
        delta, size, downtime = change["delta"], change["bytes"], change["downtime_us"]
        current = totals.setdefault(tuple(change[k] for k in CAPTURE_KEY), [0] * len(CAPTURE_COUNTS))
        for index, value in enumerate((delta, delta * (size or 0), delta * (size is not None),
                                       delta * (downtime or 0), delta * (downtime is not None))):
            current[index] += value


def host_deltas(changes: Iterable[dict[str, Any]], marks: dict[tuple[int, Any], int],
                retired: dict[Any, int]) -> None:
    """Add queued host changes: a mark on the first sighting's day, a retirement on its day."""
    for change in changes:
        key = (change["host_id"], change["first_day"])
        marks[key] = marks.get(key, 0) + change["delta"]
        if change["retired_day"] is not None:
            retired[change["retired_day"]] = retired.get(change["retired_day"], 0) + change["delta"]


UPSERT_CAPTURES = text(
    f"INSERT INTO rollup_capture_daily ({', '.join((*CAPTURE_KEY, *CAPTURE_COUNTS))}) "
    f"VALUES ({', '.join(f':{c}' for c in (*CAPTURE_KEY, *CAPTURE_COUNTS))}) "
    f"ON CONFLICT ({', '.join(CAPTURE_KEY)}) DO UPDATE SET "
    + ", ".join(f"{c} = rollup_capture_daily.{c} + excluded.{c}" for c in CAPTURE_COUNTS)
)
EMPTIED_CAPTURES = text(
    f"DELETE FROM rollup_capture_daily WHERE {' AND '.join(f'{c} = :{c}' for c in CAPTURE_KEY)} "
    f"AND captures = 0"
)
UPSERT_MARKS = text(
    "INSERT INTO rollup_host_days (host_id, day, marks) VALUES (:host_id, :day, :marks) "
    "ON CONFLICT (host_id, day) DO UPDATE SET marks = rollup_host_days.marks + excluded.marks"
)
EMPTIED_MARKS = text("DELETE FROM rollup_host_days WHERE host_id = :host_id AND day = :day AND marks = 0")
STARTS = text("SELECT host_id, MIN(day) FROM rollup_host_days WHERE host_id IN :hosts GROUP BY host_id"
              ).bindparams(bindparam("hosts", expanding=True))
UPSERT_FLEET = text(
    "INSERT INTO rollup_fleet_daily (day, joined, retired) VALUES (:day, :joined, :retired) "
    "ON CONFLICT (day) DO UPDATE SET joined = rollup_fleet_daily.joined + excluded.joined, "
    "retired = rollup_fleet_daily.retired + excluded.retired"
)
EMPTIED_FLEET = text("DELETE FROM rollup_fleet_daily WHERE day = :day AND joined = 0 AND retired = 0")


def apply_captures(connection: Connection, totals: dict[tuple[Any, ...], list[int]]) -> None:
    rows = [dict(zip((*CAPTURE_KEY, *CAPTURE_COUNTS), (*key, *counts), strict=True))
            for key, counts in totals.items() if any(counts)]
    add_deltas(connection, UPSERT_CAPTURES, EMPTIED_CAPTURES, rows, ("captures",))


def _starts(connection: Connection, hosts: list[int]) -> dict[int, Any]:
    return {host: day for host, day in connection.execute(STARTS, {"hosts": hosts})} if hosts else {}


def apply_fleet(connection: Connection, marks: dict[tuple[int, Any], int],
                retired: dict[Any, int]) -> set[int]:
    """Add marks and retirements; each host whose earliest mark moved joins on its new day.
    Returns those hosts (their kernel intervals start from that day: registry.rollups.kernels)."""
    rows = [{"host_id": h, "day": d, "marks": n} for (h, d), n in marks.items() if n]
    hosts = sorted({row["host_id"] for row in rows})
    before = _starts(connection, hosts)
    add_deltas(connection, UPSERT_MARKS, EMPTIED_MARKS, rows, ("marks",))
    after = _starts(connection, hosts)
    fleet: dict[Any, list[int]] = {day: [0, n] for day, n in retired.items() if n}
    moved = {host for host in hosts if before.get(host) != after.get(host)}
    for host in moved:
        for day, delta in ((before.get(host), -1), (after.get(host), 1)):
            if day is not None:
                fleet.setdefault(day, [0, 0])[0] += delta
    add_deltas(connection, UPSERT_FLEET, EMPTIED_FLEET,
            [{"day": day, "joined": j, "retired": r} for day, (j, r) in fleet.items() if j or r],
            ("joined", "retired"))
    return moved


def build_statements(dialect: str) -> dict[str, dict[str, str]]:
    """Per group, each table's build from the database (in table order)."""
    columns = capture_columns(dialect, "e.", "c.")
    key = ", ".join(columns[c] for c in CAPTURE_KEY)
    day = DAY[dialect]
    return {
        "captures": {
            "rollup_capture_daily": (
                f"INSERT INTO rollup_capture_daily ({', '.join((*CAPTURE_KEY, *CAPTURE_COUNTS))}) "
                f"SELECT {key}, COUNT(*), COALESCE(SUM({columns['bytes']}), 0), COUNT({columns['bytes']}), "
                f"COALESCE(SUM({columns['downtime_us']}), 0), COUNT({columns['downtime_us']}) "
                f"FROM captures c JOIN events e ON e.id = c.event_id GROUP BY {key}"
            ),
        },
        "fleet": {
            "rollup_host_days": (
                f"INSERT INTO rollup_host_days (host_id, day, marks) SELECT host_id, day, SUM(marks) FROM ("
                f"SELECT host_id, {day('crashed_at')} AS day, COUNT(*) AS marks FROM events GROUP BY 1, 2 "
                f"UNION ALL SELECT id, {day('first_seen')}, 1 FROM hosts) AS marked GROUP BY host_id, day"
            ),
            "rollup_fleet_daily": (
                f"INSERT INTO rollup_fleet_daily (day, joined, retired) "
                f"SELECT day, SUM(joined), SUM(retired) FROM ("
                f"SELECT MIN(day) AS day, 1 AS joined, 0 AS retired FROM rollup_host_days GROUP BY host_id "
                f"UNION ALL SELECT {day('retired_at')}, 0, 1 FROM hosts WHERE retired_at IS NOT NULL"
                f") AS moved GROUP BY day"
            ),
        },
    }
