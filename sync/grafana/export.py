"""`crashreg grafana export DIR`: Grafana's file-provisioning layout, for file-based installs.

    DIR/provisioning/datasources/crashreg.yaml
    DIR/provisioning/dashboards/crashreg.yaml      (a file provider for the folder)
    DIR/provisioning/dashboards/crashreg/<uid>.json

Copy DIR/provisioning to Grafana's provisioning directory (GF_PATHS_PROVISIONING, by default
/etc/grafana/provisioning). The data source password is not written: the YAML refers to
$CRASHREG_GRAFANA_DB_PASSWORD, which Grafana expands from its environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from dashboards import FOLDER_TITLE, FOLDER_UID
from sync.grafana.datasource import DataSourceSpec

PASSWORD_ENV = "CRASHREG_GRAFANA_DB_PASSWORD"
DEFAULT_GRAFANA_PROVISIONING = "/etc/grafana/provisioning"


def export(
    directory: Path,
    spec: DataSourceSpec,
    dashboards: list[dict[str, Any]],
    grafana_provisioning: str = DEFAULT_GRAFANA_PROVISIONING,
) -> list[Path]:
    """Write the layout under `directory`; returns the files written."""
    root = directory / "provisioning"
    boards_dir = root / "dashboards" / "crashreg"
    (root / "datasources").mkdir(parents=True, exist_ok=True)
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
    written = []
    for path, document in files.items():
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        written.append(path)
    for board in dashboards:
        path = boards_dir / f"{board['uid']}.json"
        path.write_text(json.dumps(board, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
