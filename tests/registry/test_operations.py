"""Health, readiness, metrics, OpenAPI and request logs."""

from __future__ import annotations

import json
import logging
import re

from registry.migrate import downgrade, upgrade
from testkit.reports import crash_report
from tests.support.http import auth


def test_health_and_readiness(client, db_url) -> None:
    assert client.get("/healthz").json == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json["status"] == "ready"
    downgrade(db_url, "-1")
    try:
        behind = client.get("/readyz")
    finally:
        upgrade(db_url)  # the PostgreSQL database is shared by the session's later tests
    assert behind.status_code == 503 and "crashreg db upgrade" in behind.json["hint"]
    assert client.get("/readyz").status_code == 200


def test_metrics_count_requests_reports_and_answers(client, make_token) -> None:
    client.post("/api/v1/reports", json=crash_report(source="dpu"), headers=auth(make_token("report")))
    text = client.get("/metrics").data.decode()
    assert 'crashreg_reports_total{outcome="new",source="dpu"}' in text
    assert "crashreg_ingest_seconds_bucket" in text
    assert 'crashreg_capture_answers_total{action="full"}' in text
    assert 'endpoint="/api/v1/reports",method="POST",status="201"' in text


def test_openapi_documents_every_api_route(app, client) -> None:
    spec = client.get("/api/v1/openapi.json").json
    assert spec["openapi"].startswith("3.")
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/") or rule.rule == "/api/v1/openapi.json":
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert (path, method.lower()) in documented, (
                f"{method} {rule.rule} is not in the OpenAPI document"
            )
    report = spec["paths"]["/api/v1/reports"]["post"]
    schema_name = report["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert {"report_id", "source", "crashed_at", "host"} <= set(
        spec["components"]["schemas"][schema_name]["required"]
    )
    assert {"201", "200", "400", "401", "403", "413"} <= set(report["responses"])


def test_one_json_log_line_per_request_with_request_id(client) -> None:
    from registry.app import JsonLogFormatter

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(JsonLogFormatter().format(record))

    handler = Capture()
    access = logging.getLogger("crashreg.access")
    level = access.level  # the in-process demo (test_demo.py) quietens it for its story
    access.setLevel(logging.INFO)
    access.addHandler(handler)
    try:
        response = client.get("/healthz", headers={"X-Request-Id": "abc-123"})
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
    assert response.headers["X-Request-Id"] == "abc-123"
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["request_id"] == "abc-123" and entry["status"] == 200 and entry["path"] == "/healthz"
    assert entry["method"] == "GET" and "duration_ms" in entry


def test_log_line_time_is_the_formatters_own() -> None:
    from registry.app import JsonLogFormatter

    record = logging.makeLogRecord({"msg": "request", "created": 1764754245.75})
    entry = json.loads(JsonLogFormatter().format(record))
    assert entry["time"] == logging.Formatter().formatTime(record, "%Y-%m-%dT%H:%M:%S%z")
