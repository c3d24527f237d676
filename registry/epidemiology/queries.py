"""The database side of epidemiology: aggregate in SQL, hand plain data to the statistics.

Counts per attribute value, joint counts of two values, daily counts and uptime tails are
computed by the database (PostgreSQL or SQLite); only aggregates cross into Python.
"""

from __future__ import annotations

import json
import math
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import bindparam, delete, distinct, func, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from registry.bounds import EARLIEST_CRASH, latest_crash, plausible
from registry.core.events import Event
from registry.core.hosts import Host
from registry.core.signatures import Signature
from registry.db import on_replica

from .analysis import MAX_UNRECORDED_SHARE, SignatureSample, crash_baseline
from .attributes import CHANGING_SCALARS, HOST_ATTRIBUTES, AttributeValue
from .dialect import dialect_of
from .findings import MIN_SUPPORT, Baseline, JointCounts, Pair
from .models import SAMPLE_FITS, SNAPSHOT_COLUMNS, EpidemiologySample
from .suspects import HostSignatureCount
from .uptime import Ascending, with_added

PHYSICAL = "coalesce(physical_host, hostname)"
LARGE_SIGNATURE = 1000
COLUMN_SQL: dict[str, str] = {name: name for name in HOST_ATTRIBUTES} | {"physical_host": PHYSICAL}


class EventFilter:
    """A WHERE clause over `events` with its parameters: one signature (and those merged
    into it), everything else, or all events. `weight`: a column holding how many events
    each row stands for (rows of alike events grouped), else one each."""

    def __init__(
        self,
        sql: str,
        params: dict[str, Any],
        expanding: Sequence[str] = (),
        table: str = "events",
        weight: str | None = None,
    ) -> None:
        self.sql, self.params, self.expanding = sql, params, tuple(expanding)
        self.source = "events" if table == "events" else f"{table} AS events"
        self.one = weight or "1"
        self.count = f"sum({weight})" if weight else "count(*)"

    def statement(self, sql: str) -> Any:
        statement = text(sql)
        if self.expanding:
            statement = statement.bindparams(*(bindparam(n, expanding=True) for n in self.expanding))
        return statement

    @classmethod
    def signature(cls, ids: Sequence[int]) -> EventFilter:
        return cls("signature_id IN :signature_ids", {"signature_ids": list(ids)}, ["signature_ids"])

    @classmethod
    def others(cls, ids: Sequence[int]) -> EventFilter:
        return cls(
            "(signature_id IS NULL OR signature_id NOT IN :signature_ids)",
            {"signature_ids": list(ids)},
            ["signature_ids"],
        )

    @classmethod
    def everything(cls) -> EventFilter:
        return cls("1 = 1", {})


def signature_ids(session: Session, signature_id: int) -> list[int]:
    """The signature and those merged into it: one bug's events."""
    merged = session.scalars(select(Signature.id).where(Signature.merged_into_id == signature_id))
    return [signature_id, *merged]


def _labels_counts_sql(session: Session, where: EventFilter, least: int) -> str:
    """Events per label: alike label sets counted first, then taken apart (a few rows to
    expand instead of one per event)."""
    each = dialect_of(session).labels("label_sets")
    return (
        "SELECT 'labels' AS attribute, l.key || '=' || l.value AS value, sum(label_sets.n) AS n "
        f"FROM (SELECT labels, {where.count} AS n FROM {where.source} WHERE {where.sql} GROUP BY labels) "
        f"AS label_sets {each} GROUP BY l.key || '=' || l.value HAVING sum(label_sets.n) >= {least}"
    )


def value_counts(
    session: Session, where: EventFilter, least: int = 1, least_per_host: int = 1
) -> dict[AttributeValue, int]:
    """Events per attribute value carried by at least `least` events (`least_per_host` for
    hostnames). PostgreSQL: one pass (GROUPING SETS) plus one for labels; SQLite: one
    GROUP BY per attribute in a UNION ALL."""
    names = list(COLUMN_SQL)
    counts: dict[AttributeValue, int] = {}
    if dialect_of(session).grouping_sets:
        columns = [f"{COLUMN_SQL[name]} AS c{i}" for i, name in enumerate(names)]
        flags = [f"GROUPING({COLUMN_SQL[name]})" for name in names]
        sets = ", ".join(f"({COLUMN_SQL[name]})" for name in names)
        rows = session.execute(
            where.statement(
                f"SELECT {', '.join(flags)}, {', '.join(columns)}, {where.count} FROM {where.source} "
                f"WHERE {where.sql} GROUP BY GROUPING SETS ({sets}) HAVING {where.count} >= "
                f"CASE WHEN GROUPING(hostname) = 0 THEN {least_per_host} ELSE {least} END"
            ),
            where.params,
        )
        for row in rows:
            index = list(row[: len(names)]).index(0)
            value = row[len(names) + index]
            if value is not None:
                counts[(names[index], str(value))] = int(row[-1])
        labels = session.execute(where.statement(_labels_counts_sql(session, where, least)), where.params)
    else:
        every = _counts_sql(session, where, least, least_per_host)
        labels = session.execute(where.statement(every), where.params)
    counts.update({(attribute, str(value)): int(n) for attribute, value, n in labels})
    return counts


