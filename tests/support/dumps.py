"""Dump store test helpers: the registry over real HTTP as a reporter and an engineer use it."""

from __future__ import annotations

import base64
import gzip
import hashlib
import lzma
import os
from collections.abc import Callable
from typing import Any

import pytest
import requests

from registry.storage.parts import MIB
from tests.support.capture import storm_report
from tests.support.http import auth

PART = 5 * MIB


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def content_md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


class Api:
    """The registry over real HTTP, as a reporter and an engineer use it."""

    def __init__(self, url: str, make_token: Callable[..., str]) -> None:
        self.url = url
        self.report = make_token("report", kind="agent")
        self.read = make_token("read", name="engineer-ada")
        self.triage = make_token("triage")

    def post(self, path: str, body: dict[str, Any], token: str | None = None) -> requests.Response:
        return requests.post(self.url + path, json=body, headers=auth(token or self.report), timeout=30)

    def get(self, path: str) -> requests.Response:
        return requests.get(self.url + path, headers=auth(self.read), timeout=30)

    def event(self, bug: str = "mlx5e_poll_rx_cq") -> dict[str, Any]:
        answer = self.post("/api/v1/reports", storm_report(bug))
        assert answer.status_code == 201, answer.text
        return answer.json()

    def capture(self, event_id: str, **fields: Any) -> dict[str, Any]:
        body = {"method": "makedumpfile", "status": "completed", "target": "/var/crash/x/vmcore"} | fields
        answer = self.post(f"/api/v1/events/{event_id}/captures", body)
        assert answer.status_code == 201, answer.text
        return answer.json()

    def start(self, capture_id: str, total: int, **body: Any) -> requests.Response:
        return self.post(f"/api/v1/captures/{capture_id}/upload", {"bytes": total, **body})

    def complete(self, capture_id: str, md5s: dict[int, str]) -> requests.Response:
        parts = [{"number": n, "md5": m} for n, m in sorted(md5s.items())]
        return self.post(f"/api/v1/captures/{capture_id}/upload/complete", {"parts": parts})


@pytest.fixture
def api(live_server: str, make_token: Callable[..., str]) -> Api:
    return Api(live_server, make_token)


def parts_of(data: bytes) -> dict[int, bytes]:
    return {n + 1: data[offset:offset + PART] for n, offset in enumerate(range(0, len(data), PART))}


def put(url: str, data: bytes, md5: str | None = None) -> requests.Response:
    headers = {"Content-MD5": md5} if md5 else {}
    return requests.put(url, data=data, headers=headers, timeout=60)


def stored_dump(api: Api, bug: str = "download_me_function",
                encoding: str = "identity") -> tuple[dict, dict, bytes]:
    """An event with a capture whose dump is in the store, wrapped in `encoding` (identity,
    gzip, xz): (report answer, capture, the dump's bytes unwrapped)."""
    data = b"KDUMP   " + os.urandom(PART + 999)
    stored = {"identity": data, "gzip": gzip.compress(data), "xz": lzma.compress(data)}[encoding]
    event = api.event(bug)
    capture = api.capture(event["event_id"])
    for url in api.start(capture["id"], len(stored), encoding=encoding).json()["part_urls"]:
        part = parts_of(stored)[url["number"]]
        assert put(url["url"], part, content_md5(part)).status_code == 200
    completed = api.complete(capture["id"], {n: md5_hex(p) for n, p in parts_of(stored).items()})
    assert completed.status_code == 200, completed.text
    return event, capture, data
