"""A capture's dump says its state, whatever it is: GET /api/v1/captures/{id}/dump answers the
dump in every state (200, `state`), a capture with none is a 404 `no_dump` naming the state
`none`, and a download of a dump that is not stored is a 409 naming its state, in the error
shape of the contract. Over HTTP on both databases (the states are the registry's, the local
store serves)."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from sqlalchemy import update

from registry.db import Database, utcnow
from registry.storage.models import Dump
from tests.support.dumps import Api, stored_dump

pytestmark = pytest.mark.parametrize("store_kind", ["local"])


def error(answer: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["code"] == code, body
    return dict(body["error"])


def test_the_dump_answers_its_state_in_every_state(api: Api, database: Database) -> None:
    assert error(api.get("/api/v1/captures/999999/dump"), 404, "not_found")["message"] == "no capture 999999"

    waiting = api.capture(api.event("waiting_function")["event_id"])
    for path in ("dump", "download"):
        none = error(api.get(f"/api/v1/captures/{waiting['id']}/{path}"), 404, "no_dump")
        assert none["fields"] == {"state": ["none"]}
        assert "its reporter has not started the upload" in none["message"]
    failed = api.capture(api.event("failing_function")["event_id"], status="failed")
    gone = error(api.get(f"/api/v1/captures/{failed['id']}/dump"), 404, "no_dump")
    assert "none will be: the capture is failed" in gone["message"]

    assert api.start(waiting["id"], 10).status_code == 200
    uploading = api.get(f"/api/v1/captures/{waiting['id']}/dump")
    assert uploading.status_code == 200 and uploading.json()["state"] == "uploading"
    refused = error(api.get(f"/api/v1/captures/{waiting['id']}/download"), 409, "dump_not_stored")
    assert refused["fields"] == {"state": ["uploading"]} and "upload is under way" in refused["message"]

    _, capture, _ = stored_dump(api)
    stored = api.get(f"/api/v1/captures/{capture['id']}/dump")
    assert stored.status_code == 200 and stored.json()["state"] == "stored"
    assert api.get(f"/api/v1/captures/{capture['id']}/download").status_code == 200

    for state, why in (("deleting", "retention is deleting it"), ("deleted", "retention deleted it")):
        with database.session() as session:  # as retention's gc leaves the row (test_gc.py runs it)
            session.execute(update(Dump).where(Dump.capture_id == int(capture["id"]))
                            .values(state=state, deleted_at=utcnow() if state == "deleted" else None))
        shown = api.get(f"/api/v1/captures/{capture['id']}/dump")
        assert shown.status_code == 200, shown.text
        assert shown.json()["state"] == state and shown.json()["id"] == stored.json()["id"]
        assert (shown.json()["deleted_at"] is not None) == (state == "deleted")
        refused = error(api.get(f"/api/v1/captures/{capture['id']}/download"), 409, "dump_not_stored")
        assert refused["fields"] == {"state": [state]} and why in refused["message"]
