"""The SQL that differs between PostgreSQL and SQLite in epidemiology, in one place.

One `Dialect` per database, chosen from the engine's dialect name (`dialect_of`); the queries
ask it for the expressions that differ and for what the database can do (GROUPING SETS, arrays,
the stored samples' tables), instead of branching on the database themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from registry.db import dialect_name


@dataclass(frozen=True)
class Dialect:
    name: str

    @property
    def postgresql(self) -> bool:
        return self.name == "postgresql"

    # -- what the database can do ---------------------------------------------------------

    @property
    def grouping_sets(self) -> bool:
        """GROUP BY GROUPING SETS: counts per value of every attribute in one pass (SQLite: one
        GROUP BY per attribute in a UNION ALL)."""
        return self.postgresql

    @property
    def arrays(self) -> bool:
        """array_agg: a signature's uptimes come back as one array per day, in the same read as
        its daily counts (a row per value costs more than the query at 100,000 events)."""
        return self.postgresql

    @property
    def stored_samples(self) -> bool:
        """Large signatures keep a stored sample (epidemiology_samples: jsonb and arrays)."""
        return self.postgresql

    @property
    def covering_sample_index(self) -> bool:
        """A signature's events are read through the covering partial index of migration 0014
        (and its small complement of events too wide for it)."""
        return self.postgresql

    @property
    def inventory_version(self) -> str | None:
        """A query whose row changes whenever the inventory's rows do (then the loaded inventory
        is stale; None: no such query, load it every time). PostgreSQL: every insert or update
        gives a row a new, higher transaction id (xmin; freezing keeps it), a delete lowers
        the count; the attribute history is appended to."""
        if not self.postgresql:
            return None
        return (
            "SELECT count(*), sum(xmin::text::bigint), max(xmin::text::bigint), "
            "(SELECT count(*) FROM host_attribute_changes), (SELECT max(id) FROM host_attribute_changes) "
            "FROM hosts WHERE in_inventory"
        )

    @property
    def analytic_settings(self) -> tuple[str, ...]:
        """Transaction-local settings for analytic queries: no JIT (compiling costs more than
        these queries run) and room to aggregate in memory."""
        return ("SET LOCAL jit = off", "SET LOCAL work_mem = '64MB'") if self.postgresql else ()

    @property
    def one_worker(self) -> tuple[str, ...]:
        """Before grouping a signature's events by host snapshot: a host's events fall to every
        parallel worker, and merging their groups costs more than it saves."""
        return ("SET LOCAL max_parallel_workers_per_gather = 0",) if self.postgresql else ()

    @property
    def any_workers(self) -> tuple[str, ...]:
        """Undoes `one_worker`."""
        return ("SET LOCAL max_parallel_workers_per_gather TO DEFAULT",) if self.postgresql else ()

    # -- expressions ------------------------------------------------------------------------

    def utc_day(self, column: str) -> str:
        """The UTC date of a timestamp column."""
        return f"date(timezone('UTC', {column}))" if self.postgresql else f"date({column})"

    def labels(self, alias: str) -> str:
        """Joins each label of `<alias>.labels` as `l(key, value)`."""
        if self.postgresql:
            return f"CROSS JOIN LATERAL jsonb_each_text({alias}.labels) AS l(key, value)"
        return f", json_each({alias}.labels) AS l"

    def label(self, key_param: str) -> str:
        """The value of the label whose key `label_key()` binds to `key_param`."""
        if self.postgresql:
            return f"labels ->> :{key_param}"
        return f"json_extract(labels, :{key_param})"

    def label_key(self, key: str) -> str:
        """What `label()` binds for the label `key`."""
        return key if self.postgresql else f'$."{key}"'

    def payload_executable(self, alias: str) -> str:
        """The executable a userspace report's payload names."""
        if self.postgresql:
            return f"{alias}.payload -> 'stack' ->> 'executable'"
        return f"json_extract({alias}.payload, '$.stack.executable')"

    @property
    def is_distinct_from(self) -> str:
        return "IS DISTINCT FROM" if self.postgresql else "IS NOT"

    def whole_hours(self, seconds: str) -> str:
        return f"{seconds} / 3600" if self.postgresql else f"CAST({seconds} / 3600 AS INTEGER)"

    def id_list(self, param: str) -> str:
        """A subquery of the integers in the JSON list bound to `param` (one bind, any length)."""
        if self.postgresql:
            return f"(SELECT CAST(jsonb_array_elements_text(CAST(:{param} AS jsonb)) AS integer))"
        return f"(SELECT value FROM json_each(:{param}))"

    def moment(self, value: datetime) -> Any:
        """A bind value comparable with stored timestamps."""
        if self.postgresql:
            return value
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


POSTGRESQL = Dialect("postgresql")
SQLITE = Dialect("sqlite")
DIALECTS = {dialect.name: dialect for dialect in (POSTGRESQL, SQLITE)}


def dialect_of(session: Session) -> Dialect:
    return DIALECTS[dialect_name(session)]
