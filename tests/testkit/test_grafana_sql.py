"""The test-side expander reproduces Grafana's documented macro and variable behaviour."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from testkit.grafana_sql import (
    MacroError,
    TimeRange,
    Variable,
    default_interpolate,
    expand_postgres_macros,
    expand_sqlite_macros,
    go_float,
    interpolate_variables,
    parse_interval,
    postgres_interpolate,
)

# The range used in Grafana's PostgreSQL docs examples (1494410783 .. 1494497183).
RANGE = TimeRange(datetime.fromtimestamp(1494410783, UTC), datetime.fromtimestamp(1494497183, UTC))


@pytest.mark.parametrize(
    ("macro", "expanded"),
    [
        ("$__time(dateColumn)", 'dateColumn AS "time"'),
        ("$__timeEpoch(dateColumn)", 'extract(epoch from dateColumn) as "time"'),
        (
            "$__timeFilter(dateColumn)",
            "dateColumn BETWEEN '2017-05-10T10:06:23Z' AND '2017-05-11T10:06:23Z'",
        ),
        ("$__timeFrom()", "'2017-05-10T10:06:23Z'"),
        ("$__timeTo()", "'2017-05-11T10:06:23Z'"),
        ("$__timeGroup(dateColumn,'5m')", "floor(extract(epoch from dateColumn)/300)*300"),
        ("$__timeGroup(dateColumn, '1d')", "floor(extract(epoch from dateColumn)/86400)*86400"),
        (
            "$__timeGroupAlias(dateColumn,'5m')",
            'floor(extract(epoch from dateColumn)/300)*300 AS "time"',
        ),
        ("$__timeGroup(d,'30d', 0)", "floor(extract(epoch from d)/2.592e+06)*2.592e+06"),
        ("$__unixEpochFilter(c)", "c >= 1494410783 AND c <= 1494497183"),
        ("$__unixEpochFrom()", "1494410783"),
        ("$__unixEpochTo()", "1494497183"),
        ("$__unixEpochGroup(c,'5m')", "floor((c)/300)*300"),
        ("$__unixEpochGroupAlias(c,'1h')", 'floor((c)/3600)*3600 AS "time"'),
        (
            "$__unixEpochNanoFilter(c)",
            "c >= 1494410783000000000 AND c <= 1494497183000000000",
        ),
    ],
)
def test_postgres_macros(macro: str, expanded: str) -> None:
    assert expand_postgres_macros(macro, RANGE, 60_000) == expanded


def test_pre_53_time_group_followed_by_comma_is_aliased() -> None:
    sql = "SELECT $__timeGroup(t,'1h'), count(*) FROM x"
    assert expand_postgres_macros(sql, RANGE, 1000) == (
        'SELECT floor(extract(epoch from t)/3600)*3600 AS "time", count(*) FROM x'
    )


def test_interval_and_unknown_macro() -> None:
    assert expand_postgres_macros("$__interval / $__interval_ms", RANGE, 3_600_000) == ("1h / 3600000")
    with pytest.raises(MacroError):
        expand_postgres_macros("$__nope(x)", RANGE, 1000)
    with pytest.raises(MacroError):
        expand_postgres_macros("$__timeFilter()", RANGE, 1000)


def test_fractional_time_range_is_rfc3339nano() -> None:
    moment = datetime(2026, 11, 1, 8, 30, 0, 250000, tzinfo=UTC)
    expanded = expand_postgres_macros("$__timeFrom()", TimeRange(moment, moment), 1000)
    assert expanded == "'2026-11-01T08:30:00.25Z'"


@pytest.mark.parametrize(
    ("value", "text"),
    [(86400.0, "86400"), (604800.0, "604800"), (1e6, "1e+06"), (0.5, "0.5"), (1e-5, "1e-05")],
)
def test_go_float_formatting(value: float, text: str) -> None:
    assert go_float(value) == text


def test_parse_interval() -> None:
    assert parse_interval("1h30m") == 5400
    assert parse_interval("2w") == 14 * 86400
    with pytest.raises(ValueError):
        parse_interval("1 day")


def test_postgres_variable_quoting() -> None:
    single = Variable("sig", "it's")
    multi = Variable("region", ["eu'1", "us"], multi=True)
    all_of = Variable("kernel", "$__all", include_all=True, options=("6.1", "6.6"))
    custom_all = Variable("sku", "$__all", include_all=True, all_value=".*")
    variables = {v.name: v for v in (single, multi, all_of, custom_all)}

    def expand(sql: str) -> str:
        return interpolate_variables(sql, variables, RANGE, 1000, postgres_interpolate)

    assert expand("x = '$sig'") == "x = 'it''s'"
    assert expand("r IN ($region)") == "r IN ('eu''1','us')"
    assert expand("k IN (${kernel})") == "k IN ('6.1','6.6')"
    assert expand("s ~ '$sku'") == "s ~ '.*'"
    assert expand("${region:csv}|${region:sqlstring}|[[region]]") == ("eu'1,us|'eu''1','us'|'eu''1','us'")
    assert expand("${region:singlequote} ${region:pipe}") == "'eu\\'1','us' eu'1|us"
    assert expand("$__from $__to ${__from:date:seconds}") == ("1494410783000 1494497183000 1494410783")
    assert expand("$unknown $__timeFilter(x)") == "$unknown $__timeFilter(x)"


def test_sqlite_plugin_uses_glob_default_and_its_own_macros() -> None:
    variables = {"sig": Variable("sig", ["1", "2"], multi=True)}
    sql = interpolate_variables("IN ($sig) ${sig:sqlstring}", variables, RANGE, 1000, default_interpolate)
    assert sql == "IN ({1,2}) '1','2'"
    assert expand_sqlite_macros("$__timeFilter(t)", RANGE) == (
        "CAST(CASE WHEN typeof(t) = 'integer' THEN t ELSE strftime(\"%s\", t) END AS INTEGER)"
        " BETWEEN 1494410783 AND 1494497183"
    )
    assert expand_sqlite_macros("$__unixEpochGroupSeconds(t, 86400)", RANGE) == (
        "cast((t / 86400) as int) * 86400"
    )
    assert expand_sqlite_macros("$__from/1000 $__timeGroup(t,'1d')", RANGE) == (
        "1494410783000/1000 $__timeGroup(t,'1d')"
    )
    with pytest.raises(MacroError):
        expand_sqlite_macros("$__unixEpochGroupSeconds(t, 1d)", RANGE)
