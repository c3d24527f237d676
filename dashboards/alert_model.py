"""Plain builders for Grafana-managed alert rules, and a check of Grafana's alert-rule shape.

A rule is declared as data (an SQL query over the `rpt_*` views returning one number per row,
its text columns becoming the alert instance's labels; a threshold; texts; the dashboard panel
it belongs to) and rendered into the provisioning API's `ProvisionedAlertRule` JSON: query A,
reduce B (last value of each series), threshold C (the condition). `file_provisioning` turns a
rule group into Grafana's file-provisioning document (`provisioning/alerting/*.yaml`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from dashboards.dialects import Dialect
from dashboards.model import Dashboard, Query

EXPRESSION_DATASOURCE = {"type": "__expr__", "uid": "__expr__"}
# What Grafana stores in every query model when they are missing (AlertQuery.PreSave):
# stating them keeps what Grafana returns equal to what was sent.
MODEL_DEFAULTS = {"intervalMs": 1000, "maxDataPoints": 43200}
REQUIRED_RULE_FIELDS = (
    "uid",
    "orgID",
    "folderUID",
    "ruleGroup",
    "title",
    "condition",
    "data",
    "noDataState",
    "execErrState",
    "for",
)
BASE_INTERVAL_S = 10  # Grafana's [unified_alerting] base_interval: group intervals are multiples
ORG_ID = 1
NO_DATA_STATES = ("NoData", "Alerting", "OK", "KeepLast")
EXEC_ERR_STATES = ("Error", "Alerting", "OK", "KeepLast")
THRESHOLD_TYPES = ("gt", "lt", "within_range", "outside_range")

# The provisioning API's ProvisionedAlertRule as crashreg writes it (functional form: `for` is
# a keyword). The queries in `data` are Grafana's own objects.
ProvisionedAlertRule = TypedDict(
    "ProvisionedAlertRule",
    {
        "uid": str,
        "orgID": int,
        "folderUID": str,
        "ruleGroup": str,
        "title": str,
        "condition": str,
        "data": list[dict[str, Any]],
        "noDataState": str,
        "execErrState": str,
        "for": str,
        "annotations": dict[str, str],
        "labels": dict[str, str],
        "isPaused": bool,
    },
)


class RuleGroup(TypedDict):
    """The body of PUT /api/v1/provisioning/folder/{folder}/rule-groups/{title}."""

    title: str
    folderUid: str
    interval: int
    rules: list[ProvisionedAlertRule]
REDUCERS = ("last", "mean", "min", "max", "sum", "count")
RESERVED_LABELS = ("__alert_rule_uid__", "__alert_rule_namespace_uid__", "grafana_folder", "alertname")
DASHBOARD_UID_ANNOTATION = "__dashboardUid__"
PANEL_ID_ANNOTATION = "__panelId__"
UID_PATTERN = re.compile(r"^[a-zA-Z0-9\-_]{1,40}$")
DURATION_UNITS = (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
DURATION_PATTERN = re.compile(r"^(?:\d+[wdhms])+$|^0$")


def prometheus_duration(seconds: int) -> str:
    """Seconds the way Grafana prints a rule's `for` (Prometheus model.Duration): 0s, 5m, 1h30m."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in DURATION_UNITS:
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


@dataclass(frozen=True)
class AlertRule:
    """One rule as data; `sql` returns text label columns and exactly one numeric column."""

    key: str  # the rule's uid is crashreg-<key>
    title: str
    sql: str
    threshold: float
    lookback_s: int  # the query's relative time range (now-lookback .. now)
    summary: str
    description: str
    severity: str
    dashboard_uid: str
    panel_title: str
    comparison: str = "gt"
    no_data_state: str = "OK"
    for_s: int = 0
    signature_page: bool = False  # rows carry a `signature` label: link its crashreg page
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def uid(self) -> str:
        return f"crashreg-{self.key}"


def _expression(ref_id: str, model: dict[str, Any]) -> dict[str, Any]:
    return {
        "refId": ref_id,
        "queryType": "",
        "relativeTimeRange": {"from": 0, "to": 0},
        "datasourceUid": EXPRESSION_DATASOURCE["uid"],
        "model": {"refId": ref_id, "datasource": EXPRESSION_DATASOURCE, **model, **MODEL_DEFAULTS},
    }


def panel_id(dashboards: Iterable[Dashboard], dashboard_uid: str, title: str) -> int:
    """The id of a dashboard's panel, found by title (ids follow the panels' order)."""
    for board in dashboards:
        if board["uid"] == dashboard_uid:
            for panel in board["panels"]:
                if panel["title"] == title:
                    return int(panel["id"])
    raise LookupError(f"no panel {title!r} on dashboard {dashboard_uid}")


