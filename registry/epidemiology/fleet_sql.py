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
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from .analysis import HostState, exposure_by_day
from .attributes import HOST_ATTRIBUTES, AttributeValue
from .dialect import Dialect, dialect_of
from .findings import Baseline, JointCounts, Pair
from .onset import InventoryChange

TRACKED = tuple(name for name in HOST_ATTRIBUTES if name != "hostname")


@dataclass(frozen=True)
class FleetDialect(Dialect):
    """The database's dialect, and the population the fleet is restricted to (host ids in the
    bind parameter `:population`; None: every host)."""

    population: Sequence[int] | None = None

    @classmethod
    def of(cls, session: Session, population: Sequence[int] | None = None) -> FleetDialect:
        return cls(dialect_of(session).name, population)

    def only(self, alias: str = "") -> str:
        """`AND <alias>id` is in the population (nothing when it is the whole fleet)."""
        return "" if self.population is None else f"AND {alias}id IN {self.id_list('population')}"

    def params(self) -> dict[str, Any]:
        return {} if self.population is None else {"population": json.dumps(sorted(self.population))}


def _backfilled(d: Dialect, alias: str = "") -> str:
    """Was the host loaded with the first inventory (then it counts from the beginning)?"""
    return f"{alias}first_seen < (SELECT {d.plus_day('min(first_seen)')} FROM hosts WHERE in_inventory)"


def _changed_hosts(attributes: Sequence[str]) -> str:
    tracked = ", ".join(f"'{name}'" for name in attributes)
    return f"(SELECT host_id FROM host_attribute_changes WHERE attribute IN ({tracked}))"


def starts_sql(d: FleetDialect, moving_only: bool = False) -> str:
    """CTE `starts(host_id, hostname, retired, born)`: inventory hosts and their lifetimes;
    `moving_only`: only hosts whose intervals are not all open (see `steady_sql`)."""
    moving = (
        f"AND NOT ({_backfilled(d)} AND retired_at IS NULL AND id NOT IN {_changed_hosts(TRACKED)})"
        if moving_only
        else ""
    )
    return f"""
    WITH starts AS (
      SELECT id AS host_id, hostname, retired_at AS retired,
             CASE WHEN {_backfilled(d)} THEN NULL ELSE first_seen END AS born
      FROM hosts WHERE in_inventory {moving} {d.only()}
    )"""


def steady_sql(d: FleetDialect) -> str:
    """CTE `steady`: inventory hosts there since the beginning, not retired, without
    attribute history: every value they carry covers the whole window, so their host-time
    is a count (the bulk of a fleet; the rest go through `intervals_sql`)."""
    return f"""
    steady AS (
      SELECT * FROM hosts h
      WHERE h.in_inventory AND h.retired_at IS NULL AND {_backfilled(d, "h.")}
        AND h.id NOT IN {_changed_hosts(TRACKED)} {d.only("h.")}
    )"""


def _value(name: str) -> str:
    return "coalesce(h.physical_host, h.hostname)" if name == "physical_host" else f"h.{name}"


def intervals_sql(
    d: FleetDialect, attributes: Sequence[str] = (*TRACKED, "hostname", "labels"), moving_only: bool = False
) -> str:
    """CTEs ending in `intervals(host_id, attribute, value, s, e)` for `attributes`; NULL s/e:
    open ends."""
    wanted = _tracked_of(attributes)
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
    {starts_sql(d, moving_only)},
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


def _grouping_sets_counts_sql(d: FleetDialect) -> str:
    """Steady hosts (most of the fleet) are counted in one pass (GROUPING SETS, count times
    the window); the other hosts' value intervals are summed as in the general case. Both
    in seconds and added up in SQL, so the totals are those of the interval sum exactly."""
    whole = _overlap(d, "NULL", "NULL")
    names = [*TRACKED, "hostname"]
    column = {name: name for name in TRACKED} | {"physical_host": "coalesce(physical_host, hostname)"}
    column["hostname"] = f"CASE WHEN hostname IN {d.json_list('only_hostname')} THEN hostname END"
    flags = ", ".join(f"GROUPING({column[n]}) AS g_{n}" for n in names)
    values = ", ".join(f"{column[n]} AS v_{n}" for n in names)
    sets = ", ".join(f"({column[n]})" for n in names)
    pick = " ".join(f"WHEN g_{n} = 0 THEN '{n}'" for n in names)
    pick_value = " ".join(f"WHEN g_{n} = 0 THEN v_{n}" for n in names)
    only_labels = d.json_list("only_labels")
    return f"""
    {intervals_sql(d, (*TRACKED, "hostname", "labels"), moving_only=True)},
    {steady_sql(d)},
    steady_values AS (
      SELECT {flags}, {values}, count(*) AS n FROM steady GROUP BY GROUPING SETS ({sets}, ())
    ),
    weights (attribute, value, w) AS (
      SELECT CASE {pick} ELSE '' END, CASE {pick_value} ELSE '' END, n * {whole} FROM steady_values
      UNION ALL
      SELECT 'labels', l.key || '=' || l.value, sum(n) * {whole}
      FROM (SELECT labels, count(*) AS n FROM steady GROUP BY labels) AS label_sets
           {d.labels("label_sets")}
      WHERE l.key || '=' || l.value IN {only_labels} GROUP BY l.key || '=' || l.value
      UNION ALL
      SELECT attribute, value, sum({_overlap(d, "s", "e")}) FROM intervals
      WHERE attribute NOT IN ('hostname', 'labels')
         OR (attribute = 'hostname' AND value IN {d.json_list("only_hostname")})
         OR (attribute = 'labels' AND value IN {only_labels})
      GROUP BY attribute, value
      UNION ALL
      SELECT '', '', sum({_overlap(d, "born", "retired")}) FROM starts
    )
    SELECT attribute, value, sum(w) FROM weights GROUP BY attribute, value
    """