def _counts_sql(session: Session, where: EventFilter, least: int = 1, least_per_host: int = 1) -> str:
    """(attribute, value, n) rows: one GROUP BY per attribute in a UNION ALL, labels taken apart."""
    parts = [
        f"SELECT '{name}' AS attribute, {column} AS value, {where.count} AS n FROM {where.source} "
        f"WHERE {where.sql} AND {column} IS NOT NULL GROUP BY {column} "
        f"HAVING {where.count} >= {least_per_host if name == 'hostname' else least}"
        for name, column in COLUMN_SQL.items()
    ]
    parts.append(_labels_counts_sql(session, where, least))
    return " UNION ALL ".join(parts)


def _condition(session: Session, key: AttributeValue, param: str) -> tuple[str, dict[str, Any]]:
    attribute, value = key
    if attribute != "labels":
        return f"{COLUMN_SQL[attribute]} = :{param}", {param: value}
    label, _, label_value = value.partition("=")
    d = dialect_of(session)
    return f"{d.label(f'{param}_k')} = :{param}", {f"{param}_k": d.label_key(label), param: label_value}


def joint_counts(session: Session, where: EventFilter) -> JointCounts:
    """Events carrying both values, for every pair of the keys asked (one scan)."""

    def joint(keys: Sequence[AttributeValue]) -> dict[Pair, float]:
        ordered = sorted(set(keys))
        pairs = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
        if not pairs:
            return {}
        conditions: dict[AttributeValue, str] = {}
        params = dict(where.params)
        for index, key in enumerate(ordered):
            sql, values = _condition(session, key, f"v{index}")
            conditions[key] = sql
            params |= values
        sums = ", ".join(
            f"sum(CASE WHEN ({conditions[a]}) AND ({conditions[b]}) THEN {where.one} ELSE 0 END)"
            for a, b in pairs
        )
        row = session.execute(
            where.statement(f"SELECT {sums} FROM {where.source} WHERE {where.sql}"), params
        ).one()
        return {pair: float(n or 0) for pair, n in zip(pairs, row, strict=True)}

    return joint


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


SIGNATURE_SNAPSHOTS = "epidemiology_signature_snapshots"
SNAPSHOT = ", ".join(SNAPSHOT_COLUMNS)
# Signatures with at least this many events keep a stored sample (PostgreSQL; the refresh).
STORED_SAMPLE_EVENTS = 10_000


def signature_events_sql(session: Session, where: EventFilter, columns: str = SNAPSHOT) -> str:
    """`columns` of the events `where` selects (one signature's). PostgreSQL: through the
    covering index (index-only) plus its small complement of events too wide for it (migration
    0014); the conditions repeat the partial indexes' predicates so the planner can use them."""
    if not dialect_of(session).covering_sample_index:
        return f"SELECT {columns} FROM events WHERE {where.sql}"
    return (
        f"SELECT {columns} FROM events WHERE {where.sql} AND {SAMPLE_FITS} UNION ALL "
        f"SELECT {columns} FROM events WHERE {where.sql} AND NOT ({SAMPLE_FITS})"
    )


def _up_to(ids: Sequence[int], watermark: str) -> EventFilter:
    return EventFilter(
        f"signature_id IN :signature_ids AND id <= {watermark}",
        {"signature_ids": list(ids), "signature_ids_json": json.dumps(sorted(ids))},
        ["signature_ids"],
    )


CHECKED_SAMPLES = "epidemiology_stored_samples"  # session.info: samples checked, per transaction


@dataclass(frozen=True)
class StoredSample:
    signature_id: int
    computed_at: datetime  # with the signature, names the sample (stored_uptimes' cache)
    watermark: int
    daily: dict[date, int]
    inventory_version: str | None  # when the two below were counted
    inventory_events: int | None
    unrecorded_changes: int | None


