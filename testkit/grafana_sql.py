"""Expand dashboard SQL the way Grafana 11 does before it reaches the database.

Two stages, as in Grafana:

1. The frontend's template service replaces variables (`$var`, `${var}`, `${var:fmt}`,
   `[[var]]`, built-ins such as `$__from`), formatting values with the data source's
   `interpolateVariable` (PostgreSQL: SqlDatasource — multi/All values are quoted literals,
   single values have quotes doubled) or, when the plugin has none (frser-sqlite-datasource),
   Grafana's default `glob` format. An explicit `:fmt` always wins.
2. The data source backend expands its macros:
   - PostgreSQL (pkg/tsdb/grafana-postgresql-datasource): `sqleng.Interpolate` replaces
     `$__interval_ms`, `$__interval`, `$__unixEpochFrom()`, `$__unixEpochTo()`; the macro
     engine then rewrites `$__name(args)` (`__time`, `__timeEpoch`, `__timeFilter`,
     `__timeFrom`, `__timeTo`, `__timeGroup[Alias]`, `__unixEpochFilter`,
     `__unixEpochNanoFilter/From/To`, `__unixEpochGroup[Alias]`); an unknown macro is an error.
   - frser-sqlite-datasource (pkg/plugin/variables.go, macros.go): `$__from`/`$__to` become
     epoch milliseconds (whole seconds), `$__timeFilter(col)` compares epoch seconds and
     `$__unixEpochGroupSeconds(col, n[, NULL])` buckets epoch seconds; other macros are left.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

ALL_VALUE = "$__all"


@dataclass(frozen=True)
class TimeRange:
    start: datetime
    end: datetime

    @classmethod
    def last(cls, days: float, now: datetime | None = None) -> TimeRange:
        end = now or datetime.now(UTC)
        return cls(end - timedelta(days=days), end)

    @property
    def start_ms(self) -> int:
        return int(self.start.timestamp() * 1000)

    @property
    def end_ms(self) -> int:
        return int(self.end.timestamp() * 1000)


@dataclass(frozen=True)
class Variable:
    """A dashboard template variable with its current value (as Grafana holds it)."""

    name: str
    value: str | list[str]
    multi: bool = False
    include_all: bool = False
    all_value: str | None = None
    options: tuple[str, ...] = ()

    @classmethod
    def from_model(cls, model: Mapping[str, Any], value: str | list[str]) -> Variable:
        return cls(
            name=model["name"],
            value=value,
            multi=bool(model.get("multi")),
            include_all=bool(model.get("includeAll")),
            all_value=model.get("allValue") or None,
            options=tuple(
                str(option["value"])
                for option in model.get("options") or []
                if option.get("value") != ALL_VALUE
            ),
        )


# -- stage 1: template variables ------------------------------------------------------------

VARIABLE_PATTERN = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}")


def _join(value: Any, separator: str, item: Callable[[str], str] = str) -> str:
    if isinstance(value, list):
        return separator.join(item(str(v)) for v in value)
    return item(str(value))


def _glob(value: Any, _args: Sequence[str]) -> str:
    if isinstance(value, list):
        return "{" + ",".join(value) + "}" if len(value) > 1 else "".join(value)
    return str(value)


def _date(value: Any, args: Sequence[str]) -> str:
    millis = int(value)
    style = args[0] if args else "iso"
    if style == "ms":
        return str(millis)
    if style == "seconds":
        return str(millis // 1000)
    if style == "iso":
        moment = datetime.fromtimestamp(millis / 1000, UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"
    raise ValueError(f"date format {style!r} (moment.js patterns) is not emulated")


# Grafana's format registry (public/app/features/templating/formatRegistry.ts), as data.
FORMATS: dict[str, Callable[[Any, Sequence[str]], str]] = {
    "csv": lambda v, _a: _join(v, ","),
    "pipe": lambda v, _a: _join(v, "|"),
    "raw": lambda v, _a: _join(v, ","),
    "text": lambda v, _a: _join(v, " + "),
    "json": lambda v, _a: json.dumps(v, separators=(",", ":")),
    "glob": _glob,
    "sqlstring": lambda v, _a: _join(v, ",", lambda s: "'" + s.replace("'", "''") + "'"),
    "singlequote": lambda v, _a: _join(v, ",", lambda s: "'" + s.replace("'", "\\'") + "'"),
    "doublequote": lambda v, _a: _join(v, ",", lambda s: '"' + s.replace('"', '\\"') + '"'),
    "percentencode": lambda v, _a: quote(
        "{" + ",".join(v) + "}" if isinstance(v, list) else str(v), safe="-_.!~*'()"
    ),
    "date": _date,
}

Interpolator = Callable[[Any, Variable | None], str]


def postgres_interpolate(value: Any, variable: Variable | None) -> str:
    """SqlDatasource.interpolateVariable (public/app/features/plugins/sql/datasource)."""
    quote_literal = lambda s: "'" + str(s).replace("'", "''") + "'"  # noqa: E731
    if isinstance(value, list):
        return ",".join(quote_literal(v) for v in value)
    if isinstance(value, int | float):
        return str(value)
    if variable is not None and (variable.multi or variable.include_all):
        return quote_literal(value)
    return str(value).replace("'", "''")


def default_interpolate(value: Any, _variable: Variable | None) -> str:
    """A data source without interpolateVariable gets Grafana's default glob format."""
    return FORMATS["glob"](value, ())