def fleet_counts(
    session: Session,
    start: datetime,
    end: datetime,
    only: Mapping[str, Sequence[str]] | None = None,
    population: Sequence[int] | None = None,
) -> tuple[float, dict[AttributeValue, float]]:
    """Host-time (in hosts present throughout) per attribute value over [start, end).

    `only`: {"hostname": [...], "physical_host": [...], "labels": [...]}: count only these
    values of those attributes (the signature's; the others are never tested). `population`:
    host ids the fleet is restricted to (the hosts running a program)."""
    d = FleetDialect.of(session, population)
    params: dict[str, Any] = {"ws": d.moment(start), "we": d.moment(end)} | d.params()
    length = max((end - start).total_seconds(), 1.0)
    if d.grouping_sets and only is not None:
        params |= {f"only_{k}": json.dumps(sorted(only.get(k, ()))) for k in ("hostname", "labels")}
        statement = text(_grouping_sets_counts_sql(d))
    else:
        where = ""
        if only is not None:
            params |= {f"only_{k}": json.dumps(sorted(v)) for k, v in only.items()}
            where = f"WHERE attribute NOT IN ({', '.join(repr(k) for k in only)}) " + " ".join(
                f"OR (attribute = '{k}' AND value IN {d.json_list('only_' + k)})" for k in only
            )
        statement = text(
            intervals_sql(d)
            + f"SELECT attribute, value, sum({_overlap(d, 's', 'e')}) FROM intervals {where} "
            f"GROUP BY attribute, value UNION ALL SELECT '', '', sum({_overlap(d, 'born', 'retired')}) "
            "FROM starts"
        )
    counts: dict[AttributeValue, float] = defaultdict(float)
    total = 0.0
    for attribute, value, weight in session.execute(statement, params):
        if attribute == "":
            total = float(weight or 0.0) / length
        elif weight and value is not None:
            counts[(attribute, str(value))] += float(weight) / length
    return total, dict(counts)


def _current_condition(d: Dialect, key: AttributeValue, index: int) -> str:
    """Does a host's current value (a row of `hx`) match key number `index`?"""
    attribute = key[0]
    if attribute == "labels":
        return f"{d.label(f'k{index}')} = :v{index}"
    column = "hostname" if attribute == "hostname" else f"v_{attribute}"
    return f"{column} = :v{index}"


def _tracked_of(attributes: Sequence[str]) -> list[str]:
    return [name for name in TRACKED if name in attributes] or ["region"]


def _hx_columns(attributes: Sequence[str]) -> str:
    """The columns of `_unchanged_hosts_sql`'s `hx` that conditions on `attributes` read."""
    wanted = [f"v_{name}" for name in _tracked_of(attributes)] + ["born", "retired"]
    return ", ".join(wanted + [name for name in ("hostname", "labels") if name in attributes])


def _unchanged_hosts_sql(d: FleetDialect, wanted: Sequence[AttributeValue]) -> str:
    """CTE `hx` as in `intervals_sql` (columns hostname, labels, born, retired, v_*), for the
    inventory hosts without history of the `wanted` keys' attributes, straight from `hosts`
    in one pass. Values other than the wanted ones read as NULL (the conditions on key
    number i compare with :v<i>), so alike hosts group together."""
    attributes = sorted({attribute for attribute, _ in wanted})

    def column(name: str, expression: str) -> str:
        indexes = [f":v{i}" for i, (attribute, _) in enumerate(wanted) if attribute == name]
        picked = f"CASE WHEN {expression} IN ({', '.join(indexes)}) THEN {expression} END"
        return f"{picked if indexes else 'NULL'} AS {'hostname' if name == 'hostname' else 'v_' + name}"

    values = ", ".join(column(name, _value(name)) for name in _tracked_of(attributes))
    extra = (", " + column("hostname", "h.hostname")) if "hostname" in attributes else ""
    extra += ", h.labels" if "labels" in attributes else ""
    return f"""
    WITH hx AS {d.materialized} (
      SELECT h.retired_at AS retired, {values}{extra},
             CASE WHEN {_backfilled(d, "h.")} THEN NULL ELSE h.first_seen END AS born
      FROM hosts h WHERE h.in_inventory AND h.id NOT IN {_changed_hosts(_tracked_of(attributes))}
        {d.only("h.")}
    )"""


