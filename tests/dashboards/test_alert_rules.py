"""Alert rules as code: Grafana's alert-rule shape, labels, links, thresholds, file form."""

from __future__ import annotations

import copy
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from dashboards import FOLDER_TITLE, FOLDER_UID, build_dashboards
from dashboards.alert_model import (
    REQUIRED_RULE_FIELDS,
    ProvisionedAlertRule,
    RuleGroup,
    file_provisioning,
    group_problems,
    rule_problems,
)
from dashboards.alerts import GROUP, build_rule_group
from dashboards.dialects import DIALECTS
from registry.config import AlertThresholds, Settings

PUBLIC = "https://crashreg.example"
KEYS = [
    "new-signature-spread",
    "signature-regression",
    "kernel-rollout-crash-rate",
    "bios-rollout-crash-rate",
    "sku-rollout-crash-rate",
    "failed-captures",
    "ingest-silence",
    "dedup-collapse",
    "warning-turned-panic",
    "reports-without-crash",
    "jira-sync-behind",
]


def group_for(dialect: str, thresholds: AlertThresholds | None = None, jira: bool = True) -> RuleGroup:
    boards = build_dashboards(dialect, PUBLIC)
    return build_rule_group(
        DIALECTS[dialect], PUBLIC, thresholds or AlertThresholds(), jira, boards, FOLDER_UID
    )


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_the_typed_shapes_are_what_is_built_and_what_grafana_requires(dialect: str) -> None:
    group = group_for(dialect)
    assert set(group) == RuleGroup.__required_keys__
    rule_keys = ProvisionedAlertRule.__required_keys__
    assert set(REQUIRED_RULE_FIELDS) <= rule_keys
    for rule in group["rules"]:
        assert set(rule) == rule_keys


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_rule_fits_grafanas_alert_rule_shape(dialect: str) -> None:
    group = group_for(dialect)
    assert group_problems(group) == []
    assert group["title"] == GROUP and group["folderUid"] == FOLDER_UID and group["interval"] == 300
    assert [rule["uid"] for rule in group["rules"]] == [f"crashreg-{key}" for key in KEYS]
    assert len({rule["title"] for rule in group["rules"]}) == len(KEYS)
    for rule in group["rules"]:
        query, reduce, threshold = rule["data"]
        assert query["datasourceUid"] == DIALECTS[dialect].datasource["uid"]
        assert query["relativeTimeRange"]["from"] > 0 and query["relativeTimeRange"]["to"] == 0
        sql = query["model"].get("rawSql") or query["model"]["rawQueryText"]
        assert "FROM rpt_" in sql, "rules read the reporting views only"
        assert ("$__unixEpochTo()" in sql) == (dialect == "postgresql") and ("$__to" in sql) == (
            dialect == "sqlite"
        )
        assert (reduce["model"]["expression"], threshold["model"]["expression"], rule["condition"]) == (
            "A",
            "B",
            "C",
        )


def test_jira_rule_only_where_a_jira_sync_drains_the_outbox() -> None:
    uids = [rule["uid"] for rule in group_for("sqlite", jira=False)["rules"]]
    assert "crashreg-jira-sync-behind" not in uids and len(uids) == len(KEYS) - 1


def test_labels_texts_and_links() -> None:
    boards = {board["uid"]: board for board in build_dashboards("postgresql", PUBLIC)}
    for rule in group_for("postgresql")["rules"]:
        labels, annotations = rule["labels"], rule["annotations"]
        assert labels["source"] == "crashreg" and labels["severity"] in ("critical", "warning")
        assert annotations["summary"] and len(annotations["description"]) > 80, "says what to do"
        board = boards[annotations["__dashboardUid__"]]
        assert int(annotations["__panelId__"]) in {panel["id"] for panel in board["panels"]}
        sql = rule["data"][0]["model"]["rawSql"]
        if "signature_page" in annotations:
            assert annotations["signature_page"] == PUBLIC + "/signatures/{{ $labels.signature }}"
            assert "AS signature" in sql
    by_key = {rule["uid"].removeprefix("crashreg-"): rule for rule in group_for("postgresql")["rules"]}
    assert "AS kernel" in by_key["signature-regression"]["data"][0]["model"]["rawSql"]
    assert "AS kernel" in by_key["kernel-rollout-crash-rate"]["data"][0]["model"]["rawSql"]
    assert by_key["ingest-silence"]["noDataState"] == "Alerting", "no data at all is silence too"
    assert {rule["noDataState"] for key, rule in by_key.items() if key != "ingest-silence"} == {"OK"}