def _format(value: Any, fmt: str | None, variable: Variable | None, ds: Interpolator) -> str:
    if fmt is None:
        return ds(value, variable)
    name, *args = fmt.split(":")
    if name not in FORMATS:
        name, args = "glob", []
    return FORMATS[name](value, args)


def builtin_variables(time_range: TimeRange, interval_ms: int) -> dict[str, Any]:
    span = time_range.end_ms - time_range.start_ms
    return {
        "__from": str(time_range.start_ms),
        "__to": str(time_range.end_ms),
        "__interval": format_interval(interval_ms),
        "__interval_ms": str(interval_ms),
        "__range": format_interval(span),
        "__range_s": str(span // 1000),
        "__range_ms": str(span),
    }


def interpolate_variables(
    sql: str,
    variables: Mapping[str, Variable],
    time_range: TimeRange,
    interval_ms: int,
    ds: Interpolator,
) -> str:
    """TemplateSrv.replace(sql, scopedVars, ds.interpolateVariable)."""
    builtins = builtin_variables(time_range, interval_ms)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        fmt = match.group(3) or match.group(6)
        if name in builtins:
            return _format(builtins[name], fmt, None, ds)
        variable = variables.get(name)
        if variable is None:
            return match.group(0)
        value = variable.value
        if value == ALL_VALUE or value == [ALL_VALUE]:
            if variable.all_value is not None and fmt not in ("text", "percentencode"):
                return variable.all_value
            value = list(variable.options)
        return _format(value, fmt, variable, ds)

    return VARIABLE_PATTERN.sub(replace, sql)


# -- intervals and Go number formatting -----------------------------------------------------

GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
CALENDAR_UNITS = {"d": 86400, "w": 7 * 86400}


def parse_interval(text: str, now: datetime | None = None) -> float:
    """gtime.ParseInterval: `5m`, `1h30m`, `1d`, `2w`, `1M`, `1y`; seconds as a float."""
    text = text.strip()
    calendar = re.fullmatch(r"(\d+)([yMwd])", text)
    if calendar:
        amount, unit = int(calendar.group(1)), calendar.group(2)
        if unit in CALENDAR_UNITS:
            return float(amount * CALENDAR_UNITS[unit])
        base = now or datetime.now(UTC)
        months = amount * (12 if unit == "y" else 1)
        year, month = divmod(base.month - 1 + months, 12)
        later = base.replace(year=base.year + year, month=month + 1)
        return (later - base).total_seconds()
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"error parsing interval {text}")
    return sum(float(n) * GO_DURATION_UNITS[u] for n, u in parts)


