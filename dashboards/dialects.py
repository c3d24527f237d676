"""The two data sources the dashboards are rendered for, and their SQL differences.

PostgreSQL (Grafana's core `grafana-postgresql-datasource`) takes `rawSql` with Grafana's
macros (`$__timeFilter`, `$__timeGroupAlias`). SQLite, the embedded default, goes through
the frser-sqlite-datasource plugin: `rawQueryText`/`queryText`, `queryType`, the names of
the columns to read as time (`timeColumns`), times as epoch seconds, and its own
`$__timeFilter` macro. Everything else in the panels is portable SQL over the `rpt_*` views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dashboards.model import Query

POSTGRES_DATASOURCE_UID = "crashreg-postgres"
SQLITE_DATASOURCE_UID = "crashreg-sqlite"
DAY_S = 86400
WEEK_S = 7 * DAY_S


@dataclass(frozen=True)
class Dialect:
    name: str
    datasource: dict[str, str]

    @property
    def is_postgres(self) -> bool:
        return self.name == "postgresql"

    def time_filter(self, column: str) -> str:
        return f"$__timeFilter({column})"

    def bucket(self, column: str, seconds: int) -> str:
        """The start of the `seconds`-wide bucket of `column`, as the `time` column."""
        if self.is_postgres:
            return f"$__timeGroupAlias({column}, '{_interval(seconds)}')"
        # Not $__unixEpochGroupSeconds: the plugin's macro regex stops at the first ")", so
        # it cannot take strftime(...) as its column; this is the SQL it would expand to.
        return f"CAST(strftime('%s', {column}) AS INTEGER) / {seconds} * {seconds} AS time"

    def day(self, column: str) -> str:
        return self.bucket(column, DAY_S)

    def week(self, column: str) -> str:
        return self.bucket(column, WEEK_S)

    def ts(self, expression: str) -> str:
        """A timestamp to show in a table: itself, or epoch seconds for the SQLite plugin."""
        if self.is_postgres:
            return expression
        return f"CAST(strftime('%s', {expression}) AS INTEGER)"

    def days_between(self, start: str, end: str) -> str:
        if self.is_postgres:
            return f"(EXTRACT(EPOCH FROM ({end} - {start})) / 86400.0)"
        return f"(julianday({end}) - julianday({start}))"

    def days_since(self, start: str) -> str:
        return self.days_between(start, "now()" if self.is_postgres else "'now'")

    # -- alert rules: "now" is the end of the query's time range (the evaluation time) ------

    def range_end_epoch(self) -> str:
        """The evaluation time in epoch seconds, as each data source's backend expands it."""
        return "$__unixEpochTo()" if self.is_postgres else "($__to / 1000)"

    def range_start_epoch(self) -> str:
        """The start of the query's time range in epoch seconds (whole seconds on both)."""
        return "$__unixEpochFrom()" if self.is_postgres else "($__from / 1000)"

    def now_epoch(self) -> str:
        """The database's now in epoch seconds."""
        return "EXTRACT(EPOCH FROM now())" if self.is_postgres else "CAST(strftime('%s', 'now') AS INTEGER)"

    def range_days_epochs(self) -> tuple[str, str]:
        """The time range as the daily panels count it (whole UTC days whose start lies in it,
        `$__timeFilter(day)`), in epoch seconds: the first such day's midnight, and the end of
        the last such day or now, whichever is earlier."""
        start = f"((CAST({self.range_start_epoch()} AS BIGINT) + {DAY_S - 1}) / {DAY_S} * {DAY_S})"
        end = f"(CAST({self.range_end_epoch()} AS BIGINT) / {DAY_S} * {DAY_S} + {DAY_S})"
        least = "LEAST" if self.is_postgres else "min"
        return start, f"{least}({end}, {self.now_epoch()})"

    def epoch_to_time(self, epoch: str) -> str:
        """Epoch seconds as a value comparable with the views' timestamps."""
        if self.is_postgres:
            return f"to_timestamp({epoch})"
        return f"datetime({epoch}, 'unixepoch')"

    def seconds_before_end(self, seconds: float) -> str:
        """The moment `seconds` before the evaluation time."""
        return self.epoch_to_time(f"{self.range_end_epoch()} - {seconds:g}")

    def day_start(self, column: str) -> str:
        """Midnight UTC of `column`'s day, as the daily rollups write `day`."""
        if self.is_postgres:
            return f"(date_trunc('day', {column} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')"
        return f"date({column})"

    def epoch(self, column: str) -> str:
        if self.is_postgres:
            return f"EXTRACT(EPOCH FROM {column})"
        return f"CAST(strftime('%s', {column}) AS INTEGER)"

    def signature_variable_query(self) -> str:
        """Signatures, most recent first: PostgreSQL shows titles, the plugin takes one column."""
        if self.is_postgres:
            return (
                "SELECT signature_id AS __value, title || ' (#' || signature_id || ')' AS __text "
                "FROM rpt_signatures ORDER BY last_seen DESC NULLS LAST LIMIT 500"
            )
        return "SELECT signature_id FROM rpt_signatures ORDER BY last_seen DESC LIMIT 500"

    def target(self, ref_id: str, query: Query) -> dict[str, Any]:
        if self.is_postgres:
            return {
                "refId": ref_id,
                "datasource": self.datasource,
                "editorMode": "code",
                "rawQuery": True,
                "format": "table" if query.table else "time_series",
                "rawSql": query.sql,
            }
        return {
            "refId": ref_id,
            "datasource": self.datasource,
            "queryType": "table" if query.table else "time series",
            "rawQueryText": query.sql,
            "queryText": query.sql,
            "timeColumns": list(query.time_columns),
        }


def _interval(seconds: int) -> str:
    for unit, size in (("w", WEEK_S), ("d", DAY_S), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


POSTGRESQL = Dialect("postgresql", {"type": "grafana-postgresql-datasource", "uid": POSTGRES_DATASOURCE_UID})
SQLITE = Dialect("sqlite", {"type": "frser-sqlite-datasource", "uid": SQLITE_DATASOURCE_UID})
DIALECTS = {dialect.name: dialect for dialect in (POSTGRESQL, SQLITE)}
