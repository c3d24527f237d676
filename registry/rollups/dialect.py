"""SQL that differs between the two databases, shared by the fold, the builds and the reads."""

from __future__ import annotations

from collections.abc import Callable

# A UTC day, as each database keeps it in a Date column.
DAY: dict[str, Callable[[str], str]] = {
    "postgresql": lambda column: f"({column} AT TIME ZONE 'UTC')::date",
    "sqlite": lambda column: f"date({column})",
}
# A capture's duration as `rpt_capture_daily` shows it (migration 0012): on PostgreSQL the top of
# its log-scale bucket 5% wide (percentiles read from it are within 5%); on SQLite exact.
DURATION: dict[str, Callable[[str], str]] = {
    "postgresql": lambda column: (
        f"CASE WHEN {column} > 0 THEN round(exp((floor(ln({column}) / ln(1.05)) + 1) "
        f"* ln(1.05))::numeric, 1)::float8 ELSE {column} END"
    ),
    "sqlite": lambda column: column,
}