def format_interval(millis: int) -> str:
    """gtime.FormatInterval: the largest whole unit (y, d, h, m, s, ms)."""
    for unit, size in (("y", 31536000000), ("d", 86400000), ("h", 3600000), ("m", 60000)):
        if millis >= size:
            return f"{millis // size}{unit}"
    return f"{millis // 1000}s" if millis >= 1000 else f"{millis}ms"


def go_float(value: float) -> str:
    """Go's `%v` for a float64: shortest digits, exponent form when exp < -4 or exp >= 6."""
    if value == 0:
        return "0"
    if math.isinf(value) or math.isnan(value):
        return {math.inf: "+Inf", -math.inf: "-Inf"}.get(value, "NaN")
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    exp = len(digits) + int(exponent) - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= 6:
        tail = "." + mantissa[1:] if len(mantissa) > 1 else ""
        return f"{prefix}{mantissa[0]}{tail}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if exp >= len(mantissa) - 1:
        return prefix + mantissa + "0" * (exp - len(mantissa) + 1)
    if exp >= 0:
        return f"{prefix}{mantissa[: exp + 1]}.{mantissa[exp + 1 :]}"
    return f"{prefix}0.{'0' * (-exp - 1)}{mantissa}"


def rfc3339nano(moment: datetime) -> str:
    """Go's time.RFC3339Nano in UTC: trailing zeros of the fraction dropped."""
    moment = moment.astimezone(UTC)
    base = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{moment.microsecond:06d}000".rstrip("0")
    return f"{base}.{fraction}Z" if fraction else f"{base}Z"


# -- stage 2a: PostgreSQL macros ------------------------------------------------------------

MACRO_PATTERN = re.compile(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)")


class MacroError(ValueError):
    pass


def _need_column(name: str, args: list[str]) -> str:
    if not args or args[0] == "":
        raise MacroError(f"missing time column argument for macro {name}")
    return args[0]


def _group_seconds(name: str, args: list[str]) -> str:
    if len(args) < 2:
        raise MacroError(f"macro {name} needs time column and interval and optional fill value")
    return go_float(parse_interval(args[1].strip("'")))


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def _nanos(moment: datetime) -> int:
    return int(Decimal(str(moment.timestamp())) * 1_000_000_000)


POSTGRES_MACROS: dict[str, Callable[[str, list[str], TimeRange], str]] = {
    "__time": lambda n, a, r: f'{_need_column(n, a)} AS "time"',
    "__timeEpoch": lambda n, a, r: f'extract(epoch from {_need_column(n, a)}) as "time"',
    "__timeFilter": lambda n, a, r: (
        f"{_need_column(n, a)} BETWEEN '{rfc3339nano(r.start)}' AND '{rfc3339nano(r.end)}'"
    ),
    "__timeFrom": lambda n, a, r: f"'{rfc3339nano(r.start)}'",
    "__timeTo": lambda n, a, r: f"'{rfc3339nano(r.end)}'",
    "__timeGroup": lambda n, a, r: (
        f"floor(extract(epoch from {a[0]})/{_group_seconds(n, a)})*{_group_seconds(n, a)}"
    ),
    "__timeGroupAlias": lambda n, a, r: POSTGRES_MACROS["__timeGroup"](n, a, r) + ' AS "time"',
    "__unixEpochFilter": lambda n, a, r: (
        f"{_need_column(n, a)} >= {_epoch(r.start)} AND {a[0]} <= {_epoch(r.end)}"
    ),
    "__unixEpochNanoFilter": lambda n, a, r: (
        f"{_need_column(n, a)} >= {_nanos(r.start)} AND {a[0]} <= {_nanos(r.end)}"
    ),
    "__unixEpochNanoFrom": lambda n, a, r: str(_nanos(r.start)),
    "__unixEpochNanoTo": lambda n, a, r: str(_nanos(r.end)),
    "__unixEpochGroup": lambda n, a, r: f"floor(({a[0]})/{_group_seconds(n, a)})*{_group_seconds(n, a)}",
    "__unixEpochGroupAlias": lambda n, a, r: POSTGRES_MACROS["__unixEpochGroup"](n, a, r) + ' AS "time"',
}