# Per engine (one per process in production, one per test database in tests) and per stored
# sample: its uptimes, read once (a million values: 0.15-0.2 s a read at 10 M events) and kept
# while the refresh does not replace the sample, up to UPTIMES_KEPT values (8 bytes each).
UPTIMES_KEPT = 8_000_000
_UPTIMES: weakref.WeakKeyDictionary[Engine, OrderedDict[tuple[int, datetime], Ascending]] = (
    weakref.WeakKeyDictionary()
)


def stored_uptimes(session: Session, stored: StoredSample) -> Ascending:
    """The stored sample's uptimes, ascending (stored so, as doubles)."""
    kept = _UPTIMES.setdefault(session.get_bind().engine, OrderedDict())
    key = (stored.signature_id, stored.computed_at)
    if key in kept:
        kept.move_to_end(key)
        return kept[key]
    values = session.scalar(
        text("SELECT uptimes FROM epidemiology_samples WHERE signature_id = :s AND computed_at = :at"),
        {"s": stored.signature_id, "at": stored.computed_at},
    )
    uptimes = Ascending(map(float, values or ()))
    kept[key] = uptimes
    while sum(len(u) for u in kept.values()) > UPTIMES_KEPT and len(kept) > 1:
        kept.popitem(last=False)
    return uptimes


def stored_sample(session: Session, ids: Sequence[int]) -> StoredSample | None:
    """The signature's stored sample (PostgreSQL), if it still holds exactly the signature's
    events up to its watermark. An event that joined or left the signature since (moved,
    deleted, or committed late below the watermark) passed through the rollup queue: while
    its change is queued the sample is stale, and the fold that takes it deletes the sample
    (migration 0039's trigger). The archive takes events without queueing them, whole
    partitions from the oldest id up: the sample is stale once the oldest stored event lies
    above its first. Same merged signatures too. The events themselves never change (host
    snapshot, time and uptime), so their stored groups are what grouping them now would give.
    Checked once per transaction (and savepoint): a page reads the sample for its analysis
    and for its hosts."""
    checked = session.info.setdefault(CHECKED_SAMPLES, {})
    session.connection()  # the transaction begun, to key on
    key = (tuple(ids), session.get_transaction(), session.get_nested_transaction())
    if key not in checked:
        checked[key] = _valid_sample(session, ids)
    return checked[key]


# The queued (unfolded) changes that move an event into or out of the signatures
# (:signature_ids) at or below a watermark: their -1 and +1 rows do not cancel (a change of
# the event's other columns writes both under the same signature); a row without an event
# (queued before migration 0039) may be one.
QUEUED_MOVES = (
    "SELECT FROM rollup_changes AS c WHERE c.signature_id IN :signature_ids "
    "AND (c.event_id IS NULL OR c.event_id <= {watermark}) "
    "GROUP BY c.event_id, c.signature_id HAVING c.event_id IS NULL OR sum(c.delta) <> 0"
)


def moves_queued(session: Session, ids: Sequence[int], watermark: int) -> bool:
    """Whether changes of the signature's events at or below `watermark` wait in the rollup
    queue: a sample stored now would be taken for stale (they are in its snapshot, and in
    the queue), so it waits for the fold (every 30 s; the watermark is minutes old)."""
    upto = _up_to(ids, ":watermark")
    return bool(session.scalar(
        upto.statement(f"SELECT EXISTS ({QUEUED_MOVES.format(watermark=':watermark')})"),
        upto.params | {"watermark": watermark},
    ))


def _valid_sample(session: Session, ids: Sequence[int]) -> StoredSample | None:
    upto = _up_to(ids, "s.watermark")
    row = session.execute(
        upto.statement(
            "SELECT s.computed_at, s.watermark, s.daily, s.inventory_version, s.inventory_events, "
            "s.unrecorded_changes FROM epidemiology_samples AS s "
            "WHERE s.signature_id = :signature_id AND s.signature_ids = CAST(:signature_ids_json AS jsonb) "
            "AND (s.first_event_id IS NULL OR s.first_event_id >= (SELECT min(id) FROM events)) "
            f"AND NOT EXISTS ({QUEUED_MOVES.format(watermark='s.watermark')})"
        ),
        upto.params | {"signature_id": ids[0]},
    ).one_or_none()
    if row is None:
        return None
    daily = {date.fromisoformat(day): int(n) for day, n in row.daily.items()}
    return StoredSample(
        ids[0], row.computed_at, int(row.watermark), daily, row.inventory_version, row.inventory_events,
        row.unrecorded_changes,
    )


