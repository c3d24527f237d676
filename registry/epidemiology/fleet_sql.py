"""The fleet as it was, in SQL: host-time per attribute value over a window, from the
inventory's current values and its attribute history.

Every host and attribute yields value intervals: each recorded change closes the interval of
the old value (which began at the previous change, or when the host appeared) and the
current value runs from the last change until the host retires. A host first seen when the
inventory was first loaded counts from the beginning of time (back-filled crash history
then has a fleet to compare with). Joint host-time of two values intersects their intervals
on the same host, so rollouts are exact. Labels count with their current values only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from registry.db import is_postgresql

from .analysis import HostState, exposure_by_day
from .attributes import HOST_ATTRIBUTES, AttributeValue
from .findings import Baseline, JointCounts, Pair
from .onset import InventoryChange

TRACKED = tuple(name for name in HOST_ATTRIBUTES if name != "hostname")


class Dialect:
    """The few expressions that differ between PostgreSQL and SQLite."""

    def __init__(self, session: Session) -> None:
        self.postgresql = is_postgresql(session)

    def seconds(self, later: str, earlier: str) -> str:
        if self.postgresql:
            return f"extract(epoch from ({later}) - ({earlier}))"
        return f"(julianday({later}) - julianday({earlier})) * 86400.0"

    def greatest(self, *args: str) -> str:
        return f"{'greatest' if self.postgresql else 'max'}({', '.join(args)})"

    def least(self, *args: str) -> str:
        return f"{'least' if self.postgresql else 'min'}({', '.join(args)})"

    def plus_day(self, expression: str) -> str:
        if self.postgresql:
            return f"({expression}) + interval '1 day'"
        return f"datetime({expression}, '+1 day')"

    def labels(self, alias: str) -> str:
        if self.postgresql:
            return f"CROSS JOIN LATERAL jsonb_each_text({alias}.labels) AS l(key, value)"
        return f", json_each({alias}.labels) AS l"

    def moment(self, value: datetime) -> Any:
        """A bind value comparable with stored timestamps."""
        if self.postgresql:
            return value
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def starts_sql(d: Dialect) -> str:
    """CTE `starts(host_id, hostname, retired, born)`: inventory hosts and their lifetimes."""
    return f"""
    WITH starts AS (
      SELECT id AS host_id, hostname, retired_at AS retired,
             CASE WHEN first_seen < (SELECT {d.plus_day("min(first_seen)")} FROM hosts WHERE in_inventory)
                  THEN NULL ELSE first_seen END AS born
      FROM hosts WHERE in_inventory
    )"""


def _value(name: str) -> str:
    return "coalesce(h.physical_host, h.hostname)" if name == "physical_host" else f"h.{name}"


def intervals_sql(d: Dialect, attributes: Sequence[str] = (*TRACKED, "hostname", "labels")) -> str:
    """CTEs ending in `intervals(host_id, attribute, value, s, e)` for `attributes`; NULL s/e:
    open ends."""
    wanted = [name for name in TRACKED if name in attributes] or ["region"]
    tracked = ", ".join(f"'{name}'" for name in wanted)
    last_changes = ", ".join(
        f"max(CASE WHEN attribute = '{name}' THEN changed_at END) AS lc_{name}" for name in wanted
    )
    values = ", ".join(f"{_value(name)} AS v_{name}" for name in wanted)
    lasts = ", ".join(f"l.lc_{name}" for name in wanted)
    branches = [
        f"SELECT host_id, '{name}', v_{name}, coalesce(lc_{name}, born), retired FROM hx"
        for name in wanted
        if name in attributes
    ]
    if "hostname" in attributes:
        branches.append("SELECT host_id, 'hostname', hostname, born, retired FROM hx")
    if "labels" in attributes:
        branches.append(
            "SELECT hx.host_id, 'labels', l.key || '=' || l.value, hx.born, hx.retired "
            f"FROM hx {d.labels('hx')}"
        )
    current = " UNION ALL ".join(branches)
    return f"""
    {starts_sql(d)},
    ch AS (
      SELECT c.host_id, c.attribute, c.old_value, c.changed_at,
             LAG(c.changed_at) OVER (PARTITION BY c.host_id, c.attribute ORDER BY c.changed_at, c.id)
               AS prev_at
      FROM host_attribute_changes c JOIN starts st ON st.host_id = c.host_id
      WHERE c.attribute IN ({tracked})
    ),
    last_change AS (SELECT host_id, {last_changes} FROM ch GROUP BY host_id),
    hx AS (
      SELECT st.host_id, st.hostname, st.born, st.retired, h.labels, {values}, {lasts}
      FROM starts st JOIN hosts h ON h.id = st.host_id
      LEFT JOIN last_change l ON l.host_id = st.host_id
    ),
    intervals_all (host_id, attribute, value, s, e) AS (
      SELECT ch.host_id, ch.attribute,
             CASE WHEN ch.attribute = 'physical_host' THEN coalesce(ch.old_value, st.hostname)
                  ELSE ch.old_value END,
             coalesce(ch.prev_at, st.born), ch.changed_at
      FROM ch JOIN starts st ON st.host_id = ch.host_id
      UNION ALL {current}
    ),
    intervals AS (SELECT * FROM intervals_all WHERE value IS NOT NULL)
    """


def _overlap(d: Dialect, s: str, e: str) -> str:
    """Seconds of [s, e) inside the window [:ws, :we) (open ends: NULL)."""
    later = d.least(f"coalesce({e}, :we)", ":we")
    earlier = d.greatest(f"coalesce({s}, :ws)", ":ws")
    return d.greatest("0", d.seconds(later, earlier))


def _json_list(d: Dialect, param: str) -> str:
    if d.postgresql:
        return f"(SELECT jsonb_array_elements_text(CAST(:{param} AS jsonb)))"
    return f"(SELECT value FROM json_each(:{param}))"


def fleet_counts(
    session: Session, start: datetime, end: datetime, hosts: Mapping[str, Sequence[str]] | None = None
) -> tuple[float, dict[AttributeValue, float]]:
    """Host-time (in hosts present throughout) per attribute value over [start, end).

    `hosts`: {"hostname": [...], "physical_host": [...]}: count only these hosts (those of
    the signature; the others are never tested), not all twenty thousand."""
    d = Dialect(session)
    params: dict[str, Any] = {"ws": d.moment(start), "we": d.moment(end)}
    length = max((end - start).total_seconds(), 1.0)
    only = ""
    if hosts is not None:
        params |= {f"only_{k}": json.dumps(sorted(v)) for k, v in hosts.items()}
        only = "WHERE attribute NOT IN ('hostname', 'physical_host') " + " ".join(
            f"OR (attribute = '{k}' AND value IN {_json_list(d, 'only_' + k)})" for k in hosts
        )
    statement = text(
        intervals_sql(d) + f"SELECT attribute, value, sum({_overlap(d, 's', 'e')}) FROM intervals {only} "
        f"GROUP BY attribute, value UNION ALL SELECT '', '', sum({_overlap(d, 'born', 'retired')}) "
        "FROM starts"
    )
    counts: dict[AttributeValue, float] = {}
    total = 0.0
    for attribute, value, weight in session.execute(statement, params):
        if attribute == "":
            total = float(weight or 0.0) / length
        elif weight:
            counts[(attribute, str(value))] = float(weight) / length
    return total, counts


def fleet_joint(session: Session, start: datetime, end: datetime) -> JointCounts:
    """Host-time carrying both of two values (their intervals intersected per host)."""
    d = Dialect(session)
    length = max((end - start).total_seconds(), 1.0)

    def joint(keys: Sequence[AttributeValue]) -> dict[Pair, float]:
        wanted = sorted(set(keys))
        if len(wanted) < 2:
            return {}
        params: dict[str, Any] = {"ws": d.moment(start), "we": d.moment(end)}
        conditions = []
        for index, (attribute, value) in enumerate(wanted):
            conditions.append(f"(attribute = :a{index} AND value = :v{index})")
            params |= {f"a{index}": attribute, f"v{index}": value}
        s = d.greatest("coalesce(i1.s, :ws)", "coalesce(i2.s, :ws)")
        e = d.least("coalesce(i1.e, :we)", "coalesce(i2.e, :we)")
        rows = session.execute(
            text(
                intervals_sql(d, sorted({attribute for attribute, _ in wanted}))
                + f", wanted AS (SELECT * FROM intervals WHERE {' OR '.join(conditions)}) "
                f"SELECT i1.attribute, i1.value, i2.attribute, i2.value, sum({_overlap(d, s, e)}) "
                "FROM wanted i1 JOIN wanted i2 ON i1.host_id = i2.host_id "
                "AND (i1.attribute < i2.attribute OR (i1.attribute = i2.attribute AND i1.value < i2.value)) "
                "GROUP BY i1.attribute, i1.value, i2.attribute, i2.value"
            ),
            params,
        )
        return {((a1, v1), (a2, v2)): float(w) / length for a1, v1, a2, v2, w in rows if w}

    return joint


def fleet_baseline_sql(
    session: Session, start: datetime, end: datetime, hosts: Mapping[str, Sequence[str]] | None = None
) -> Baseline | None:
    total, counts = fleet_counts(session, start, end, hosts)
    if total <= 0:
        return None
    return Baseline("fleet", "binomial", total, counts, fleet_joint(session, start, end))


CHANGING = "born IS NOT NULL OR retired IS NOT NULL"


def fleet_exposure(session: Session, first: date, last: date) -> dict[date, float] | None:
    """Hosts in the fleet per day: those there throughout, plus a sweep over the others."""
    d = Dialect(session)
    steady = session.scalar(
        text(starts_sql(d) + " SELECT count(*) FROM starts WHERE born IS NULL AND retired IS NULL")
    )
    rows = session.execute(text(f"{starts_sql(d)} SELECT born, retired FROM starts WHERE {CHANGING}")).all()
    if not steady and not rows:
        return None
    states = [HostState("", frozenset(), _aware(born), _aware(retired)) for born, retired in rows]
    return {day: n + steady for day, n in exposure_by_day(states, first, last).items()}


def _aware(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def rollout_steps(session: Session) -> list[InventoryChange]:
    """Per day and attribute value, how many hosts took it (the inventory's rollouts)."""
    day = "date(timezone('UTC', changed_at))" if is_postgresql(session) else "date(changed_at)"
    rows = session.execute(
        text(
            f"SELECT {day}, attribute, new_value, count(*) FROM host_attribute_changes "
            f"WHERE attribute <> 'labels' AND new_value IS NOT NULL GROUP BY {day}, attribute, new_value"
        )
    )
    return [
        InventoryChange(d if isinstance(d, date) else date.fromisoformat(str(d)), a, v, int(n))
        for d, a, v, n in rows
    ]
