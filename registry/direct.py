"""Hot-path statements run on the DBAPI cursor, compiled once per dialect and parameter set.

`Connection.execute` costs 0.15-0.9 ms of CPU a statement on the ingest path (compiled-cache
lookup, execution context, result metadata from `cursor.description`, row objects): more than
the driver's own work, five times a report, and in a crash storm that CPU is the latency
(docs/scaling.md). A DirectStatement keeps what matters of SQLAlchemy and skips the rest:

- the SQL is SQLAlchemy's compilation of a Core statement for the connection's dialect;
- values go through the column types' bind processors, Python-side column defaults are
  filled in as SQLAlchemy fills them, results through the types' result processors;
- it runs on the connection's transaction through `Connection._cursor_execute` (SQLAlchemy's
  own primitive for statements it runs outside an execution context), so cursor events fire,
  errors are SQLAlchemy's exceptions and a lost connection invalidates the pool as usual.
  `_cursor_execute` and `_handle_dbapi_exception` are private: pyproject.toml bounds
  SQLAlchemy to the minor version tested, and tests/registry/test_direct.py fails by name when
  either changes.

Not supported (refused when compiled): expanding IN lists, literal-execute parameters and
defaults that are SQL expressions or sequences.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import RawCursor
from sqlalchemy import Connection, Executable
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    fixed: dict[str, Any]  # the values of binds the parameters do not give (literals; None)
    computed: tuple[tuple[str, Callable[[], Any]], ...]  # binds whose value a callable gives each run
    defaults: tuple[tuple[str, Any, bool], ...]  # bind name, default, whether it is a callable
    bind_processors: dict[str, Processor]
    positions: tuple[str, ...] | None  # bind names in order, for positional paramstyles
    raw: bool  # psycopg: the SQL has PostgreSQL's own $n placeholders, run on a RawCursor
    returns_rows: bool
    # (column index, processor) of the columns that have one; empty: rows as the driver gives them
    result_processors: tuple[tuple[int, Processor], ...]


class DirectStatement:
    """A Core statement (SELECT, or DML with or without RETURNING) executed without
    SQLAlchemy's per-execution machinery; rows come back as tuples in the statement's column
    order (`keys`)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self.result_columns = _result_columns(statement)
        self.keys = tuple(name for name, _ in self.result_columns)
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled] = {}

    def execute(self, connection: Connection, parameters: dict[str, Any]) -> list[tuple[Any, ...]]:
        dialect = connection.dialect
        key = (dialect.name, frozenset(parameters))
        compiled = self._compiled.get(key) or self._compile(dialect, key)
        values = compiled.fixed | parameters
        for name, compute in compiled.computed:
            values[name] = compute()
        for name, default, is_callable in compiled.defaults:
            values[name] = default(None) if is_callable else default
        for name, process in compiled.bind_processors.items():
            values[name] = process(values[name])
        bound: Any = values if compiled.positions is None else [values[name] for name in compiled.positions]
        dbapi = connection.connection
        cursor = _kept_raw_cursor(dbapi) if compiled.raw else dbapi.cursor()
        try:
            connection._cursor_execute(cursor, compiled.sql, bound)
            if not compiled.returns_rows:
                return []
            try:
                rows = cursor.fetchall()
            except Exception as error:  # a fetch fails like an execute: SQLAlchemy's exception
                connection._handle_dbapi_exception(error, compiled.sql, bound, cursor, None)
        finally:
            if not compiled.raw:
                cursor.close()
        if compiled.result_processors:
            return [_processed(row, compiled.result_processors) for row in rows]
        return rows

    def scalar(self, connection: Connection, parameters: dict[str, Any]) -> Any | None:
        """The first row's first value (None: no row, e.g. ON CONFLICT DO NOTHING skipped it)."""
        rows = self.execute(connection, parameters)
        return rows[0][0] if rows else None

    def mappings(self, connection: Connection, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(zip(self.keys, row, strict=True)) for row in self.execute(connection, parameters)]

    def _compile(self, dialect: Dialect, key: tuple[str, frozenset[str]]) -> _Compiled:
        compiled = self.statement.compile(dialect=dialect, column_keys=sorted(key[1]))
        assert isinstance(compiled, SQLCompiler)
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("DirectStatement cannot expand IN lists or literal-execute parameters")
        defaults = []
        # As SQLAlchemy fills them: an INSERT's column defaults, else an UPDATE's onupdate ones.
        for column in compiled.insert_prefetch or compiled.update_prefetch:
            default = column.default if compiled.insert_prefetch else column.onupdate
            if default is None or not (default.is_scalar or default.is_callable):
                raise ValueError(f"DirectStatement cannot compute the default of {column}")
            defaults.append((column.key, default.arg, default.is_callable))  # type: ignore[attr-defined]
        if compiled.escaped_bind_names:
            raise ValueError("DirectStatement needs bind names the driver takes as they are")
        # The names a statement's values carry: its parameters' and its defaults'. SQLAlchemy's
        # construct_params, once: what it fills in besides the parameters is the same every time,
        # but for a bind whose value a callable gives (`bindparam(callable_=...)`, e.g. a bound
        # computed from the clock), called on each run as SQLAlchemy calls it on each execution.
        constructed = compiled.construct_params(dict.fromkeys(key[1]), escape_names=False)
        computed = tuple(
            (name, bind.callable)
            for name, bind in compiled.binds.items()
            if bind.callable is not None and name in constructed and name not in key[1]
        )
        fixed = {name: value for name, value in constructed.items() if name not in key[1]}
        names = {*constructed, *(name for name, _, _ in defaults)}
        bind_processors = {}
        for name, bind in compiled.binds.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None and name in names:
                bind_processors[name] = process
        result = tuple(
            (index, process)
            for index, (_, type_) in enumerate(self.result_columns)
            if (process := type_.dialect_impl(dialect).result_processor(dialect, None)) is not None
        )
        sql, positions = compiled.string, tuple(compiled.positiontup or ()) if dialect.positional else None
        raw = dialect.driver == "psycopg" and not dialect.positional
        if raw:
            sql, positions = _numbered(sql)
        entry = _Compiled(
            sql=sql,
            fixed=fixed,
            computed=computed,
            defaults=tuple(defaults),
            bind_processors=bind_processors,
            positions=positions,
            raw=raw,
            returns_rows=bool(self.result_columns),
            result_processors=result,
        )
        self._compiled[key] = entry
        return entry