def render_rule(
    rule: AlertRule,
    dialect: Dialect,
    public_url: str,
    dashboards: list[Dashboard],
    folder_uid: str,
    group: str,
) -> ProvisionedAlertRule:
    """The provisioning API's ProvisionedAlertRule for `rule` on `dialect`'s data source."""
    query = dialect.target("A", Query(rule.sql, table=True, time_columns=()))
    annotations = {
        "summary": rule.summary,
        "description": rule.description,
        DASHBOARD_UID_ANNOTATION: rule.dashboard_uid,
        PANEL_ID_ANNOTATION: str(panel_id(dashboards, rule.dashboard_uid, rule.panel_title)),
    }
    if rule.signature_page:
        annotations["signature_page"] = f"{public_url}/signatures/{{{{ $labels.signature }}}}"
    return {
        "uid": rule.uid,
        "orgID": ORG_ID,
        "folderUID": folder_uid,
        "ruleGroup": group,
        "title": rule.title,
        "condition": "C",
        "data": [
            {
                "refId": "A",
                "queryType": query.get("queryType", ""),  # Grafana copies the model's onto the query
                "relativeTimeRange": {"from": rule.lookback_s, "to": 0},
                "datasourceUid": dialect.datasource["uid"],
                "model": {**query, **MODEL_DEFAULTS},
            },
            _expression(
                "B", {"type": "reduce", "expression": "A", "reducer": "last", "settings": {"mode": "strict"}}
            ),
            _expression(
                "C",
                {
                    "type": "threshold",
                    "expression": "B",
                    "conditions": [{"evaluator": {"type": rule.comparison, "params": [rule.threshold]}}],
                },
            ),
        ],
        "noDataState": rule.no_data_state,
        "execErrState": "Error",
        "for": prometheus_duration(rule.for_s),
        "annotations": annotations,
        "labels": {"source": "crashreg", "severity": rule.severity, **rule.labels},
        "isPaused": False,
    }


def rule_group(title: str, folder_uid: str, interval_s: int, rules: list[ProvisionedAlertRule]) -> RuleGroup:
    return {"title": title, "folderUid": folder_uid, "interval": interval_s, "rules": rules}


def file_provisioning(group: RuleGroup, folder_title: str) -> dict[str, Any]:
    """Grafana's alerting file-provisioning document for one rule group (apiVersion 1).

    The file names its folder by title (Grafana creates it if missing); the dashboard link
    moves from annotations to `dashboardUid`/`panelId`, as Grafana's own export writes it.
    """
    rules = []
    for rule in group["rules"]:
        annotations = dict(rule["annotations"])
        dashboard_uid = annotations.pop(DASHBOARD_UID_ANNOTATION, None)
        panel = annotations.pop(PANEL_ID_ANNOTATION, None)
        exported: dict[str, Any] = {
            "uid": rule["uid"],
            "title": rule["title"],
            "condition": rule["condition"],
            "data": rule["data"],
        }
        if dashboard_uid is not None and panel is not None:
            exported.update(dashboardUid=dashboard_uid, panelId=int(panel))
        exported.update(
            noDataState=rule["noDataState"],
            execErrState=rule["execErrState"],
            annotations=annotations,
            labels=rule["labels"],
            isPaused=rule["isPaused"],
        )
        exported["for"] = rule["for"]
        rules.append(exported)
    return {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": ORG_ID,
                "name": group["title"],
                "folder": folder_title,
                "interval": prometheus_duration(group["interval"]),
                "rules": rules,
            }
        ],
    }


# -- Grafana's alert-rule shape ---------------------------------------------------------------


def _problems_of_data(data: Any, condition: Any) -> list[str]:
    if not isinstance(data, list) or not data:
        return ["data: no queries or expressions"]
    problems: list[str] = []
    ref_ids = [query.get("refId") for query in data if isinstance(query, dict)]
    if len(ref_ids) != len(data) or not all(ref_ids):
        return ["data: every query needs a refId"]
    if len(set(ref_ids)) != len(ref_ids):
        problems.append(f"data: duplicate refIds {ref_ids}")
    if condition not in ref_ids:
        problems.append(f"condition {condition!r} is not one of the refIds {ref_ids}")
    for query in data:
        ref = query["refId"]
        model = query.get("model")
        if not isinstance(model, dict) or model.get("refId") != ref:
            problems.append(f"{ref}: the model must repeat the refId")
            continue
        span = query.get("relativeTimeRange") or {}
        is_expression = query.get("datasourceUid") == EXPRESSION_DATASOURCE["uid"]
        if not is_expression:
            if not query.get("datasourceUid"):
                problems.append(f"{ref}: no datasourceUid")
            if not (
                isinstance(span.get("from"), int)
                and isinstance(span.get("to"), int)
                and span["from"] > span["to"] >= 0
            ):
                problems.append(
                    f"{ref}: relativeTimeRange must have from > to >= 0 (seconds ago), got {span}"
                )
            if not (model.get("rawSql") or model.get("rawQueryText")):
                problems.append(f"{ref}: no SQL")
            continue
        problems += _problems_of_expression(ref, model, ref_ids)
    return problems