def top_values(
    session: Session, ids: Sequence[int], attribute: str, limit: int
) -> tuple[list[tuple[str, int]], int] | None:
    """The `limit` values of `attribute` most of the signature's events carry (most first, then
    by value) with their events, and how many values there are in all: from its stored sample's
    counts and the events since, not from every event. None when it has no valid stored sample
    (then the caller reads the events)."""
    stored = stored_sample(session, ids) if dialect_of(session).stored_samples else None
    if stored is None:
        return None
    column = COLUMN_SQL[attribute]
    since = EventFilter.signature(ids)
    kept = "epidemiology_sample_counts k WHERE k.signature_id = :sample_id AND k.attribute = :attribute"
    # A value outside the fresh events ranks no higher than among the stored counts: the top
    # values are among the stored top `limit` (an index range) and the fresh values.
    rows = session.execute(
        since.statement(
            f"WITH fresh AS (SELECT CAST({column} AS text) AS value, count(*) AS n FROM events "
            f"WHERE {since.sql} AND id > :watermark AND {column} IS NOT NULL GROUP BY {column}), "
            f"candidates AS ((SELECT k.value FROM {kept} ORDER BY k.n DESC, k.value LIMIT :limit) "
            "UNION SELECT value FROM fresh) "
            "SELECT c.value, coalesce(k.n, 0) + coalesce(f.n, 0) AS n, "
            f"(SELECT count(*) FROM {kept}) + (SELECT count(*) FROM fresh f "
            f"WHERE NOT EXISTS (SELECT 1 FROM {kept} AND k.value = f.value)) "
            "FROM candidates c LEFT JOIN epidemiology_sample_counts k ON k.signature_id = :sample_id "
            "AND k.attribute = :attribute AND k.value = c.value LEFT JOIN fresh f ON f.value = c.value "
            "ORDER BY n DESC, c.value LIMIT :limit"
        ),
        since.params
        | {"sample_id": ids[0], "attribute": attribute, "watermark": stored.watermark, "limit": limit},
    ).all()
    return [(str(value), int(n)) for value, n, _ in rows], (int(rows[0][2]) if rows else 0)


def store_sample(session: Session, ids: Sequence[int], watermark: int, when: datetime) -> None:
    """Keep the signature's events up to `watermark` (event id) grouped by host snapshot, with
    their ids, daily counts and uptimes (PostgreSQL). One statement, so all of it is read
    from one snapshot of the database."""
    session.execute(delete(EpidemiologySample).where(EpidemiologySample.signature_id == ids[0]))
    session.info.pop(CHECKED_SAMPLES, None)  # checked against the sample replaced here
    upto = _up_to(ids, ":watermark")
    events = signature_events_sql(session, upto, f"id, {SNAPSHOT}, crashed_at, uptime_s")
    day = "to_char(timezone('UTC', crashed_at), 'YYYY-MM-DD')"
    counts = _counts_sql(session, EventFilter("1 = 1", {}, table="e"))
    session.execute(
        upto.statement(
            f"WITH e AS MATERIALIZED ({events}), "
            "sample AS (INSERT INTO epidemiology_samples (signature_id, signature_ids, watermark, events, "
            "first_event_id, daily, uptimes, computed_at) "
            "SELECT :signature_id, CAST(:signature_ids_json AS jsonb), :watermark, count(*), min(id), "
            f"coalesce((SELECT jsonb_object_agg(d, n) FROM (SELECT {day} AS d, count(*) AS n FROM e "
            "GROUP BY 1) AS days), '{}'), "
            "coalesce(array_agg(uptime_s ORDER BY uptime_s) FILTER (WHERE uptime_s IS NOT NULL), '{}'), "
            ":when FROM e RETURNING signature_id), "
            "counted AS (INSERT INTO epidemiology_sample_counts (signature_id, attribute, value, n) "
            f"SELECT (SELECT signature_id FROM sample), attribute, value, n FROM ({counts}) AS c) "
            f"INSERT INTO epidemiology_sample_groups (signature_id, {SNAPSHOT}, n) "
            f"SELECT (SELECT signature_id FROM sample), {SNAPSHOT}, count(*) FROM e GROUP BY {SNAPSHOT}"
        ),
        upto.params | {"signature_id": ids[0], "watermark": watermark, "when": when},
    )
    version = inventory_version(session)  # read first: a change meanwhile only makes it stale
    groups = f"(SELECT {SNAPSHOT}, n FROM epidemiology_sample_groups WHERE signature_id = :signature_id)"
    known, unrecorded = session.execute(text(_inventory_sql(session, groups)), {"signature_id": ids[0]}).one()
    session.execute(
        update(EpidemiologySample)
        .where(EpidemiologySample.signature_id == ids[0])
        .values(inventory_version=version, inventory_events=int(known or 0),
                unrecorded_changes=int(unrecorded))
    )


