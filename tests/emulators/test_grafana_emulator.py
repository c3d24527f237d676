"""The Grafana emulator behaves like Grafana 11 when driven by the real grafana-client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from grafana_client import GrafanaApi
from grafana_client.client import (
    GrafanaClientError,
    GrafanaServerError,
    GrafanaUnauthorizedError,
)

from tests.emulators.grafana import RunningGrafana, serve_grafana


@pytest.fixture
def grafana() -> Iterator[RunningGrafana]:
    with serve_grafana(extra_tokens={"glsa_viewer": "Viewer"}) as running:
        yield running


@pytest.fixture
def api(grafana: RunningGrafana) -> GrafanaApi:
    return GrafanaApi.from_url(grafana.url, credential=grafana.token)


def dashboard(uid: str, title: str, version: int | None = None) -> dict:
    body = {"uid": uid, "title": title, "schemaVersion": 39, "panels": []}
    if version is not None:
        body["version"] = version
    return body


def test_health_and_version(api: GrafanaApi) -> None:
    assert api.version == "11.3.1"
    assert api.client.GET("/health")["database"] == "ok"


def test_unknown_or_missing_token_is_401(grafana: RunningGrafana) -> None:
    with pytest.raises(GrafanaUnauthorizedError):
        GrafanaApi.from_url(grafana.url, credential="glsa_wrong").folder.get_all_folders()
    with pytest.raises(GrafanaUnauthorizedError):
        GrafanaApi.from_url(grafana.url).folder.get_all_folders()


def test_viewer_token_cannot_write(grafana: RunningGrafana) -> None:
    viewer = GrafanaApi.from_url(grafana.url, credential="glsa_viewer")
    assert viewer.folder.get_all_folders() == []
    with pytest.raises(GrafanaClientError) as err:
        viewer.folder.create_folder("Crashes", uid="crashes")
    assert err.value.status_code == 403


def test_datasource_secure_json_is_write_only(grafana: RunningGrafana, api: GrafanaApi) -> None:
    created = api.datasource.create_datasource(
        {
            "uid": "crashreg-pg",
            "name": "crashreg",
            "type": "grafana-postgresql-datasource",
            "url": "127.0.0.1:5432",
            "user": "grafana_ro",
            "jsonData": {"database": "crashreg", "sslmode": "disable"},
            "secureJsonData": {"password": "s3cret"},
        }
    )
    assert created["message"] == "Datasource added"
    fetched = api.datasource.get_datasource_by_uid("crashreg-pg")
    assert fetched["secureJsonFields"] == {"password": True}
    assert "secureJsonData" not in fetched and "s3cret" not in str(fetched)
    assert grafana.state.secure_json["crashreg-pg"] == {"password": "s3cret"}

    # Updating without secureJsonData keeps the stored secret; version increments.
    fetched["jsonData"]["database"] = "crashreg2"
    updated = api.datasource.update_datasource_by_uid("crashreg-pg", fetched)
    assert updated["datasource"]["version"] == 2
    assert grafana.state.secure_json["crashreg-pg"] == {"password": "s3cret"}
    assert api.datasource.get_datasource_by_name("crashreg")["jsonData"]["database"] == "crashreg2"


def test_datasource_duplicates_are_409(api: GrafanaApi) -> None:
    api.datasource.create_datasource({"uid": "a", "name": "one", "type": "x"})
    for body in (
        {"uid": "a", "name": "two", "type": "x"},
        {"uid": "b", "name": "one", "type": "x"},
    ):
        with pytest.raises(GrafanaClientError) as err:
            api.datasource.create_datasource(body)
        assert err.value.status_code == 409
    with pytest.raises(GrafanaClientError) as err:
        api.datasource.get_datasource_by_uid("missing")
    assert err.value.status_code == 404


def test_folders_uid_title_and_version(api: GrafanaApi) -> None:
    folder = api.folder.create_folder("Crash registry", uid="crashreg")
    assert folder["version"] == 1 and folder["uid"] == "crashreg"
    with pytest.raises(GrafanaClientError) as err:
        api.folder.create_folder("Other", uid="crashreg")
    assert err.value.status_code == 409
    with pytest.raises(GrafanaClientError) as err:
        api.folder.create_folder("crash registry")
    assert err.value.status_code == 409
    with pytest.raises(GrafanaClientError) as err:
        api.folder.update_folder("crashreg", title="Renamed", version=7)
    assert err.value.status_code == 412
    renamed = api.folder.update_folder("crashreg", title="Renamed", version=1)
    assert renamed["version"] == 2 and api.folder.get_folder("crashreg")["title"] == "Renamed"
    with pytest.raises(GrafanaClientError) as err:
        api.folder.get_folder("nope")
    assert err.value.status_code == 404


def test_dashboard_versions_increment_and_conflicts(api: GrafanaApi) -> None:
    api.folder.create_folder("Crash registry", uid="crashreg")
    first = api.dashboard.update_dashboard(
        {"dashboard": dashboard("fleet", "Fleet"), "folderUid": "crashreg", "message": "v0.1.0"}
    )
    assert first["version"] == 1 and first["status"] == "success"

    # Stale version without overwrite: 412 version-mismatch.
    with pytest.raises(GrafanaClientError) as err:
        api.dashboard.update_dashboard(
            {"dashboard": dashboard("fleet", "Fleet", version=0), "folderUid": "crashreg"}
        )
    assert err.value.status_code == 412 and err.value.response["status"] == "version-mismatch"

    # Current version saves; every save is a new version, even with identical content.
    second = api.dashboard.update_dashboard(
        {"dashboard": dashboard("fleet", "Fleet", version=1), "folderUid": "crashreg"}
    )
    assert second["version"] == 2
    forced = api.dashboard.update_dashboard(
        {"dashboard": dashboard("fleet", "Fleet"), "folderUid": "crashreg", "overwrite": True}
    )
    assert forced["version"] == 3

    # Another uid with the same title in the same folder: 412 name-exists.
    with pytest.raises(GrafanaClientError) as err:
        api.dashboard.update_dashboard({"dashboard": dashboard("other", "Fleet"), "folderUid": "crashreg"})
    assert err.value.status_code == 412 and err.value.response["status"] == "name-exists"

    got = api.dashboard.get_dashboard("fleet")
    assert got["meta"]["version"] == 3 and got["dashboard"]["version"] == 3
    assert got["meta"]["folderUid"] == "crashreg"
    versions = api.dashboard_versions.get_dashboard_versions_by_uid("fleet")["versions"]
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert versions[-1]["message"] == "v0.1.0"

    with pytest.raises(GrafanaClientError) as err:
        api.dashboard.get_dashboard("missing")
    assert err.value.status_code == 404
    with pytest.raises(GrafanaClientError) as err:
        api.dashboard.update_dashboard({"dashboard": dashboard("x", "X"), "folderUid": "nope"})
    assert err.value.status_code == 400


def test_search_by_type_folder_and_query(api: GrafanaApi) -> None:
    api.folder.create_folder("Crash registry", uid="crashreg")
    api.dashboard.update_dashboard({"dashboard": dashboard("a", "Fleet overview"), "folderUid": "crashreg"})
    api.dashboard.update_dashboard({"dashboard": dashboard("b", "Epidemiology")})
    folders = api.search.search_dashboards(type_="dash-folder")
    assert [f["uid"] for f in folders] == ["crashreg"]
    in_folder = api.search.search_dashboards(type_="dash-db", folder_uids=["crashreg"])
    assert [d["uid"] for d in in_folder] == ["a"]
    assert [d["uid"] for d in api.search.search_dashboards(query="epidem")] == ["b"]


def test_annotations_tags_and_time_range(api: GrafanaApi) -> None:
    api.annotations.add_annotation(time_from=1000, tags=["crashreg", "first-seen"], text="new sig")
    api.annotations.add_annotation(time_from=5000, time_to=6000, tags=["crashreg", "rollout"], text="k")
    with pytest.raises(GrafanaClientError) as err:
        api.annotations.add_annotation(time_from=1, tags=["x"], text="")
    assert err.value.status_code == 400
    both = api.annotations.find_annotations(tags=["crashreg"])
    assert [a["text"] for a in both] == ["k", "new sig"]
    assert [a["text"] for a in api.annotations.find_annotations(tags=["crashreg", "rollout"])] == ["k"]
    in_range = api.annotations.find_annotations(time_from=5500, time_to=9000)
    assert [a["text"] for a in in_range] == ["k"]


def test_injected_failures_are_served_then_recover(grafana: RunningGrafana, api: GrafanaApi) -> None:
    grafana.fail_next(503)
    with pytest.raises(GrafanaServerError):
        api.folder.get_all_folders()
    assert api.folder.get_all_folders() == []
