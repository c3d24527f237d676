"""`crashreg grafana provision` against the Grafana emulator, through the real grafana-client."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaServerError
from sqlalchemy.engine import make_url

from dashboards import FOLDER_UID, build_dashboards
from registry.cli import main
from registry.config import GrafanaSettings, Settings
from registry.db import Database
from sync.grafana.datasource import datasource_spec, dialect_name
from sync.grafana.export import PASSWORD_ENV, export
from sync.grafana.provision import Provisioner
from sync.grafana.rollups import reporting_copy_path
from sync.grafana.service import provision
from testkit.grafana_sql import TimeRange, expand_target
from tests.emulators.grafana import RunningGrafana
from tests.support.grafana import run_cli
from tests.support.rollups import ingest_some

DASHBOARD_UIDS = {b["uid"] for b in build_dashboards("postgresql", "https://x")}


def writes(grafana: RunningGrafana) -> list[tuple[str, str]]:
    return [(m, p) for m, p in grafana.state.requests if m in ("POST", "PUT", "DELETE")]


def test_first_run_provisions_everything_second_run_changes_nothing(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    first = provision(grafana_settings, database)
    actions = {(o.kind, o.uid): o.action for o in first.report.outcomes}
    assert actions[("folder", FOLDER_UID)] == "created"
    assert set(actions.values()) == {"created"}
    assert {uid for kind, uid in actions if kind == "dashboard"} == DASHBOARD_UIDS

    state = grafana.state
    assert state.folders[FOLDER_UID]["title"] == "Crash registry"
    for uid in DASHBOARD_UIDS:
        record = state.dashboards[uid]
        assert record.folder_uid == FOLDER_UID and record.version == 1
        assert record.versions[0]["message"].startswith("crashreg 0.1.0")
    (datasource,) = state.datasources.values()
    if grafana_settings.database_url.startswith("postgresql"):
        url = make_url(grafana_settings.grafana.db_url or "")
        assert datasource["type"] == "grafana-postgresql-datasource"
        assert datasource["uid"] == "crashreg-postgres"
        assert datasource["user"] == url.username
        assert datasource["jsonData"]["database"] == url.database
        assert state.secure_json[datasource["uid"]] == {"password": url.password}
        assert first.role is not None and first.role.created and first.role.ok
    else:
        assert datasource["type"] == "frser-sqlite-datasource"
        assert datasource["jsonData"]["pathOptions"] == "mode=ro"
        copy = reporting_copy_path(grafana_settings.database_url)
        assert datasource["jsonData"]["path"] == str(copy) and copy.exists()

    before = len(writes(grafana))
    second = provision(grafana_settings, database)
    assert {o.action for o in second.report.outcomes} == {"unchanged"}
    assert len(writes(grafana)) == before, "a second run must not write to Grafana"
    assert all(state.dashboards[uid].version == 1 for uid in DASHBOARD_UIDS)
    if second.role is not None:
        assert not second.role.created and second.role.granted == []


def test_dashboard_edited_in_grafana_is_kept_unless_forced(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(grafana_settings, database)
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    edited = api.dashboard.get_dashboard("crashreg-fleet")["dashboard"]
    edited["panels"][0]["title"] = "Tuned by a manager"
    api.dashboard.update_dashboard({"dashboard": edited, "folderUid": FOLDER_UID, "message": "mine"})

    kept = provision(grafana_settings, database)
    outcome = next(o for o in kept.report.outcomes if o.uid == "crashreg-fleet")
    assert outcome.action == "kept-edited" and "version 1 -> 2" in outcome.detail
    held = grafana.state.dashboards["crashreg-fleet"]
    assert held.version == 2 and held.data["panels"][0]["title"] == "Tuned by a manager"
    assert {o.action for o in kept.report.outcomes if o.uid != "crashreg-fleet"} == {"unchanged"}

    forced = provision(grafana_settings, database, force=True)
    outcome = next(o for o in forced.report.outcomes if o.uid == "crashreg-fleet")
    assert outcome.action == "overwritten"
    assert held.version == 3 and held.data["panels"][0]["title"] == "Crashes per day"
    again = provision(grafana_settings, database)
    assert {o.action for o in again.report.outcomes} == {"unchanged"}


def test_new_registry_dashboards_update_without_force(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(grafana_settings, database)
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    boards = build_dashboards(dialect_name(grafana_settings), grafana_settings.public_url)
    boards[2]["description"] = "captures, revised in a new crashreg release"
    report = Provisioner(api, database).run(datasource_spec(grafana_settings), boards)
    actions = {o.uid: o.action for o in report.outcomes if o.kind == "dashboard"}
    assert actions.pop("crashreg-captures") == "updated"
    assert set(actions.values()) == {"unchanged"}
    assert grafana.state.dashboards["crashreg-captures"].version == 2


def test_dashboard_not_made_by_crashreg_is_not_taken_over(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    api = GrafanaApi.from_url(grafana.url, credential=grafana.token)
    api.folder.create_folder("Crash registry", uid=FOLDER_UID)
    api.dashboard.update_dashboard(
        {"dashboard": {"uid": "crashreg-triage", "title": "Someone's triage board"}, "folderUid": FOLDER_UID}
    )
    result = provision(grafana_settings, database)
    outcome = next(o for o in result.report.outcomes if o.uid == "crashreg-triage")
    assert outcome.action == "kept-edited"
    assert grafana.state.dashboards["crashreg-triage"].title == "Someone's triage board"


def test_grafana_outage_fails_the_run_and_the_next_run_recovers(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    grafana.fail_next(503)
    with pytest.raises(GrafanaServerError):
        provision(grafana_settings, database)
    # Down half-way: the folder, data source and the first dashboard are in, then a 502.
    grafana.fail_next(502, on="/api/dashboards/uid/crashreg-signature")
    with pytest.raises(GrafanaServerError):
        provision(grafana_settings, database)
    assert set(grafana.state.dashboards) == {"crashreg-fleet"}
    result = provision(grafana_settings, database)
    actions = {o.uid: o.action for o in result.report.outcomes if o.kind == "dashboard"}
    assert actions.pop("crashreg-fleet") == "unchanged"
    assert set(actions.values()) == {"created"}
    assert all(grafana.state.dashboards[uid].version == 1 for uid in DASHBOARD_UIDS)


def test_cli_provision_reports_kept_dashboards_with_exit_code(
    grafana_settings: Settings, grafana: RunningGrafana, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "CRASHREG_DATABASE_URL": grafana_settings.database_url,
        "CRASHREG_PUBLIC_URL": grafana_settings.public_url,
        "CRASHREG_GRAFANA_URL": grafana.url,
        "CRASHREG_GRAFANA_TOKEN": grafana.token,
        "CRASHREG_GRAFANA_DB_URL": grafana_settings.grafana.db_url or "",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()
    first = runner.invoke(main, ["grafana", "provision"])
    assert first.exit_code == 0, first.output
    assert "dashboard crashreg-fleet: created" in first.output
    record = grafana.state.dashboards["crashreg-epidemiology"]  # someone edits and saves it
    record.data, record.version = {**record.data, "description": "mine now"}, record.version + 1
    second = runner.invoke(main, ["grafana", "provision"])
    assert second.exit_code == 2
    assert "dashboard crashreg-epidemiology: kept-edited" in second.output
    forced = runner.invoke(main, ["grafana", "provision", "--force"])
    assert forced.exit_code == 0 and "crashreg-epidemiology: overwritten" in forced.output


def test_cli_without_grafana_configuration_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRASHREG_GRAFANA_URL", raising=False)
    result = run_cli(monkeypatch, ["grafana", "provision"], {})
    assert result.exit_code == 1 and "CRASHREG_GRAFANA_URL" in result.output


@pytest.mark.parametrize(
    "database_url", ["postgresql://registry:pw@db.internal:5433/crashreg", "sqlite:////var/lib/crashreg.db"]
)
def test_export_writes_grafana_file_provisioning_layout(tmp_path: Path, database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        grafana=GrafanaSettings(db_url="postgresql://crashreg_grafana:very-secret@db.internal:5433/crashreg"),
    )
    dialect = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    boards = build_dashboards(dialect, "https://crashreg.example")
    written = export(tmp_path, datasource_spec(settings), boards, "/etc/grafana/provisioning")
    root = tmp_path / "provisioning"
    (datasource,) = yaml.safe_load((root / "datasources/crashreg.yaml").read_text())["datasources"]
    (provider,) = yaml.safe_load((root / "dashboards/crashreg.yaml").read_text())["providers"]
    assert provider["folderUid"] == FOLDER_UID and provider["type"] == "file"
    assert provider["options"]["path"] == "/etc/grafana/provisioning/dashboards/crashreg"
    for board in boards:
        on_disk = json.loads((root / "dashboards/crashreg" / f"{board['uid']}.json").read_text())
        assert on_disk == board
    assert len(written) == 2 + len(boards)
    assert all("very-secret" not in path.read_text() for path in written)
    if dialect == "postgresql":
        assert datasource["uid"] == "crashreg-postgres" and datasource["url"] == "db.internal:5433"
        assert datasource["user"] == "crashreg_grafana"
        assert datasource["jsonData"]["database"] == "crashreg"
        assert datasource["secureJsonData"] == {"password": f"${{{PASSWORD_ENV}}}"}
    else:
        assert datasource["uid"] == "crashreg-sqlite"
        assert datasource["jsonData"]["path"] == "/var/lib/crashreg-grafana.db"
        assert "secureJsonData" not in datasource


def test_rotated_password_reaches_role_and_data_source(
    grafana_settings: Settings, database: Database, grafana: RunningGrafana
) -> None:
    provision(grafana_settings, database)
    if grafana_settings.grafana.db_url is None:
        pytest.skip("SQLite: no password")
    rotated_url = make_url(grafana_settings.grafana.db_url).set(password="rotated-" + "x" * 12)
    rotated_db = rotated_url.render_as_string(hide_password=False)
    rotated = dataclasses.replace(
        grafana_settings, grafana=dataclasses.replace(grafana_settings.grafana, db_url=rotated_db)
    )
    result = provision(rotated, database)
    outcome = next(o for o in result.report.outcomes if o.kind == "datasource")
    assert outcome.action == "updated" and "password" in outcome.detail
    assert grafana.state.secure_json["crashreg-postgres"] == {"password": "rotated-" + "x" * 12}
    with psycopg.connect(
        rotated_url.set(drivername="postgresql").render_as_string(hide_password=False)
    ) as conn:
        assert conn.execute("SELECT count(*) FROM rpt_events").fetchone() == (0,)
    assert {o.action for o in provision(rotated, database).report.outcomes} == {"unchanged"}


def test_cli_export_on_sqlite_builds_the_reporting_copy(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("the SQLite reporting copy")
    env = {"CRASHREG_DATABASE_URL": db_url, "CRASHREG_ALERT_SILENCE_MINUTES": "45"}
    result = run_cli(monkeypatch, ["grafana", "export", str(tmp_path / "out")], env)
    assert result.exit_code == 0, result.output
    copy = reporting_copy_path(db_url)
    assert str(copy) in result.output and copy.exists()
    datasources = yaml.safe_load((tmp_path / "out/provisioning/datasources/crashreg.yaml").read_text())
    assert datasources["datasources"][0]["jsonData"]["path"] == str(copy)
    # The alert rules, with the thresholds of the environment, and what the Grafana admin does next.
    alerting = tmp_path / "out/provisioning/alerting/crashreg.yaml"
    assert str(alerting) in result.output
    assert "next, as the Grafana admin:" in result.output and "frser-sqlite-datasource" in result.output
    document = yaml.safe_load(alerting.read_text())
    (group,) = document["groups"]
    assert document["apiVersion"] == 1 and group["folder"] == "Crash registry" and group["interval"] == "5m"
    silence = next(rule for rule in group["rules"] if rule["uid"] == "crashreg-ingest-silence")
    assert silence["data"][2]["model"]["conditions"][0]["evaluator"]["params"] == [45]
    assert silence["data"][0]["datasourceUid"] == "crashreg-sqlite"


def test_cli_export_on_sqlite_folds_the_rollups_into_the_copy(
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: Any,
    make_token: Callable[..., str],
) -> None:
    """Crashes reported before any fold are on the export's dashboards at once: the queued
    changes are folded into the rollups before the copy is made (the daily panels read them)."""
    if not db_url.startswith("sqlite"):
        pytest.skip("the SQLite reporting copy")
    reported = len(ingest_some(client, make_token("report")))
    env = {"CRASHREG_DATABASE_URL": db_url}
    result = run_cli(monkeypatch, ["grafana", "export", str(tmp_path / "out")], env)
    assert result.exit_code == 0, result.output
    (fleet,) = [board for board in build_dashboards("sqlite", "x") if board["uid"] == "crashreg-fleet"]
    panels = {panel["title"]: panel["targets"][0] for panel in fleet["panels"]}
    since = TimeRange(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 31, tzinfo=UTC))
    copy = sqlite3.connect(f"file:{reporting_copy_path(db_url)}?mode=ro", uri=True)
    try:
        per_day = copy.execute(expand_target(panels["Crashes per day"], {}, since)).fetchall()
        top = copy.execute(expand_target(panels["Top signatures"], {}, since)).fetchall()
        events = copy.execute("SELECT count(*) FROM rpt_events").fetchone()
    finally:
        copy.close()
    assert events == (reported,)
    assert sum(crashes for _, crashes in per_day) == reported
    assert len(top) == 4 and sum(row[6] for row in top) == reported