@dataclass(frozen=True)
class Snapshots:
    """Where a signature's events grouped by host snapshot are read: the temporary table, or on
    a hot standby (which refuses temporary tables) the grouping query itself, run again by each
    read (a large signature's stored groups keep it short)."""

    source: str
    params: dict[str, Any]
    expanding: tuple[str, ...]

    def filtered(self, sql: str = "1 = 1", params: dict[str, Any] | None = None) -> EventFilter:
        return EventFilter(sql, self.params | (params or {}), self.expanding, table=self.source, weight="n")


def signature_sample(session: Session, ids: Sequence[int]) -> SignatureSample:
    """The signature's events grouped by host snapshot (same host, same attribute values); the
    per-value aggregates scan those groups (a few per host) instead of every event. A large
    signature's stored sample (PostgreSQL, kept by the refresh) stands for its events up to its
    watermark: only the events since are read, their counts added to the stored ones."""
    d = dialect_of(session)
    replica = on_replica(session)
    if not replica:
        session.execute(text(f"DROP TABLE IF EXISTS {SIGNATURE_SNAPSHOTS}"))
    stored = stored_sample(session, ids) if d.stored_samples else None
    read, kept = EventFilter.signature(ids), ""
    if stored is not None:
        read = EventFilter(
            f"{read.sql} AND id > :watermark", read.params | {"watermark": stored.watermark}, read.expanding
        )
        kept = (
            f"SELECT {SNAPSHOT}, n FROM epidemiology_sample_groups WHERE signature_id = :sample_id UNION ALL "
        )
    events_read = signature_events_sql(session, read)
    since = f"SELECT {SNAPSHOT}, count(*) AS n FROM ({events_read}) AS signature_events "
    grouping = f"{kept}{since}GROUP BY {SNAPSHOT}"
    if replica or stored is not None:  # read where used (the stored groups keep it short)
        snapshots = Snapshots(f"({grouping})", read.params | {"sample_id": ids[0]}, read.expanding)
    else:
        for setting in d.one_worker:
            session.execute(text(setting))
        session.execute(
            read.statement(f"CREATE TEMPORARY TABLE {SIGNATURE_SNAPSHOTS} AS {grouping}"),
            read.params | {"sample_id": ids[0]},
        )
        for setting in d.any_workers:
            session.execute(text(setting))
        snapshots = Snapshots(SIGNATURE_SNAPSHOTS, {}, ())
    grouped = snapshots.filtered()
    daily, uptimes = _daily_and_uptimes(session, read)
    fresh = sum(daily.values())
    if stored is not None:
        for day, n in stored.daily.items():
            daily[day] = daily.get(day, 0) + n
        ordered = with_added(stored_uptimes(session, stored), map(float, uptimes))
    else:
        ordered = Ascending(sorted(map(float, uptimes)))
    events = sum(daily.values())
    # In a large signature, values seen once or twice, and hosts with no more than twice an
    # average host's share, can never be findings: not worth counting (nor asking the fleet).
    least, least_per_host = 1, 1
    if events >= LARGE_SIGNATURE:
        fleet_hosts = session.scalar(select(func.count()).select_from(Host)) or 1
        least, least_per_host = MIN_SUPPORT, max(MIN_SUPPORT, math.ceil(2 * events / fleet_hosts))
    hosts, top_host_events, hostnames = _per_host(session, grouped)
    if stored is None:
        counts = value_counts(session, grouped, least, least_per_host)
    else:
        since_groups = Snapshots(f"({since}GROUP BY {SNAPSHOT})", read.params, read.expanding)
        since_sample = since_groups.filtered()
        counts, per_physical = _stored_counts(session, ids[0], fresh, least, least_per_host)
        for key, n in value_counts(session, since_sample).items():
            added = per_physical if key[0] == "physical_host" else counts
            added[key] = added.get(key, 0) + n
        counts = {
            key: n for key, n in counts.items() if n >= (least_per_host if key[0] == "hostname" else least)
        } | {key: n for key, n in per_physical.items() if n >= least}
    version = inventory_version(session)
    if stored is not None and version is not None and stored.inventory_version == version:
        # the stored events weigh what they weighed then against the same inventory
        fresh_known, fresh_unrecorded = session.execute(
            since_sample.statement(_inventory_sql(session, since_groups.source)),
            since_sample.params,
        ).one()
        known = (stored.inventory_events or 0) + (fresh_known or 0)
        unrecorded = (stored.unrecorded_changes or 0) + (fresh_unrecorded or 0)
    else:
        known, unrecorded = session.execute(
            grouped.statement(_inventory_sql(session, snapshots.source)), grouped.params
        ).one()
    by_attribute: dict[str, int] = {}
    if unrecorded and unrecorded >= MAX_UNRECORDED_SHARE * events:  # which values the snapshot is wrong about
        unrecorded_sql = _unrecorded_sql(session, snapshots.source)
        row = session.execute(grouped.statement(unrecorded_sql), grouped.params).one()
        by_attribute = {name: int(n) for name, n in zip(CHANGING_SCALARS, row, strict=True) if n}
    return SignatureSample(
        events=events,
        counts=counts,
        hosts=int(hosts or 0),
        top_host_events=int(top_host_events or 0),
        daily=daily,
        joint=joint_counts(session, grouped),
        uptimes_s=ordered,
        hostnames=int(hostnames or 0),
        inventory_events=int(known or 0),
        unrecorded_changes=int(unrecorded or 0),
        unrecorded_by_attribute=by_attribute,
        split=_splitter(session, ids, (), snapshots),
    )


