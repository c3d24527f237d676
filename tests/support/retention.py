"""Dumps in a real store for the retention tests: one bug's crashes through the API, each
with a completed capture and a stored dump."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select

from registry.capture.models import Capture
from registry.db import Database, utcnow
from registry.storage.models import Dump
from registry.storage.store import DumpStore
from tests.support.capture import patch_policy, post_capture, report, storm_report
from tests.support.http import auth

LATER = timedelta(days=400)  # gc runs this far ahead: every dump is past its age


def put_object(store: DumpStore, key: str, data: bytes) -> None:
    """Write an object the way a finished upload leaves it (local: a file; S3: an object)."""
    if hasattr(store, "root"):
        path = store.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    else:
        store.client.put_object(Bucket=store.bucket, Key=store._key(key), Body=data)  # type: ignore[attr-defined]


def store_dump(database: Database, store: DumpStore, capture_id: str, size: int = 1000) -> str:
    key = f"dumps/{capture_id}.vmcore"
    put_object(store, key, b"\0" * size)
    now = utcnow()
    with database.session() as session:
        session.add(
            Dump(
                capture_id=int(capture_id),
                store=store.uri("").rstrip("/"),
                key=key,
                state="stored",
                encoding="identity",
                bytes=size,
                part_size=size,
                created_at=now,
                stored_at=now,
            )
        )
    return key


class Fleet:
    """One bug's crashes through the API: the first K take capture slots; more get `full`
    through an engineer's "N more" (no slot). Each has a completed capture and a stored dump."""

    def __init__(self, client: Any, make_token: Any, database: Database, store: DumpStore) -> None:
        self.client, self.database, self.store = client, database, store
        self.reporter, self.triage = make_token("report"), make_token("triage", name="alice")
        self.captures: list[str] = []
        self.signature_id = ""

    def crash(self, bug: str, count: int) -> list[str]:
        made = []
        for _ in range(count):
            answer = report(self.client, self.reporter, storm_report(bug))
            self.signature_id = answer["signature"]["id"]
            if answer["capture"]["action"] != "full":
                assert (
                    patch_policy(
                        self.client, self.triage, self.signature_id, extra_full_captures=1
                    ).status_code
                    == 200
                )
                answer = report(self.client, self.reporter, storm_report(bug))
            capture = post_capture(self.client, self.reporter, answer["event_id"], bytes=1000).json["id"]
            store_dump(self.database, self.store, capture)
            made.append(capture)
        self.captures += made
        return made

    def states(self) -> dict[str, str]:
        with self.database.session() as session:
            return {str(c): s for c, s in session.execute(select(Dump.capture_id, Dump.state))}

    def present(self) -> set[str]:
        with self.database.session() as session:
            keys = dict(session.execute(select(Dump.capture_id, Dump.key)).all())
        return {str(capture) for capture, key in keys.items() if self.store.head(key) is not None}

    def event_of(self, capture: str) -> str:
        with self.database.session() as session:
            return str(session.scalar(select(Capture.event_id).where(Capture.id == int(capture))))

    def propose_rca(self, *cited: str, by_event: bool = False) -> Any:
        """An engineer's RCA citing these captures (or their events) as evidence."""
        evidence = [
            {"type": "event", "event_id": self.event_of(c)}
            if by_event
            else {"type": "capture", "capture_id": c}
            for c in cited
        ]
        body = {"summary": "s", "body": "b", "author": "alice", "author_kind": "human", "evidence": evidence}
        return self.client.post(
            f"/api/v1/signatures/{self.signature_id}/rcas", json=body, headers=auth(self.triage)
        )

    def pin(self, capture: str) -> Any:
        return self.client.put(
            f"/api/v1/captures/{capture}/pin", json={"note": "keep"}, headers=auth(self.triage)
        )