def expand_postgres_macros(sql: str, time_range: TimeRange, interval_ms: int) -> str:
    """sqleng.Interpolate then postgresMacroEngine.Interpolate (Grafana 11)."""
    sql = sql.replace("$__interval_ms", str(interval_ms))
    sql = sql.replace("$__interval", format_interval(interval_ms))
    sql = sql.replace("$__unixEpochFrom()", str(_epoch(time_range.start)))
    sql = sql.replace("$__unixEpochTo()", str(_epoch(time_range.end)))
    original = sql

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "__timeGroup":
            # pre-5.3 compatibility: `$__timeGroup(...),` means the aliased form.
            index = original.find(match.group(0)) + len(match.group(0))
            if index < len(original) and original[index] == ",":
                name = "__timeGroupAlias"
        args = [arg.strip(" ") for arg in match.group(2).split(",")]
        if name not in POSTGRES_MACROS:
            raise MacroError(f"unknown macro {name!r}")
        return POSTGRES_MACROS[name](name, args, time_range)

    return MACRO_PATTERN.sub(replace, sql)


# -- stage 2b: frser-sqlite-datasource macros -----------------------------------------------

SQLITE_MACRO_PATTERN = re.compile(r"\$__([_a-zA-Z0-9]+)\(([^\)]*)\)")


def _sqlite_time_filter(args: list[str], time_range: TimeRange) -> str:
    if len(args) != 1:
        raise MacroError(f"unsupported number of arguments ({len(args)}) for timeFilter")
    column = args[0]
    return (
        f"CAST(CASE WHEN typeof({column}) = 'integer' THEN {column} "
        f'ELSE strftime("%s", {column}) END AS INTEGER) '
        f"BETWEEN {_epoch(time_range.start)} AND {_epoch(time_range.end)}"
    )


def _sqlite_group_seconds(args: list[str], _time_range: TimeRange) -> str:
    if not 2 <= len(args) <= 3:
        raise MacroError(f"unsupported number of arguments ({len(args)}) for unixEpochGroupSeconds")
    try:
        seconds = int(args[1].strip(" "))
    except ValueError as exc:
        raise MacroError(f"could not convert '{args[1]}' to an integer grouping interval") from exc
    if len(args) == 3 and args[2].strip(" ").lower() != "null":
        raise MacroError(f"unsupported gap filling value of: `{args[2]}`")
    return f"cast(({args[0]} / {seconds}) as int) * {seconds}"


SQLITE_MACROS: dict[str, Callable[[list[str], TimeRange], str]] = {
    "timeFilter": _sqlite_time_filter,
    "unixEpochGroupSeconds": _sqlite_group_seconds,
}


def expand_sqlite_macros(sql: str, time_range: TimeRange) -> str:
    sql = sql.replace("$__from", str(_epoch(time_range.start) * 1000))
    sql = sql.replace("$__to", str(_epoch(time_range.end) * 1000))

    def replace(match: re.Match[str]) -> str:
        macro = SQLITE_MACROS.get(match.group(1))
        return macro(match.group(2).split(","), time_range) if macro else match.group(0)

    return SQLITE_MACRO_PATTERN.sub(replace, sql)


# -- whole targets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpandedQuery:
    where: str
    ref_id: str
    sql: str
    time_columns: tuple[str, ...] = field(default=())


def expand_target(
    target: Mapping[str, Any],
    variables: Mapping[str, Variable],
    time_range: TimeRange,
    interval_ms: int = 3_600_000,
) -> str:
    """The SQL a target's data source runs: PostgreSQL `rawSql` or SQLite `rawQueryText`."""
    if "rawSql" in target:
        sql = interpolate_variables(
            target["rawSql"], variables, time_range, interval_ms, postgres_interpolate
        )
        return expand_postgres_macros(sql, time_range, interval_ms)
    sql = interpolate_variables(
        target["rawQueryText"], variables, time_range, interval_ms, default_interpolate
    )
    return expand_sqlite_macros(sql, time_range)
