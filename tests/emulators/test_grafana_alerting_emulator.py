"""The emulator's alerting provisioning API behaves like Grafana 11's, through grafana-client."""

from __future__ import annotations

from typing import Any

import pytest
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError

from tests.emulators.grafana import RunningGrafana
from tests.support.grafana import FOLDER, alert_rule


@pytest.fixture
def api(grafana: RunningGrafana) -> GrafanaApi:
    client = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    client.folder.create_folder("Alerts", uid=FOLDER)
    return client


def status_of(call: Any) -> tuple[int, str]:
    with pytest.raises(GrafanaClientError) as caught:
        call()
    return caught.value.status_code, str(caught.value.message)


def test_created_rule_reads_back_as_grafana_stores_it(api: GrafanaApi) -> None:
    created = api.alertingprovisioning.create_alertrule(alert_rule("r1", "first"))
    assert created["uid"] == "r1" and created["provenance"] == "api"
    held = api.alertingprovisioning.get_alertrule("r1")
    assert held["for"] == "5m", "durations come back in Prometheus form"
    query = held["data"][0]
    assert query["model"]["intervalMs"] == 1000 and query["model"]["maxDataPoints"] == 43200
    assert held["data"][1]["model"]["intervalMs"] == 1000
    assert "updated" in held and held["id"] >= 1
    group = api.alertingprovisioning.get_rule_group(FOLDER, "g1")
    assert group["interval"] == 60 and [r["uid"] for r in group["rules"]] == ["r1"]
    assert [r["uid"] for r in api.alertingprovisioning.get_alertrules_all()] == ["r1"]


def test_missing_rules_and_groups_are_404(api: GrafanaApi) -> None:
    assert status_of(lambda: api.alertingprovisioning.get_alertrule("nope"))[0] == 404
    assert status_of(lambda: api.alertingprovisioning.get_rule_group(FOLDER, "nope"))[0] == 404
    missing = alert_rule("nope", "x")
    assert status_of(lambda: api.alertingprovisioning.update_alertrule("nope", missing))[0] == 404


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"title": ""}, "title is empty"),
        ({"data": []}, "no queries or expressions"),
        ({"noDataState": "Maybe"}, "unknown NoData state"),
        ({"execErrState": "Panic"}, "unknown Execution Error state"),
        ({"folderUID": "missing"}, "folder does not exist"),
        ({"annotations": {"__dashboardUid__": "d"}}, "__panelId__ must be specified"),
        ({"annotations": {"__dashboardUid__": "d", "__panelId__": "x"}}, "valid integer Panel ID"),
        ({"labels": {"alertname": "mine"}}, "system reserved label alertname"),
        ({"uid": "has space"}, "cannot create rule with UID"),
    ],
)
def test_invalid_rules_are_400_with_grafanas_message(api: GrafanaApi, change: dict, message: str) -> None:
    body = {**alert_rule("r1", "t"), **change}
    status, text = status_of(lambda: api.alertingprovisioning.create_alertrule(body))
    assert status == 400 and message in text


def test_data_source_query_needs_a_relative_time_range(api: GrafanaApi) -> None:
    body = alert_rule("r1", "t")
    body["data"][0]["relativeTimeRange"] = {"from": 0, "to": 0}
    status, text = status_of(lambda: api.alertingprovisioning.create_alertrule(body))
    assert status == 400 and "invalid relative time range" in text
    body["data"][0]["relativeTimeRange"] = {"from": 600, "to": 0}
    body["data"][1].pop("relativeTimeRange", None)  # expressions need none
    assert api.alertingprovisioning.create_alertrule(body)["uid"] == "r1"


@pytest.mark.parametrize(
    ("interval", "message"),
    [
        (0, "divided exactly by scheduler interval: 10"),
        (15, "divided exactly by scheduler interval: 10"),
        (-10, "divided exactly by scheduler interval: 10"),
        ("1m", "bad request data"),
    ],
)
def test_rule_group_interval_must_be_a_multiple_of_the_base_interval(
    api: GrafanaApi, interval: Any, message: str
) -> None:
    group = {"title": "g1", "folderUid": FOLDER, "interval": interval, "rules": [alert_rule("r1", "t")]}
    status, text = status_of(lambda: api.alertingprovisioning.update_rule_group(FOLDER, "g1", group))
    assert status == 400 and message in text


def test_rule_group_put_replaces_the_group_and_moves_named_rules(
    api: GrafanaApi, grafana: RunningGrafana
) -> None:
    api.alertingprovisioning.create_alertrule(alert_rule("elsewhere", "other group", group="g2"))
    group = {
        "title": "g1",
        "folderUid": FOLDER,
        "interval": 120,
        "rules": [alert_rule("r1", "one"), alert_rule("r2", "two")],
    }
    api.alertingprovisioning.update_rule_group(FOLDER, "g1", group)
    versions = {uid: r["version"] for uid, r in grafana.state.alerting.rules.items()}
    api.alertingprovisioning.update_rule_group(FOLDER, "g1", group)  # the same again: nothing changes
    assert {uid: r["version"] for uid, r in grafana.state.alerting.rules.items()} == versions
    held = api.alertingprovisioning.get_rule_group(FOLDER, "g1")
    assert held["interval"] == 120 and [r["uid"] for r in held["rules"]] == ["r1", "r2"]
    api.alertingprovisioning.update_rule_group(
        FOLDER, "g1", {**group, "rules": [alert_rule("r2", "two"), alert_rule("elsewhere", "other group")]}
    )
    assert set(grafana.state.alerting.rules) == {"r2", "elsewhere"}, "r1 left out: deleted"
    assert grafana.state.alerting.rules["elsewhere"]["ruleGroup"] == "g1", "named from g2: moved"
    assert status_of(lambda: api.alertingprovisioning.get_rule_group(FOLDER, "g2"))[0] == 404