def test_thresholds_come_from_settings() -> None:
    settings = Settings.from_env(
        {
            "CRASHREG_ALERT_NEW_SIGNATURE_HOSTS": "8",
            "CRASHREG_ALERT_FAILED_CAPTURE_SHARE": "0.5",
            "CRASHREG_ALERT_INTERVAL_S": "60",
        }
    )
    group = group_for("sqlite", settings.alerts)
    by_key = {rule["uid"].removeprefix("crashreg-"): rule for rule in group["rules"]}

    def threshold(key: str) -> float:
        return by_key[key]["data"][2]["model"]["conditions"][0]["evaluator"]["params"][0]

    assert threshold("new-signature-spread") == 7, "more than 7 hosts: at least 8"
    assert threshold("failed-captures") == 0.5 and group["interval"] == 60
    assert AlertThresholds() == Settings.from_env({}).alerts


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CRASHREG_ALERT_NEW_SIGNATURE_HOSTS", "many"),
        ("CRASHREG_ALERT_SILENCE_MINUTES", "-5"),
        ("CRASHREG_ALERT_NEW_SIGNATURE_HOSTS", "2.5"),
    ],
)
def test_bad_threshold_settings_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        Settings.from_env({name: value})


def test_a_bad_interval_is_caught_before_grafana_sees_it() -> None:
    group = group_for("sqlite", AlertThresholds(interval_s=45))
    assert group_problems(group) == ["interval 45: a positive multiple of 10 s"]


@pytest.mark.parametrize(
    ("breakage", "problem"),
    [
        (lambda r: r.update(condition="Z"), "condition 'Z' is not one of the refIds"),
        (lambda r: r["data"][0].update(relativeTimeRange={"from": 0, "to": 0}), "relativeTimeRange"),
        (
            lambda r: r["data"][2]["model"]["conditions"][0]["evaluator"].update(type="above"),
            "threshold type",
        ),
        (lambda r: r["data"][1]["model"].update(reducer="median"), "reducer 'median'"),
        (lambda r: r["data"][1]["model"].update(expression="Q"), "expression must name another refId"),
        (lambda r: r["annotations"].pop("__panelId__"), "both annotations"),
        (lambda r: r.update(noDataState="Silent"), "noDataState"),
        (lambda r: r.update({"for": "5 minutes"}), "is not a duration"),
        (lambda r: r["labels"].update(alertname="x"), "reserved"),
        (lambda r: r.pop("execErrState"), "missing execErrState"),
    ],
)
def test_shape_check_names_what_grafana_would_refuse(breakage: Any, problem: str) -> None:
    rule = copy.deepcopy(group_for("postgresql")["rules"][0])
    assert rule_problems(rule) == []
    breakage(rule)
    assert any(problem in found for found in rule_problems(rule)), rule_problems(rule)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_file_provisioning_form(dialect: str) -> None:
    group = group_for(dialect)
    document = file_provisioning(group, FOLDER_TITLE)
    assert document["apiVersion"] == 1
    (exported,) = document["groups"]
    assert exported == {**exported, "orgId": 1, "name": GROUP, "folder": FOLDER_TITLE, "interval": "5m"}
    for api_rule, file_rule in zip(group["rules"], exported["rules"], strict=True):
        assert {"uid", "title", "condition", "data", "noDataState", "execErrState", "for"} <= set(file_rule)
        assert file_rule["data"] == api_rule["data"]
        assert file_rule["dashboardUid"] == api_rule["annotations"]["__dashboardUid__"]
        assert file_rule["panelId"] == int(api_rule["annotations"]["__panelId__"])
        assert "__panelId__" not in file_rule["annotations"]


def test_docs_list_every_threshold_with_its_default() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs/alerting.md").read_text()
    rows = dict(re.findall(r"^\| `(CRASHREG_ALERT_\w+)` \| .* \| `([\d.]+)` \|$", docs, re.M))
    expected = {f"CRASHREG_ALERT_{item.name.upper()}": str(item.default) for item in fields(AlertThresholds)}
    assert rows == expected