def _stored_counts(
    session: Session, sample_id: int, fresh: int, least: int, least_per_host: int
) -> tuple[dict[AttributeValue, int], dict[AttributeValue, int]]:
    """A stored sample's counts of the values that may reach `least` (`least_per_host` for
    hostnames) with the `fresh` events since, and of every physical host (the distinct count)."""
    rows = session.execute(
        text(
            "SELECT attribute, value, n FROM epidemiology_sample_counts WHERE signature_id = :sample_id "
            "AND (attribute = 'physical_host' OR n >= CASE WHEN attribute = 'hostname' "
            "THEN :least_per_host ELSE :least END)"
        ),
        {"sample_id": sample_id, "least": least - fresh, "least_per_host": least_per_host - fresh},
    )
    counts: dict[AttributeValue, int] = {}
    per_physical: dict[AttributeValue, int] = {}
    for attribute, value, n in rows:
        (per_physical if attribute == "physical_host" else counts)[(attribute, value)] = int(n)
    return counts, per_physical


def inventory_version(session: Session) -> str | None:
    """The inventory's rows' version (the dialect's `inventory_version`; None: none known)."""
    sql = dialect_of(session).inventory_version
    return None if sql is None else repr(tuple(session.execute(text(sql)).one()))


# A grouped event's inventory host, known and without attribute history (a snapshot).
SNAPSHOT_HOST = "h.in_inventory AND h.id NOT IN (SELECT host_id FROM host_attribute_changes)"


def _inventory_sql(session: Session, snapshots: str) -> str:
    """Of the grouped events: those on hosts the inventory knows, and those whose inventory host
    (without attribute history) now shows other changing values than the event carried (see
    `analysis.unrecorded_changes`). One scan of the groups."""
    distinct = dialect_of(session).is_distinct_from
    differs = " OR ".join(f"s.{name} {distinct} h.{name}" for name in CHANGING_SCALARS)
    return (
        "SELECT sum(CASE WHEN h.in_inventory THEN s.n END), "
        f"coalesce(sum(CASE WHEN {SNAPSHOT_HOST} AND ({differs}) THEN s.n ELSE 0 END), 0) "
        f"FROM {snapshots} s JOIN hosts h ON h.id = s.host_id"
    )


def _unrecorded_sql(session: Session, snapshots: str) -> str:
    """Of the grouped events, per changing attribute (CHANGING_SCALARS, in order): those whose
    snapshot inventory host shows another value of it than the event carried."""
    distinct = dialect_of(session).is_distinct_from
    return "SELECT " + ", ".join(
        f"coalesce(sum(CASE WHEN {SNAPSHOT_HOST} AND s.{name} {distinct} h.{name} THEN s.n ELSE 0 END), 0)"
        for name in CHANGING_SCALARS
    ) + f" FROM {snapshots} s JOIN hosts h ON h.id = s.host_id"


def _per_host(session: Session, grouped: EventFilter) -> Any:
    """(distinct physical hosts, events on the busiest one, distinct hosts) of grouped events."""
    return session.execute(
        grouped.statement(
            f"SELECT count(*), max(n), sum(hosts) FROM (SELECT {PHYSICAL} AS p, {grouped.count} AS n, "
            f"count(DISTINCT host_id) AS hosts FROM {grouped.source} WHERE {grouped.sql} "
            f"GROUP BY {PHYSICAL}) AS per_host"
        ),
        grouped.params,
    ).one()