def _problems_of_expression(ref: str, model: dict[str, Any], ref_ids: list[Any]) -> list[str]:
    kind = model.get("type")
    problems = []
    if model.get("expression") not in ref_ids or model.get("expression") == ref:
        problems.append(f"{ref}: expression must name another refId, got {model.get('expression')!r}")
    if kind == "reduce":
        if model.get("reducer") not in REDUCERS:
            problems.append(f"{ref}: reducer {model.get('reducer')!r} is not one of {REDUCERS}")
    elif kind == "threshold":
        conditions = model.get("conditions")
        evaluator = conditions[0].get("evaluator", {}) if isinstance(conditions, list) and conditions else {}
        params = evaluator.get("params")
        wanted = 2 if evaluator.get("type") in ("within_range", "outside_range") else 1
        if evaluator.get("type") not in THRESHOLD_TYPES:
            problems.append(
                f"{ref}: threshold type {evaluator.get('type')!r} is not one of {THRESHOLD_TYPES}"
            )
        elif not (
            isinstance(params, list)
            and len(params) >= wanted
            and all(isinstance(p, int | float) for p in params)
        ):
            problems.append(f"{ref}: threshold needs {wanted} numeric param(s), got {params!r}")
    else:
        problems.append(f"{ref}: expression type {kind!r} is not reduce or threshold")
    return problems


def rule_problems(rule: dict[str, Any]) -> list[str]:
    """What Grafana would refuse (or mis-evaluate) in a ProvisionedAlertRule; empty when fit."""
    problems = [f"missing {name}" for name in REQUIRED_RULE_FIELDS if name not in rule]
    if problems:
        return problems
    if not UID_PATTERN.match(str(rule["uid"])):
        problems.append(f"uid {rule['uid']!r}: 1-40 letters, digits, - or _")
    for name in ("title", "ruleGroup"):
        if not 1 <= len(str(rule[name])) <= 190:
            problems.append(f"{name}: 1 to 190 characters")
    if not rule["folderUID"]:
        problems.append("folderUID must be set")
    if rule["noDataState"] not in NO_DATA_STATES:
        problems.append(f"noDataState {rule['noDataState']!r} is not one of {NO_DATA_STATES}")
    if rule["execErrState"] not in EXEC_ERR_STATES:
        problems.append(f"execErrState {rule['execErrState']!r} is not one of {EXEC_ERR_STATES}")
    if not DURATION_PATTERN.match(str(rule["for"])):
        problems.append(f"for {rule['for']!r} is not a duration")
    annotations, labels = rule.get("annotations") or {}, rule.get("labels") or {}
    if bool(annotations.get(DASHBOARD_UID_ANNOTATION)) != bool(annotations.get(PANEL_ID_ANNOTATION)):
        problems.append(f"both annotations {DASHBOARD_UID_ANNOTATION} and {PANEL_ID_ANNOTATION} must be set")
    if annotations.get(PANEL_ID_ANNOTATION) and not str(annotations[PANEL_ID_ANNOTATION]).isdigit():
        problems.append(f"{PANEL_ID_ANNOTATION} must be an integer panel id")
    problems += [f"label {name} is reserved by Grafana" for name in labels if name in RESERVED_LABELS]
    return problems + _problems_of_data(rule["data"], rule["condition"])


def group_problems(group: dict[str, Any]) -> list[str]:
    """A rule group's own problems (interval) and each rule's, named by uid."""
    interval = group.get("interval")
    problems = []
    if not isinstance(interval, int) or interval <= 0 or interval % BASE_INTERVAL_S:
        problems.append(f"interval {interval!r}: a positive multiple of {BASE_INTERVAL_S} s")
    uids = [rule.get("uid") for rule in group.get("rules", [])]
    if len(set(uids)) != len(uids):
        problems.append(f"duplicate rule uids {uids}")
    for rule in group.get("rules", []):
        if rule.get("ruleGroup") != group.get("title") or rule.get("folderUID") != group.get("folderUid"):
            problems.append(f"{rule.get('uid')}: ruleGroup/folderUID differ from the group's")
        problems += [f"{rule.get('uid')}: {problem}" for problem in rule_problems(rule)]
    return problems