def test_rule_titles_are_unique_within_a_folder(api: GrafanaApi) -> None:
    api.alertingprovisioning.create_alertrule(alert_rule("r1", "crash rate"))
    conflict = "rule title under the same organisation and folder should be unique"
    rules = api.alertingprovisioning
    status, text = status_of(lambda: rules.create_alertrule(alert_rule("r2", "crash rate")))
    assert status == 400 and conflict in text and "rule_uid: 'r2'" in text
    other_group = alert_rule("r2", "crash rate", group="g2")
    assert status_of(lambda: api.alertingprovisioning.create_alertrule(other_group))[0] == 400, "folder-wide"
    api.folder.create_folder("Other", uid="other")
    assert api.alertingprovisioning.create_alertrule({**alert_rule("r3", "crash rate"), "folderUID": "other"})
    api.alertingprovisioning.create_alertrule(alert_rule("r4", "savings"))
    status, text = status_of(lambda: rules.update_alertrule("r4", alert_rule("r4", "crash rate")))
    assert status == 400 and conflict in text
    assert api.alertingprovisioning.update_alertrule("r1", alert_rule("r1", "crash rate", isPaused=True))

    def group(*rules: dict[str, Any]) -> dict[str, Any]:
        return {"title": "g1", "folderUid": FOLDER, "interval": 60, "rules": list(rules)}

    twice = group(alert_rule("r1", "same"), alert_rule("r4", "same"))
    assert status_of(lambda: api.alertingprovisioning.update_rule_group(FOLDER, "g1", twice))[0] == 400
    renamed = group(alert_rule("r5", "crash rate"))  # r1 and r4 left out: deleted by the same PUT
    api.alertingprovisioning.update_rule_group(FOLDER, "g1", renamed)
    assert [r["title"] for r in rules.get_rule_group(FOLDER, "g1")["rules"]] == ["crash rate"]


def test_provenance_follows_x_disable_provenance(api: GrafanaApi) -> None:
    api.alertingprovisioning.create_alertrule(alert_rule("editable", "editable"), disable_provenance=True)
    assert "provenance" not in api.alertingprovisioning.get_alertrule("editable")
    api.alertingprovisioning.create_alertrule(alert_rule("locked", "locked"))
    assert api.alertingprovisioning.get_alertrule("locked")["provenance"] == "api"
    # An API-provisioned rule cannot be taken over by an editable (provenance none) write...
    status, text = status_of(
        lambda: api.alertingprovisioning.update_alertrule(
            "locked", alert_rule("locked", "x"), disable_provenance=True
        )
    )
    assert status == 403 and "provenance status 'api'" in text
    # ...but a rule without provenance may be provisioned through the API.
    api.alertingprovisioning.update_alertrule("editable", alert_rule("editable", "now provisioned"))
    assert api.alertingprovisioning.get_alertrule("editable")["provenance"] == "api"


def test_file_provisioned_rules_are_not_changed_through_the_api(
    api: GrafanaApi, grafana: RunningGrafana
) -> None:
    group = {"title": "g1", "folderUid": FOLDER, "interval": 60, "rules": [alert_rule("r1", "one")]}
    api.alertingprovisioning.update_rule_group(FOLDER, "g1", group)
    grafana.state.alerting.rules["r1"]["provenance"] = "file"  # as Grafana's file provisioning marks it
    changed = {**group, "rules": [alert_rule("r1", "renamed")]}
    status, text = status_of(lambda: api.alertingprovisioning.update_rule_group(FOLDER, "g1", changed))
    assert status == 403 and "provenance status 'file'" in text
    assert grafana.state.alerting.rules["r1"]["title"] == "one"


def test_contact_points_policies_and_templates(api: GrafanaApi) -> None:
    ap = api.alertingprovisioning
    assert [cp["name"] for cp in ap.get_contactpoints()] == ["grafana-default-email"]
    point = ap.create_contactpoint(
        {"name": "oncall", "type": "webhook", "settings": {"url": "http://127.0.0.1:9/"}}
    )
    assert point["uid"] and ap.get_contactpoints(name="oncall")[0]["provenance"] == "api"
    assert status_of(lambda: ap.create_contactpoint({"name": "x"}))[0] == 400
    unknown = {"receiver": "grafana-default-email", "routes": [{"receiver": "nobody"}]}
    status, text = status_of(lambda: ap.set_notification_policy_tree(unknown))
    assert status == 400 and "receiver 'nobody' does not exist" in text
    tree = {
        "receiver": "grafana-default-email",
        "routes": [{"receiver": "oncall", "object_matchers": [["a", "=", "b"]]}],
    }
    assert ap.set_notification_policy_tree(tree) == {"message": "policies updated"}
    assert ap.get_notification_policy_tree()["routes"][0]["receiver"] == "oncall"
    assert status_of(lambda: ap.delete_contactpoint(point["uid"]))[0] == 409, "used by a policy"
    first = ap.create_or_update_template("crashreg", {"template": '{{ define "crashreg" }}x{{ end }}'})
    second = ap.create_or_update_template("crashreg", {"template": "y", "version": first["version"]})
    status, _ = status_of(
        lambda: ap.create_or_update_template("crashreg", {"template": "z", "version": first["version"]})
    )
    assert status == 409, "a stale version conflicts"
    assert ap.get_template("crashreg")["template"] == "y" and second["version"] != first["version"]
    assert status_of(lambda: ap.get_template("absent"))[0] == 404