def fleet_joint(
    session: Session, start: datetime, end: datetime, population: Sequence[int] | None = None
) -> JointCounts:
    """Host-time carrying both of two values. Hosts without attribute history: one pass
    over their current values; hosts with history (few: a rollout's): their value intervals
    intersected pairwise, so rollouts are exact."""
    d = FleetDialect.of(session, population)
    length = max((end - start).total_seconds(), 1.0)

    def joint(keys: Sequence[AttributeValue]) -> dict[Pair, float]:
        wanted = sorted(set(keys))
        if len(wanted) < 2:
            return {}
        pairs = [(a, b) for i, a in enumerate(wanted) for b in wanted[i + 1 :]]
        params: dict[str, Any] = {"ws": d.moment(start), "we": d.moment(end)} | d.params()
        conditions = []
        for index, (attribute, value) in enumerate(wanted):
            conditions.append(f"(attribute = :a{index} AND value = :v{index})")
            label_key = value.partition("=")[0]
            params |= {
                f"a{index}": attribute,
                f"v{index}": value.partition("=")[2] if attribute == "labels" else value,
                f"k{index}": d.label_key(label_key),
            }
        index_of = {key: i for i, key in enumerate(wanted)}
        attributes = sorted({attribute for attribute, _ in wanted})
        steady_sql, weight = _unchanged_hosts_sql(d, wanted), _overlap(d, "born", "retired")
        if d.exact_seconds:  # alike hosts grouped first: the totals stay exact
            groups = f"SELECT *, count(*) AS n FROM hx GROUP BY {_hx_columns(attributes)}"
            steady_sql += f", hx_groups AS ({groups})"
            weight = f"n * {weight}"
        sums = ", ".join(
            f"sum(CASE WHEN {_current_condition(d, a, index_of[a])} "
            f"AND {_current_condition(d, b, index_of[b])} THEN {weight} ELSE 0 END)"
            for a, b in pairs
        )
        prefix = intervals_sql(d, attributes, moving_only=True)
        source = "hx_groups" if d.exact_seconds else "hx"
        steady = session.execute(text(f"{steady_sql} SELECT {sums} FROM {source}"), params).one()
        out = {pair: float(w or 0.0) / length for pair, w in zip(pairs, steady, strict=True)}
        # intervals carry label values as "key=value": match them whole
        params |= {f"v{i}": value for i, (_, value) in enumerate(wanted)}
        s = d.greatest("coalesce(i1.s, :ws)", "coalesce(i2.s, :ws)")
        e = d.least("coalesce(i1.e, :we)", "coalesce(i2.e, :we)")
        rows = session.execute(
            text(
                f"{prefix}, wanted AS (SELECT * FROM intervals WHERE host_id IN (SELECT host_id FROM ch) "
                f"AND ({' OR '.join(conditions)})) "
                f"SELECT i1.attribute, i1.value, i2.attribute, i2.value, sum({_overlap(d, s, e)}) "
                "FROM wanted i1 JOIN wanted i2 ON i1.host_id = i2.host_id "
                "AND (i1.attribute < i2.attribute OR (i1.attribute = i2.attribute AND i1.value < i2.value)) "
                "GROUP BY i1.attribute, i1.value, i2.attribute, i2.value"
            ),
            params,
        )
        for a1, v1, a2, v2, w in rows:
            pair = ((a1, str(v1)), (a2, str(v2)))
            out[pair] = out.get(pair, 0.0) + float(w or 0.0) / length
        return {pair: w for pair, w in out.items() if w}

    return joint


def fleet_baseline_sql(
    session: Session,
    start: datetime,
    end: datetime,
    only: Mapping[str, Sequence[str]] | None = None,
    population: Sequence[int] | None = None,
) -> Baseline | None:
    total, counts = fleet_counts(session, start, end, only, population)
    if total <= 0:
        return None
    return Baseline("fleet", "binomial", total, counts, fleet_joint(session, start, end, population))


def inventory_since(session: Session) -> datetime | None:
    """When the inventory first saw the fleet (its first load)."""
    return _aware(session.scalar(text("SELECT min(first_seen) FROM hosts WHERE in_inventory")))


CHANGING = "born IS NOT NULL OR retired IS NOT NULL"


def fleet_exposure(session: Session, first: date, last: date) -> dict[date, float] | None:
    """Hosts in the fleet per day: those there throughout, plus a sweep over the others."""
    d = FleetDialect.of(session)
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
    day = dialect_of(session).utc_day("changed_at")
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
