"""Each event keeps the engine's explanation of its fingerprint: GET /api/v1/events/{id}."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from registry.fingerprint import analyse_console_log
from testkit.reports import NULL_DEREF_LOG, crash_report
from tests.support.http import auth


def test_the_event_returns_the_explanation_its_report_got(client, make_token) -> None:
    reporter, reader = make_token("report"), make_token("read")
    dpu = crash_report(source="dpu", console_log="crashreg-dpu: the printk buffer was unreadable\n")
    first = client.post("/api/v1/reports", json=dpu, headers=auth(reporter)).json
    event = client.get(f"/api/v1/events/{first['event_id']}", headers=auth(reader)).json
    assert event["explanation"] is None  # a DPU report whose log shows no crash: nothing fingerprinted yet

    kernel = crash_report(boot_id=dpu["boot_id"])
    assert client.post("/api/v1/reports", json=kernel, headers=auth(reporter)).status_code == 201
    joined = client.get(f"/api/v1/events/{first['event_id']}", headers=auth(reader)).json
    expected = analyse_console_log(NULL_DEREF_LOG).explanation
    assert joined["explanation"] == expected
    assert joined["explanation"]["frames"][joined["explanation"]["guilty"]]["function"] == "mlx5e_poll_rx_cq"


def test_the_openapi_document_describes_the_explanation(client) -> None:
    schemas = client.get("/api/v1/openapi.json").json["components"]["schemas"]
    explanation = schemas["Event"]["properties"]["explanation"]
    [target] = [option["$ref"] for option in explanation["anyOf"] if "$ref" in option]
    record = schemas[target.rsplit("/", 1)[1]]["properties"]
    assert {"v", "kind", "kind_rule", "headline", "section", "frames", "guilty", "flags"} <= set(record)
    frame = schemas[record["frames"]["items"]["$ref"].rsplit("/", 1)[1]]["properties"]
    assert frame["decision"]["enum"] == ["guilty", "used", "skipped"]


def test_postgresql_compresses_the_record_with_lz4(database, db_url) -> None:
    """Past the TOAST threshold the record is compressed on every insert: lz4, not pglz."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite does not compress")
    with database.session() as session:
        method = session.scalar(text("SELECT attcompression FROM pg_attribute "
                                     "WHERE attrelid = 'events'::regclass AND attname = 'explanation'"))
    assert method == "l"
