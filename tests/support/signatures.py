"""Two distinct bugs' console logs, reported and read back over HTTP (merge, rebuild, ingest tests)."""

from __future__ import annotations

from typing import Any

from testkit.reports import crash_report
from tests.support.golden import golden
from tests.support.http import auth

GPF_LOG = golden("kinds/gpf")
WARNING_LOG = golden("kinds/warning")


def report(client: Any, token: str, console_log: str, **host: Any) -> dict[str, Any]:
    body = crash_report(console_log=console_log)
    body["host"].update(host)
    response = client.post("/api/v1/reports", json=body, headers=auth(token))
    assert response.status_code == 201, response.json
    return response.json


def signature(client: Any, token: str, key: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/signatures/{key}", headers=auth(token))
    assert response.status_code == 200, response.json
    return response.json
