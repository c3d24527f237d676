"""Dashboards as code: valid Grafana JSON, stable uids, targets fit for their data source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dashboards import FOLDER_UID, build_dashboards
from dashboards.dialects import DIALECTS

# Grafana's schema, copied into the repository with its LICENSE (tests never read ../shared).
SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "dashboard.jsonschema.json"
EXPECTED_UIDS = [
    "crashreg-fleet",
    "crashreg-signature",
    "crashreg-captures",
    "crashreg-triage",
    "crashreg-epidemiology",
]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    return jsonschema.Draft7Validator(schema)


def all_targets(board: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(panel, target) for panel in board["panels"] for target in panel["targets"]]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_dashboards_validate_against_grafana_schema(
    dialect: str, validator: jsonschema.Draft7Validator
) -> None:
    for board in build_dashboards(dialect, "https://crashreg.example"):
        errors = sorted(validator.iter_errors(board), key=lambda e: list(e.path))
        assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_uids_titles_time_range_and_annotations(dialect: str) -> None:
    boards = build_dashboards(dialect, "https://crashreg.example")
    assert [b["uid"] for b in boards] == EXPECTED_UIDS
    assert FOLDER_UID not in EXPECTED_UIDS
    assert len({b["title"] for b in boards}) == len(boards)
    for board in boards:
        assert board["time"] == {"from": "now-30d", "to": "now"}
        kinds = {
            tuple(a["target"]["tags"])
            for a in board["annotations"]["list"]
            if a.get("target", {}).get("type") == "tags"
        }
        assert kinds == {
            ("crashreg", "first-seen"),
            ("crashreg", "regression"),
            ("crashreg", "kernel-rollout"),
        }
        assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_builds_are_deterministic() -> None:
    first = json.dumps(build_dashboards("postgresql", "https://x"), sort_keys=True)
    assert first == json.dumps(build_dashboards("postgresql", "https://x"), sort_keys=True)


def test_postgres_targets() -> None:
    for board in build_dashboards("postgresql", "https://x"):
        for panel, target in all_targets(board):
            assert target["datasource"] == {
                "type": "grafana-postgresql-datasource",
                "uid": "crashreg-postgres",
            }
            assert panel["datasource"] == target["datasource"]
            assert target["refId"] == "A"
            assert target["format"] == ("time_series" if panel["type"] == "timeseries" else "table")
            sql = target["rawSql"]
            assert "rawQueryText" not in target
            assert "FROM rpt_" in sql, f"{panel['title']}: dashboards query views only"
            if panel["type"] == "timeseries":
                assert "$__timeGroupAlias(" in sql and "$__timeFilter(" in sql, panel["title"]


def test_sqlite_targets() -> None:
    for board in build_dashboards("sqlite", "https://x"):
        for panel, target in all_targets(board):
            assert target["datasource"] == {"type": "frser-sqlite-datasource", "uid": "crashreg-sqlite"}
            assert target["refId"] == "A"
            assert target["rawQueryText"] == target["queryText"]
            assert "rawSql" not in target
            expected = "time series" if panel["type"] == "timeseries" else "table"
            assert target["queryType"] == expected
            sql = target["rawQueryText"]
            assert "$__timeGroup" not in sql, "no PostgreSQL macros in the SQLite variant"
            if panel["type"] == "timeseries":
                assert "$__timeFilter(" in sql and "CAST(strftime('%s', " in sql, panel["title"]
                assert target["timeColumns"] == ["time"]


def test_table_links_point_at_registry_and_jira() -> None:
    fleet = build_dashboards("postgresql", "https://crashreg.example")[0]
    variables = {v["name"]: v for v in fleet["templating"]["list"]}
    assert variables["registry_url"]["query"] == "https://crashreg.example"
    top = next(p for p in fleet["panels"] if p["title"] == "Top signatures")
    links = [link["url"] for link in top["fieldConfig"]["defaults"]["links"]]
    assert links == [
        "${registry_url}/signatures/${__data.fields.signature_id}",
        "${__data.fields.jira_url}",
    ]
    sql = top["targets"][0]["rawSql"]
    assert "s.signature_id" in sql and "s.jira_url" in sql


def test_signature_drilldown_has_signature_variable() -> None:
    for dialect in DIALECTS:
        board = build_dashboards(dialect, "https://x")[1]
        variable = next(v for v in board["templating"]["list"] if v["name"] == "signature")
        assert variable["type"] == "query" and variable["datasource"] == DIALECTS[dialect].datasource
        for _, target in all_targets(board):
            sql = target.get("rawSql") or target["rawQueryText"]
            assert "signature_id = $signature" in sql