def _kept_raw_cursor(dbapi: Any) -> RawCursor[Any]:
    """psycopg: one RawCursor kept with each pooled connection (in the pool's info on it) and
    reused by every statement: a cursor made per statement costs ~10 us on ingest's path."""
    driver = dbapi.driver_connection
    cursor = dbapi.info.get("direct_cursor")
    if cursor is None or cursor.closed or cursor.connection is not driver:
        cursor = dbapi.info["direct_cursor"] = RawCursor(driver)
    return cursor  # type: ignore[no-any-return]


_PYFORMAT = re.compile(r"%\(([^)]+)\)s|%%")


def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """pyformat SQL (`%(name)s`, `%%`) as PostgreSQL's own (`$1`, `%`), and the bind names in
    $n order. psycopg otherwise parses a statement's placeholders at every execution once it
    is past 4,096 characters or 50 parameters (its cache's bounds): ingest's one write is both."""
    names: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "%"
        return f"${names.setdefault(match.group(1), len(names) + 1)}"

    return _PYFORMAT.sub(number, sql), tuple(names)


def _result_columns(statement: Executable) -> tuple[tuple[str, Any], ...]:
    """(key, type) of each column the statement returns, in order; () for DML without RETURNING."""
    selected = getattr(statement, "selected_columns", None)
    if selected is not None and not getattr(statement, "is_dml", False):
        return tuple((column.key, column.type) for column in selected)
    described = getattr(statement, "returning_column_descriptions", None) or ()
    return tuple((entry["name"], entry["type"]) for entry in described)


def _processed(row: Sequence[Any], processors: tuple[tuple[int, Processor], ...]) -> tuple[Any, ...]:
    """The row with its processed columns processed: ingest's read has 7 of its 46."""
    values = list(row)
    for index, process in processors:
        values[index] = process(values[index])
    return tuple(values)
