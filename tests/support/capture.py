"""Helpers for capture tests: reports of distinct bugs, and the HTTP calls they make."""

from __future__ import annotations

import uuid
from typing import Any

from testkit.reports import crash_report
from tests.support.http import auth


def bug_log(bug: str) -> str:
    """A kernel log whose fingerprint depends only on `bug` (letters: digits are normalised)."""
    return (
        f"[  812.118803] BUG: unable to handle page fault in {bug}\n"
        "[  812.118815] Oops: 0000 [#1] SMP NOPTI\n"
        f"[  812.118830] RIP: 0010:{bug}+0x3a/0x9c0\n"
        "[  812.118930] Kernel panic - not syncing: Fatal exception\n"
    )


def storm_report(bug: str, **overrides: Any) -> dict[str, Any]:
    """One host's report of `bug`: a new hostname and boot each time."""
    host = {"hostname": f"host-{uuid.uuid4().hex[:10]}", "kernel_version": "6.8.0-52"}
    return crash_report(console_log=bug_log(bug), host=host, **overrides)


def report(client, token: str, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = client.post("/api/v1/reports", json=body, headers=auth(token))
    assert response.status_code in (200, 201), response.json
    return response.json


def actions(client, token: str, bug: str, count: int) -> list[str]:  # type: ignore[no-untyped-def]
    return [report(client, token, storm_report(bug))["capture"]["action"] for _ in range(count)]


def patch_policy(client, token: str, signature_id: str, **policy: Any):  # type: ignore[no-untyped-def]
    return client.patch(
        f"/api/v1/signatures/{signature_id}", json={"capture_policy": policy}, headers=auth(token)
    )


def post_capture(client, token: str, event_id: str, **fields: Any):  # type: ignore[no-untyped-def]
    body = {"method": "makedumpfile", "status": "completed"} | fields
    return client.post(f"/api/v1/events/{event_id}/captures", json=body, headers=auth(token))
