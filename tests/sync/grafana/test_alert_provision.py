"""`crashreg grafana provision` and `export` for the alert rules, against the Grafana emulator."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from grafana_client import GrafanaApi

from dashboards import FOLDER_TITLE, FOLDER_UID
from dashboards.alerts import GROUP
from registry.config import JiraSettings, Settings
from registry.db import Database
from sync.grafana.alerting import AlertRulesInvalid, plan_group
from sync.grafana.datasource import datasource_spec
from sync.grafana.export import next_steps
from sync.grafana.service import provision
from tests.emulators.grafana import RunningGrafana
from tests.support.grafana import alert_rule as foreign_rule
from tests.support.grafana import run_cli

RULES = 10  # without a Jira sync configured
JIRA = {"jira": JiraSettings(url="http://127.0.0.1:9", token="t", project="CRASH")}


def alert_writes(grafana: RunningGrafana) -> list[tuple[str, str]]:
    return [(m, p) for m, p in grafana.state.requests if m != "GET" and "/api/v1/provisioning/" in p]


def alert_actions(result: Any) -> dict[str, str]:
    return {o.uid: o.action for o in result.report.outcomes if o.kind.startswith("alert")}


def with_alerts(settings: Settings, **changes: Any) -> Settings:
    return dataclasses.replace(settings, alerts=dataclasses.replace(settings.alerts, **changes))


def test_rules_land_in_their_own_group_and_a_second_run_writes_nothing(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    first = provision(grafana_settings, database)
    assert set(alert_actions(first).values()) == {"created"} and len(alert_actions(first)) == RULES
    rules = grafana.state.alerting.rules
    assert len(rules) == RULES
    assert {(r["folderUID"], r["ruleGroup"], r["provenance"], r["interval_s"]) for r in rules.values()} == {
        (FOLDER_UID, GROUP, "api", 300)
    }
    writes = alert_writes(grafana)
    assert writes == [("PUT", f"/api/v1/provisioning/folder/{FOLDER_UID}/rule-groups/{GROUP}")]
    second = provision(grafana_settings, database)
    assert set(alert_actions(second).values()) == {"unchanged"}
    assert alert_writes(grafana) == writes, "a second run must not write"


def test_what_the_operator_made_is_never_touched(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    api.folder.create_folder(FOLDER_TITLE, uid=FOLDER_UID)
    ap = api.alertingprovisioning
    ap.create_contactpoint(
        {"name": "fleet-oncall", "type": "webhook", "settings": {"url": "http://127.0.0.1:9"}}
    )
    ap.set_notification_policy_tree(
        {
            "receiver": "grafana-default-email",
            "routes": [{"receiver": "fleet-oncall", "object_matchers": [["source", "=", "crashreg"]]}],
        }
    )
    ap.create_or_update_template("fleet", {"template": '{{ define "fleet" }}{{ .CommonLabels }}{{ end }}'})
    ap.update_rule_group(
        FOLDER_UID,
        "operators",
        {
            "title": "operators",
            "folderUid": FOLDER_UID,
            "interval": 60,
            "rules": [foreign_rule("mine", "the operator's rule", group="operators")],
        },
    )
    ap.create_alertrule({**foreign_rule("elsewhere", "elsewhere", group="g"), "folderUID": FOLDER_UID})
    before = copy.deepcopy(grafana.state.alerting)
    operator_writes = len(alert_writes(grafana))
    provision(grafana_settings, database)
    provision(grafana_settings, database)
    after = grafana.state.alerting
    assert after.contact_points == before.contact_points and after.policies == before.policies
    assert after.templates == before.templates
    for uid in ("mine", "elsewhere"):
        assert after.rules[uid] == before.rules[uid]
    assert [p for _, p in alert_writes(grafana)[operator_writes:]] == [
        f"/api/v1/provisioning/folder/{FOLDER_UID}/rule-groups/{GROUP}"
    ]


def test_a_rule_crashreg_did_not_create_in_its_group_stops_the_group(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    api.folder.create_folder(FOLDER_TITLE, uid=FOLDER_UID)
    api.alertingprovisioning.create_alertrule(
        {**foreign_rule("mine", "hand made", group=GROUP), "folderUID": FOLDER_UID}
    )
    result = provision(grafana_settings, database)
    outcome = next(o for o in result.report.outcomes if o.kind == "alert-group")
    assert outcome.action == "conflict" and "rule mine ('hand made')" in outcome.detail
    assert set(grafana.state.alerting.rules) == {"mine"}, "nothing deleted, nothing written"


def test_a_crashreg_uid_used_in_another_group_stops_the_group(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    api.folder.create_folder("Other", uid="other")
    taken = {**foreign_rule("crashreg-ingest-silence", "my silence rule", group="mine"), "folderUID": "other"}
    api.alertingprovisioning.create_alertrule(taken)
    result = provision(grafana_settings, database)
    outcome = next(o for o in result.report.outcomes if o.kind == "alert-group")
    assert outcome.action == "conflict" and "taken by 'my silence rule' in folder other" in outcome.detail
    assert grafana.state.alerting.rules["crashreg-ingest-silence"]["ruleGroup"] == "mine", "not moved"


def test_a_rule_changed_in_grafana_is_kept_unless_forced(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(grafana_settings, database)
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    edited = api.alertingprovisioning.get_alertrule("crashreg-failed-captures")
    edited["data"][2]["model"]["conditions"][0]["evaluator"]["params"] = [0.9]
    api.alertingprovisioning.update_alertrule("crashreg-failed-captures", edited)
    kept = alert_actions(provision(grafana_settings, database))
    assert kept.pop("crashreg-failed-captures") == "kept-edited"
    assert set(kept.values()) == {"unchanged"}

    def held_threshold() -> float:
        rule = grafana.state.alerting.rules["crashreg-failed-captures"]
        return rule["data"][2]["model"]["conditions"][0]["evaluator"]["params"][0]

    assert held_threshold() == 0.9
    forced = alert_actions(provision(grafana_settings, database, force=True))
    assert forced["crashreg-failed-captures"] == "overwritten" and held_threshold() == 0.2
    assert set(alert_actions(provision(grafana_settings, database)).values()) == {"unchanged"}


def test_new_thresholds_and_interval_update_without_force(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(grafana_settings, database)
    changed = with_alerts(grafana_settings, failed_capture_share=0.4, interval_s=600)
    actions = alert_actions(provision(changed, database))
    assert actions.pop("crashreg-failed-captures") == "updated"
    assert actions.pop(GROUP) == "updated"
    assert set(actions.values()) == {"unchanged"}
    rule = grafana.state.alerting.rules["crashreg-failed-captures"]
    assert rule["data"][2]["model"]["conditions"][0]["evaluator"]["params"] == [0.4]
    assert rule["interval_s"] == 600


def test_rules_crashreg_no_longer_defines_are_removed(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(dataclasses.replace(grafana_settings, **JIRA), database)
    assert "crashreg-jira-sync-behind" in grafana.state.alerting.rules
    actions = alert_actions(provision(grafana_settings, database))
    assert actions["crashreg-jira-sync-behind"] == "removed"
    assert len(grafana.state.alerting.rules) == RULES


def test_grafana_refusing_the_group_is_reported(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(grafana_settings, database)
    grafana.state.alerting.rules["crashreg-ingest-silence"]["provenance"] = (
        "file"  # also provisioned from files
    )
    result = provision(with_alerts(grafana_settings, silence_minutes=60), database)
    outcome = next(o for o in result.report.outcomes if o.kind == "alert-group")
    assert outcome.action == "conflict" and "provenance status 'file'" in outcome.detail


def test_a_bad_interval_setting_fails_before_any_alerting_write(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    with pytest.raises(AlertRulesInvalid, match="interval 45"):
        provision(with_alerts(grafana_settings, interval_s=45), database)
    assert alert_writes(grafana) == []


def test_next_steps_for_a_grafana_admin() -> None:
    sqlite = datasource_spec(Settings(database_url="sqlite:////var/lib/crashreg.db"))
    steps = "\n".join(next_steps(Path("/tmp/out"), sqlite, "/etc/grafana/provisioning"))
    assert "/tmp/out/provisioning/* to /etc/grafana/provisioning/" in steps
    assert "grafana cli plugins install frser-sqlite-datasource" in steps
    assert "/var/lib/crashreg-grafana.db" in steps and "source=crashreg" in steps
    postgres = datasource_spec(Settings(database_url="postgresql://u:p@db/crashreg"))
    steps = "\n".join(next_steps(Path("/tmp/out"), postgres, "/srv/grafana/provisioning/"))
    assert "CRASHREG_GRAFANA_DB_PASSWORD" in steps and "frser" not in steps
    assert "/srv/grafana/provisioning/dashboards/crashreg" in steps


def test_a_grafana_without_the_alerting_api_is_reported_after_the_dashboards(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    grafana.fail_next(404, on="/api/v1/provisioning/alert-rules")  # unified alerting switched off
    result = provision(grafana_settings, database)
    outcome = next(o for o in result.report.outcomes if o.kind == "alert-group")
    assert outcome.action == "conflict" and "no alerting provisioning API" in outcome.detail
    assert len(grafana.state.dashboards) == 5 and grafana.state.alerting.rules == {}


def test_export_refuses_rules_grafana_would_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "CRASHREG_DATABASE_URL": f"sqlite:///{tmp_path / 'registry.db'}",
        "CRASHREG_ALERT_INTERVAL_S": "45",
    }
    result = run_cli(monkeypatch, ["grafana", "export", str(tmp_path / "out")], env)
    assert result.exit_code == 1 and "interval 45: a positive multiple of 10 s" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["grafana", "export", "out"], ["grafana", "provision"]])
def test_a_bad_threshold_setting_is_one_error_line(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(monkeypatch, command, {"CRASHREG_ALERT_SILENCE_MINUTES": "lots"})
    assert result.exit_code == 1
    assert result.output.strip() == "Error: CRASHREG_ALERT_SILENCE_MINUTES must be a number, got 'lots'"


def test_plan_adopts_identical_rules_and_keeps_foreign_content() -> None:
    """Plain data: a rule identical to crashreg's but not recorded (a new registry database
    against the same Grafana) is adopted without a write; a different one is not crashreg's."""
    wanted = {
        "title": GROUP,
        "folderUid": FOLDER_UID,
        "interval": 300,
        "rules": [foreign_rule("crashreg-a", "a", group=GROUP), foreign_rule("crashreg-b", "b", group=GROUP)],
    }
    held = {
        "crashreg-a": {**copy.deepcopy(wanted["rules"][0]), "id": 7, "updated": "then", "provenance": "api"},
        "crashreg-b": {**copy.deepcopy(wanted["rules"][1]), "title": "someone's b"},
    }
    plan = plan_group(wanted, held, recorded={}, force=False)
    assert [(o.uid, o.action) for o in plan.outcomes] == [
        ("crashreg-a", "unchanged"),
        ("crashreg-b", "kept-edited"),
    ]
    assert not plan.writes and list(plan.written) == ["crashreg-a"]
    assert plan.body[1]["title"] == "someone's b"
    forced = plan_group(wanted, held, recorded={}, force=True)
    assert [o.action for o in forced.outcomes] == ["unchanged", "overwritten"] and forced.writes
