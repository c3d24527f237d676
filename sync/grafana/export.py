"""`crashreg grafana export DIR`: Grafana's file-provisioning layout, for file-based installs.

    DIR/provisioning/datasources/crashreg.yaml
    DIR/provisioning/dashboards/crashreg.yaml      (a file provider for the folder)
    DIR/provisioning/dashboards/crashreg/<uid>.json
    DIR/provisioning/alerting/crashreg.yaml        (the crashreg alert rule group)

Copy DIR/provisioning to Grafana's provisioning directory (GF_PATHS_PROVISIONING, by default
/etc/grafana/provisioning). The data source password is not written: the YAML refers to
$CRASHREG_GRAFANA_DB_PASSWORD, which Grafana expands from its environment. `next_steps` says
so, for the admin who runs the export.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from dashboards import FOLDER_TITLE, FOLDER_UID
from dashboards.alert_model import RuleGroup, file_provisioning
from dashboards.model import Dashboard
from sync.grafana.datasource import DataSourceSpec

PASSWORD_ENV = "CRASHREG_GRAFANA_DB_PASSWORD"
DEFAULT_GRAFANA_PROVISIONING = "/etc/grafana/provisioning"


SQLITE_PLUGIN = "frser-sqlite-datasource"


def export(
    directory: Path,
    spec: DataSourceSpec,
    dashboards: list[Dashboard],
    grafana_provisioning: str = DEFAULT_GRAFANA_PROVISIONING,
    alert_group: RuleGroup | None = None,
) -> list[Path]:
    """Write the layout under `directory`; returns the files written."""
    root = directory / "provisioning"
    boards_dir = root / "dashboards" / "crashreg"
    for folder in ("datasources", "alerting"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    boards_dir.mkdir(parents=True, exist_ok=True)
    datasource = {k: v for k, v in spec.body.items()}
    datasource["editable"] = False
    if spec.secret is not None:
        datasource["secureJsonData"] = {"password": f"${{{PASSWORD_ENV}}}"}
    files = {
        root / "datasources" / "crashreg.yaml": {"apiVersion": 1, "datasources": [datasource]},
        root / "dashboards" / "crashreg.yaml": {
            "apiVersion": 1,
            "providers": [
                {
                    "name": "crashreg",
                    "orgId": 1,
                    "folder": FOLDER_TITLE,
                    "folderUid": FOLDER_UID,
                    "type": "file",
                    "disableDeletion": True,
                    "allowUiUpdates": False,
                    "updateIntervalSeconds": 60,
                    "options": {"path": f"{grafana_provisioning.rstrip('/')}/dashboards/crashreg"},
                }
            ],
        },
    }
    if alert_group is not None:
        files[root / "alerting" / "crashreg.yaml"] = file_provisioning(alert_group, FOLDER_TITLE)
    written = []
    for path, document in files.items():
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        written.append(path)
    for board in dashboards:
        path = boards_dir / f"{board['uid']}.json"
        path.write_text(json.dumps(board, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written


def next_steps(directory: Path, spec: DataSourceSpec, grafana_provisioning: str) -> list[str]:
    """What a Grafana admin does with the export, in order."""
    target = grafana_provisioning.rstrip("/")
    steps = [
        f"copy {directory / 'provisioning'}/* to {target}/ on the Grafana host "
        "(Grafana reads its provisioning directory, GF_PATHS_PROVISIONING, at start-up; "
        "dashboards are re-read every minute)",
        f"the dashboard provider reads {target}/dashboards/crashreg: keep that path, or export again "
        "with --grafana-provisioning set to the directory Grafana reads",
    ]
    if spec.body["type"] == SQLITE_PLUGIN:
        steps.append(
            f"install the SQLite plugin: grafana cli plugins install {SQLITE_PLUGIN} "
            "(or GF_INSTALL_PLUGINS=frser-sqlite-datasource), and let Grafana read "
            f"{spec.body['jsonData']['path']} (the reporting copy `crashreg scheduler` keeps current)"
        )
    else:
        steps.append(
            f"set {PASSWORD_ENV} in Grafana's environment to the read-only role's password "
            "(`crashreg grafana provision` creates the role; CRASHREG_GRAFANA_DB_URL chooses it)"
        )
    steps += [
        "restart Grafana (or POST /api/admin/provisioning/datasources|dashboards|alerting/reload)",
        "alert rules route through the notification policies: add a contact point and a policy "
        "matching source=crashreg (docs/alerting.md has a minimal example)",
    ]
    return steps
