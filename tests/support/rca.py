"""Seeding signatures through the real API, and posting RCAs, for RCA, bundle and page tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import update

from registry.core.signatures import Signature
from registry.db import Database
from testkit.reports import crash_report
from tests.support.http import auth


def bug_log(bug: str, caller: str) -> str:
    return (
        f"[  812.118803] BUG: unable to handle page fault in {bug}\n"
        "[  812.118815] Oops: 0000 [#1] SMP NOPTI\n"
        f"[  812.118830] RIP: 0010:{bug}+0x3a/0x9c0\n"
        "[  812.118900] Call Trace:\n"
        f"[  812.118910]  {caller}+0xde/0x6b0\n"
        "[  812.118915]  mount_bdev+0x30/0x1f0\n"
        "[  812.118930] Kernel panic - not syncing: Fatal exception\n"
    )


@dataclass
class Seeded:
    signature_id: str
    event_ids: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)


def seed(
    client: Any,
    database: Database,
    token: str,
    bug: str,
    crashes: list[tuple[str, str, str]],
    caller: str = "ext4_fill_super",
) -> Seeded:
    """Report one crash of `bug` per (hostname, kernel_version, region); returns the signature.

    The signature's frames are pinned afterwards so tests do not depend on which
    fingerprint engine is installed (the provisional one records no frames).
    """
    frames = [bug, caller, "mount_bdev"]
    seeded: Seeded | None = None
    for index, (hostname, kernel, region) in enumerate(crashes):
        body = crash_report(
            console_log=bug_log(bug, caller),
            crashed_at=f"2026-11-{10 + index % 18:02d}T12:00:00Z",
            host={"hostname": hostname, "kernel_version": kernel, "region": region, "sku": "gpu-h100"},
            stack={"frames": [{"function": name} for name in frames]},
        )
        response = client.post("/api/v1/reports", json=body, headers=auth(token))
        assert response.status_code == 201, response.json
        answer = response.json
        seeded = seeded or Seeded(answer["signature"]["id"], frames=frames)
        assert answer["signature"]["id"] == seeded.signature_id
        seeded.event_ids.append(answer["event_id"])
    assert seeded is not None
    with database.session() as session:
        session.execute(
            update(Signature)
            .where(Signature.id == int(seeded.signature_id))
            .values(function=bug, frames=frames)
        )
    return seeded


def ai_rca(seeded: Seeded, **overrides: Any) -> dict[str, Any]:
    """An AI-written RCA whose evidence holds for `seeded` (kernel 6.8.0-52 crashed)."""
    body = {
        "summary": f"use-after-free in {seeded.frames[0]} on unmount race",
        "body": "The superblock is freed while the mount path still holds it.",
        "author": "triage-bot",
        "author_kind": "ai",
        "agent": {"name": "triage-bot", "model": "model-x-2026"},
        "confidence": 0.7,
        "evidence": [
            {"type": "event", "event_id": seeded.event_ids[0]},
            {"type": "function", "function": seeded.frames[0]},
            {"type": "source", "file": "fs/ext4/super.c", "line": 5312, "kernel_version": "6.8.0-52"},
            {"type": "commit", "commit": "a1b2c3d4e5f6"},
            {"type": "link", "url": "https://lore.kernel.org/linux-ext4/abc@x/", "kind": "mailing_list"},
        ],
        "fix": {"commit": "0123456789abcdef", "kernel_version": "6.8.0-100"},
    }
    return body | overrides


def post_rca(client: Any, token: str, signature_id: str, body: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/signatures/{signature_id}/rcas", json=body, headers=auth(token))


def review(client: Any, token: str, rca_id: str, verdict: str, note: str | None = None, **extra: Any) -> Any:
    body = {"verdict": verdict, "note": note} | extra
    return client.post(f"/api/v1/rcas/{rca_id}/review", json=body, headers=auth(token))


def new_host() -> str:
    return f"host-{uuid.uuid4().hex[:8]}"
