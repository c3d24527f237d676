"""Health, readiness, metrics, OpenAPI and request logs."""

from __future__ import annotations

import json
import logging
import re

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from registry.app import JsonLogFormatter, create_app
from registry.config import Settings
from registry.migrate import downgrade, upgrade
from testkit.reports import crash_report
from tests.support.cli import crashreg
from tests.support.http import auth, closed_port


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


def test_readiness_names_a_database_a_later_release_migrated(client, database) -> None:
    """An old release's worker beside a database a newer release migrated: not "upgrade", which
    it cannot, but deploy the release the database is at."""
    with database.session() as session:
        (kept,) = session.execute(text("SELECT version_num FROM alembic_version")).one()
        session.execute(text("UPDATE alembic_version SET version_num = '9999_a_later_release'"))
    try:
        ahead = client.get("/readyz")
    finally:
        with database.session() as session:
            session.execute(text("UPDATE alembic_version SET version_num = :kept"), {"kept": kept})
    assert ahead.status_code == 503 and "later release" in ahead.json["hint"]


def test_db_upgrade_of_a_database_at_a_revision_it_does_not_know_is_one_line(database, db_url) -> None:
    """A revision a build never released named (renumbered since): Alembic's "Can't locate
    revision" was an 80-line traceback; and the hint named only a newer release."""
    with database.session() as session:
        (kept,) = session.execute(text("SELECT version_num FROM alembic_version")).one()
        session.execute(text("UPDATE alembic_version SET version_num = '0037_epidemiology_sample_counts'"))
    try:
        upgraded = crashreg(db_url, "db", "upgrade")
    finally:
        with database.session() as session:
            session.execute(text("UPDATE alembic_version SET version_num = :kept"), {"kept": kept})
    assert upgraded.returncode == 1 and "Traceback" not in upgraded.stderr
    assert "at revision 0037_epidemiology_sample_counts, which this crashreg does not know" in upgraded.stderr
    assert "a build that was never released" in upgraded.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pages_answer_503_when_the_database_is_down(tmp_path, backend: str) -> None:
    """With no secret key configured, a page opens its session from the database: down (a
    server that does not answer, a file that cannot be opened), that was a 500 with a traceback
    (and a request log that failed too); now the API's 503."""
    url = {"postgresql": f"postgresql://postgres@127.0.0.1:{closed_port()}/crashreg",
           "sqlite": f"sqlite:///{tmp_path}/no-such-folder/crashreg.db"}[backend]
    app = create_app(Settings(database_url=url, secret_key=None))
    for path in ("/login", "/signatures", "/events/1"):
        answer = app.test_client().get(path)
        assert answer.status_code == 503, (path, answer.data[:300])
        assert answer.json["error"]["code"] == "unavailable" and answer.headers["X-Request-Id"]
    # What Flask's own logger says of it (the database lost, a traceback) is a JSON line as well.
    assert [type(handler.formatter) for handler in app.logger.handlers] == [JsonLogFormatter]


def test_openapi_paths_are_templates_with_each_variable_described(client) -> None:
    """A variable with a converter of arguments (`any(...)`) was left in the path as Flask wrote
    it, so the debuginfod artifact's path could not be called; `any` gives its values, `path`
    says it may hold slashes."""
    paths = client.get("/api/v1/openapi.json").json["paths"]
    assert not [path for path in paths if "<" in path or ">" in path]
    artifact = paths["/debuginfod/buildid/{build_id}/{kind}"]["get"]["parameters"]
    assert {"in": "path", "name": "kind", "required": True,
            "schema": {"type": "string", "enum": ["debuginfo", "executable"]}} in artifact
    [source] = [p for p in paths["/debuginfod/buildid/{build_id}/source/{source}"]["get"]["parameters"]
                if p["name"] == "source"]
    assert "slashes" in source["schema"]["description"]


def test_a_body_the_server_does_without_is_documented_as_optional(client) -> None:
    """A pin's body (its note) may be left out, and the server takes the request without one;
    the document said the body was required (schemathesis found the mismatch)."""
    paths = client.get("/api/v1/openapi.json").json["paths"]
    assert paths["/api/v1/captures/{capture_id}/pin"]["put"]["requestBody"]["required"] is False
    assert paths["/api/v1/reports"]["post"]["requestBody"]["required"] is True


def test_a_failed_statements_error_leaves_out_its_parameters(database) -> None:
    """What an error's log line holds: the statement, never a report's text or a token hash."""
    with pytest.raises(DBAPIError) as failed, database.session() as session:
        session.execute(text("SELECT CAST(:console_log AS INTEGER) FROM no_such_table"),
                        {"console_log": "customer text 5eb63bbbe01eeed0"})
    assert "no_such_table" in str(failed.value) and "5eb63bbbe01eeed0" not in str(failed.value)