Part = tuple[AttributeValue, bool]  # a value, and whether the part's events carry it


def _splitter(session: Session, ids: Sequence[int], parts: Sequence[Part], snapshots: Snapshots) -> Any:
    def split(key: AttributeValue) -> tuple[SignatureSample, SignatureSample]:
        return (
            sample_part(session, ids, [*parts, (key, True)], snapshots),
            sample_part(session, ids, [*parts, (key, False)], snapshots),
        )

    return split


def sample_part(
    session: Session, ids: Sequence[int], parts: Sequence[Part], snapshots: Snapshots
) -> SignatureSample:
    """The part of the signature's events that carries (or not) each value of `parts`: a
    mixture's concentrated component and what remains. Counts from the signature's grouped
    events (the temporary table `signature_sample` made), days and uptimes from its events."""
    conditions, params = [], {}
    for index, (key, inside) in enumerate(parts):
        sql, values = _condition(session, key, f"part{index}")
        conditions.append(f"(CASE WHEN {sql} THEN 1 ELSE 0 END) = {1 if inside else 0}")
        params |= values
    where = " AND ".join(conditions)
    grouped = snapshots.filtered(where, params)
    signature = EventFilter.signature(ids)
    events = EventFilter(f"{signature.sql} AND {where}", signature.params | params, signature.expanding)
    daily, uptimes = _daily_and_uptimes(session, events)
    per_host = _per_host(session, grouped)
    return SignatureSample(
        events=sum(daily.values()),
        counts=value_counts(session, grouped),
        hosts=int(per_host[0] or 0),
        top_host_events=int(per_host[1] or 0),
        hostnames=int(per_host[2] or 0),
        daily=daily,
        joint=joint_counts(session, grouped),
        uptimes_s=Ascending(sorted(map(float, uptimes))),
        split=_splitter(session, ids, parts, snapshots),
    )


def case_control_baseline(
    session: Session, start: datetime, end: datetime, min_uptime_s: float | None, hosts: Sequence[int] | None
) -> Baseline | None:
    """The crashes of [start, end) (on `hosts`, at uptimes of at least `min_uptime_s`), every
    signature's: the case-control baseline, with the values the events carried at crash time."""
    d = dialect_of(session)
    sql = "crashed_at >= :ws AND crashed_at < :we"
    params: dict[str, Any] = {"ws": d.moment(start), "we": d.moment(end)}
    if min_uptime_s is not None:
        sql += " AND uptime_s >= :min_uptime"
        params["min_uptime"] = math.floor(min_uptime_s)
    if hosts is not None:
        sql += f" AND host_id IN {d.id_list('population')}"
        params["population"] = json.dumps(sorted(hosts))
    where = EventFilter(sql, params)
    total = session.scalar(where.statement(f"SELECT count(*) FROM events WHERE {where.sql}"), where.params)
    if not total:
        return None
    return crash_baseline(value_counts(session, where), int(total), joint_counts(session, where))


def signature_programs(session: Session, ids: Sequence[int]) -> list[str]:
    """The executables the signature's userspace reports name (one, as a rule)."""
    where = EventFilter.signature(ids)
    rows = session.execute(
        where.statement(
            f"SELECT DISTINCT {dialect_of(session).payload_executable('r')} FROM reports r "
            "JOIN events e ON e.id = r.event_id "
            "WHERE e.signature_id IN :signature_ids AND r.source = 'userspace' LIMIT 20"
        ),
        where.params,
    )
    return sorted(str(value) for (value,) in rows if value)


def program_crashes(
    session: Session, executables: Sequence[str], start: datetime, end: datetime
) -> list[tuple[int | None, str | None, datetime | None, int | None]]:
    """The program's userspace events crashed in [start, end): (signature, program version,
    process start, process uptime), the event attributes ingest took from the reports' stacks."""
    d = dialect_of(session)
    statement = (
        text(
            "SELECT DISTINCT e.id, e.signature_id, e.program_version, e.process_started_at, "
            "e.process_uptime_s FROM events e JOIN reports r ON r.event_id = e.id "
            f"WHERE r.source = 'userspace' AND {d.payload_executable('r')} IN :executables "
            "AND e.crashed_at >= :start AND e.crashed_at < :end"
        )
        .bindparams(bindparam("executables", expanding=True))
        .columns(Event.id, Event.signature_id, Event.program_version, Event.process_started_at,
                 Event.process_uptime_s)
    )
    rows = session.execute(statement, {"executables": list(executables), "start": start, "end": end})
    return [(row[1], row[2], row[3], row[4]) for row in rows]


