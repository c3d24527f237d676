"""Every panel's SQL, expanded as Grafana expands it, runs through Grafana's read-only door
against a registry loaded with a simulated fleet, and returns rows.

PostgreSQL: the read-only role `crashreg grafana provision` sets up. SQLite: the reporting
copy opened read-only, as the frser-sqlite-datasource data source does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaServerError
from sqlalchemy import text

from dashboards import build_dashboards
from registry.db import Database, utcnow
from registry.epidemiology.service import store as store_epidemiology
from sync.grafana.annotations import push_annotations
from sync.grafana.rollups import refresh_reporting_copy
from testkit.grafana_sql import (
    TimeRange,
    Variable,
    expand_target,
    interpolate_variables,
    postgres_interpolate,
)
from tests.emulators.grafana import serve_grafana
from tests.support.fleet import LoadedFleet, load_fleet
from tests.support.grafana import Runner, dialect_of


@pytest.fixture
def fleet(client: Any, make_token: Callable[..., str], database: Database) -> LoadedFleet:
    return load_fleet(client, make_token("report"), database, live_every=25, without_crash_every=30)


def signature_choice(board: dict[str, Any], run: Runner, time_range: TimeRange, dialect: str) -> Variable:
    """The signature variable's options (its own query, expanded and run); the busiest one."""
    model = next(v for v in board["templating"]["list"] if v["name"] == "signature")
    query = interpolate_variables(model["query"], {}, time_range, 3_600_000, postgres_interpolate)
    columns, rows = run(query)
    values = [str(row[columns.index("__value")] if dialect == "postgresql" else row[0]) for row in rows]
    assert values, "the signature variable lists no signature"
    _, busiest = run("SELECT signature_id FROM rpt_signatures ORDER BY event_count DESC LIMIT 1")
    chosen = str(busiest[0][0])
    assert chosen in values
    return Variable.from_model(model, chosen)


def test_every_panel_query_returns_rows_as_grafana_runs_it(
    fleet: LoadedFleet, read_only: Runner, db_url: str
) -> None:
    dialect = dialect_of(db_url)
    time_range = TimeRange(fleet.start, fleet.end)
    failures, ran = [], 0
    for board in build_dashboards(dialect, "https://crashreg.example"):
        variables: dict[str, Variable] = {}
        if any(v["name"] == "signature" for v in board["templating"]["list"]):
            variables["signature"] = signature_choice(board, read_only, time_range, dialect)
        for panel in board["panels"]:
            for target in panel["targets"]:
                sql = expand_target(target, variables, time_range)
                assert "$" not in sql.replace("'%s'", ""), f"unexpanded: {sql}"
                try:
                    columns, rows = read_only(sql)
                except Exception as error:  # collect them all, then fail with every one
                    failures.append(f"{board['uid']} / {panel['title']}: {error}\n{sql}")
                    continue
                ran += 1
                if not rows:
                    failures.append(f"{board['uid']} / {panel['title']}: no rows\n{sql}")
                elif panel["type"] == "timeseries":
                    assert columns[0] == "time", (panel["title"], columns)
                    assert all(isinstance(row[0], int | float) or hasattr(row[0], "real") for row in rows)
                elif "findings" in panel["title"]:  # each once: the analysis the verdict rests on
                    named = [c for c in ("signature_id", "attribute", "value") if c in columns]
                    keys = [tuple(row[columns.index(c)] for c in named) for row in rows]
                    assert len(keys) == len(set(keys)), (panel["title"], sorted(keys))
    assert not failures, "\n\n".join(failures)
    assert ran == sum(len(p["targets"]) for b in build_dashboards(dialect, "x") for p in b["panels"])

    # The time range filters what panels see: crashes per day sum to the events inside it.
    per_day = build_dashboards(dialect, "x")[0]["panels"][0]["targets"][0]
    _, rows = read_only(expand_target(per_day, {}, time_range))
    assert sum(row[1] for row in rows) == len(fleet.events)
    before = TimeRange(fleet.start - timedelta(days=60), fleet.start - timedelta(days=1))
    assert read_only(expand_target(per_day, {}, before))[1] == []


def test_findings_panels_show_each_finding_once_from_the_analysis_the_verdict_rests_on(
    fleet: LoadedFleet, read_only: Runner, database: Database, db_url: str
) -> None:
    """The refresh stores the case-control view's findings beside the verdict's own: the same
    values against the other crashes, with other numbers. A panel shows the verdict's."""
    _, busiest = read_only("SELECT signature_id FROM rpt_signatures ORDER BY event_count DESC LIMIT 1")
    signature_id = busiest[0][0]
    finding = {"attribute": "microcode", "value": "0xbad1", "in_signature": 0.9, "overall": 0.05,
               "lift": 18.2, "p_value": 1e-30, "log10_p": -30.0, "events": 40, "explained_by": None,
               "baseline": "fleet"}
    body = {"verdict": "hardware-config", "baseline": "fleet", "events": 44, "hosts": 20,
            "verdict_detail": {"reason": "microcode", "finding": finding}, "findings": [finding],
            "views": {"crashes": {"findings": [finding | {"lift": 3.9, "baseline": "crashes"}]}}}
    with database.session() as session:
        store_epidemiology(session, signature_id, body, utcnow())  # type: ignore[arg-type]
    if db_url.startswith("sqlite"):
        refresh_reporting_copy(db_url)  # what Grafana's SQLite data source opens, as the job makes it
    time_range = TimeRange(fleet.start, fleet.end)
    shown = {}
    for board in build_dashboards(dialect_of(db_url), "https://crashreg.example"):
        signature = next((v for v in board["templating"]["list"] if v["name"] == "signature"), None)
        variables = {"signature": Variable.from_model(signature, str(signature_id))} if signature else {}
        for panel in board["panels"]:
            if "findings" in panel["title"]:
                columns, rows = read_only(expand_target(panel["targets"][0], variables, time_range))
                shown[panel["title"]] = [row[columns.index("lift")] for row in rows
                                         if row[columns.index("value")] == "0xbad1"]
    assert shown == {"Hardware-configuration findings": [18.2], "Kernel-version findings": [],
                     "Epidemiology findings": [18.2]}


def test_annotations_are_pushed_once_and_resume_after_an_outage(
    fleet: LoadedFleet, database: Database
) -> None:
    with serve_grafana() as grafana:
        api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
        recent = push_annotations(api, database, lookback=utcnow() - (fleet.end - timedelta(days=20)))
        assert recent and all(mark.time >= fleet.end - timedelta(days=21) for mark in recent)
        grafana.fail_next(503, on="/api/annotations")
        everything = timedelta(days=3650)
        with pytest.raises(GrafanaServerError):
            push_annotations(api, database, lookback=everything)
        rest = push_annotations(api, database, lookback=everything)
        held = grafana.state.annotations
        assert len(held) == len(recent) + len(rest)
        assert len({(a["text"], a["time"]) for a in held}) == len(held), "nothing pushed twice"
        kinds = [a["tags"][1] for a in held]
        with database.session() as session:
            signatures = session.execute(text("SELECT COUNT(*) FROM rpt_signatures")).scalar_one()
        assert kinds.count("first-seen") == signatures
        assert kinds.count("regression") >= 1
        assert kinds.count("kernel-rollout") == 1
        rollout = next(a for a in held if "kernel-rollout" in a["tags"])
        assert rollout["text"] == "Kernel rollout: 6.1.90-fleet.1"
        assert push_annotations(api, database, lookback=everything) == []