def program_hosts(session: Session, executables: Sequence[str], label: str | None) -> tuple[list[int], str]:
    """The hosts running a program, and how that is known: the inventory label `label` naming
    it (its value is the executable's file name), else hosts that reported crashes of it."""
    names = sorted({e.rsplit("/", 1)[-1] for e in executables})
    d = dialect_of(session)
    if label:
        params: dict[str, Any] = {"label": d.label_key(label)}
        statement = text(f"SELECT id FROM hosts WHERE {d.label('label')} IN :names").bindparams(
            bindparam("names", expanding=True)
        )
        found = list(session.scalars(statement, params | {"names": names}))
        if found:
            return found, f"the inventory label {label}={','.join(names)}"
    statement = text(
        f"SELECT DISTINCT e.host_id FROM reports r JOIN events e ON e.id = r.event_id "
        f"WHERE r.source = 'userspace' AND {d.payload_executable('r')} IN :executables"
    ).bindparams(bindparam("executables", expanding=True))
    return list(
        session.scalars(statement, {"executables": list(executables)})
    ), "crash reports of the same program"


def _daily_and_uptimes(session: Session, where: EventFilter) -> tuple[dict[date, int], list[Any]]:
    """Events per UTC day and the events' uptimes. PostgreSQL: one read, the uptimes as one
    array per day (a row per value costs more than the query when a signature has 100,000
    events)."""
    day = dialect_of(session).utc_day("crashed_at")
    if dialect_of(session).arrays:
        rows = session.execute(
            where.statement(
                f"SELECT {day}, count(*), array_agg(uptime_s) FILTER (WHERE uptime_s IS NOT NULL) "
                f"FROM ({signature_events_sql(session, where, 'crashed_at, uptime_s')}) AS events "
                f"GROUP BY {day}"
            ),
            where.params,
        )
        daily, uptimes = {}, []
        for d, n, values in rows:
            daily[_as_date(d)] = int(n)
            uptimes.extend(values or ())
        return daily, uptimes
    daily = {
        _as_date(d): int(n)
        for d, n in session.execute(
            where.statement(f"SELECT {day}, count(*) FROM {where.source} WHERE {where.sql} GROUP BY {day}"),
            where.params,
        )
    }
    rows = f"FROM {where.source} WHERE {where.sql} AND uptime_s IS NOT NULL"
    return daily, list(session.scalars(where.statement(f"SELECT uptime_s {rows}"), where.params))


def uptime_hours(session: Session) -> dict[int, int]:
    """All crashes' uptimes as an hourly histogram (one scan, a few thousand rows back)."""
    hour = dialect_of(session).whole_hours("uptime_s")
    rows = session.execute(
        text(f"SELECT {hour} AS h, count(*) FROM events WHERE uptime_s IS NOT NULL GROUP BY {hour}")
    )
    return {int(h): int(n) for h, n in rows}


def observation_window(session: Session) -> tuple[date, date] | None:
    """The fleet's first and last crash day; crash times stored before ingest refused
    implausible ones (year 1, year 9999) would make it millions of days long."""
    first, last = session.execute(
        select(func.min(Event.crashed_at), func.max(Event.crashed_at)).where(
            Event.crashed_at.between(EARLIEST_CRASH, latest_crash())
        )
    ).one()
    if first is None:
        return None
    return first.date(), last.date()


def hosts_per_physical(session: Session) -> dict[str, int]:
    """Hosts (VMs or bare metal) carried by each physical host: every host the registry
    knows, from the inventory or from crash reports."""
    physical = func.coalesce(Host.physical_host, Host.hostname)
    return {
        p: int(n)
        for p, n in session.execute(
            select(physical, func.count()).where(Host.retired_at.is_(None)).group_by(physical)
        )
    }


def host_signature_counts(session: Session) -> list[HostSignatureCount]:
    """Per physical host and signature: events, distinct hosts, first and last crash."""
    physical = func.coalesce(Event.physical_host, Event.hostname)
    rows = session.execute(
        select(
            physical,
            Event.signature_id,
            func.count(),
            func.count(distinct(Event.hostname)),
            func.min(plausible(Event.crashed_at)),
            func.max(plausible(Event.crashed_at)),
        )
        .where(Event.signature_id.is_not(None))
        .group_by(physical, Event.signature_id)
    )
    return [
        HostSignatureCount(p, str(signature), int(n), int(hosts), first, last)
        for p, signature, n, hosts, first, last in rows
    ]
