"""Uploading a symbol file to a registry over its API, as a build pipeline does: the
`crashreg symbols upload --registry URL` side of registry/symbols/uploads.py.

The file's build-id is read from its own note first (a file the registry would refuse is
refused here, before a byte is sent); then the upload is started (or rejoined), each part is
PUT to its pre-signed URL with its Content-MD5, and the upload is completed with the parts'
MD5s. Run again after a failure, it rejoins the same upload and sends only the parts the store
does not hold as they are here.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

from registry.storage.service import MAX_URLS_PER_REQUEST
from registry.symbols.keep import sha256_of

UPLOADS_PATH = "/api/v1/symbols/uploads"  # where an upload starts, under the registry's base URL
TIMEOUT_S = 300  # one request: a part of up to the part size, or the registry's check of the file


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _parts(path: Path, part_size: int, numbers: list[int]) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as file:
        for number in numbers:
            file.seek((number - 1) * part_size)
            yield number, file.read(part_size)


def send(registry: str, token: str, path: Path, build_id: str, sha256: str | None = None,
         sent: Callable[[int, int], None] = lambda part, whole: None,
         kinds: tuple[str, ...] = (), lines: bool = False) -> requests.Response:
    """Upload `path` as `build_id`'s; the registry's last answer (200: `state` stored, with
    `new_kinds`; a 4xx names what it refused). `sha256`: the declared digest (default: the file's).
    `sent(part bytes, file bytes)`: after each part is in the store (sent now, or by an earlier
    run), for a progress bar; never called for a file the registry holds already. `kinds`: what
    the file brings (read_facts): a build-id holding them all needs nothing sent, unless `lines`
    (the file has DWARF) and its debuginfo is a symbol table alone."""
    http = requests.Session()
    start_url = f"{registry.rstrip('/')}{UPLOADS_PATH}"
    declared = {"kinds": list(kinds), "lines": lines} if kinds else {}
    body: dict[str, Any] = {"build_id": build_id, "bytes": path.stat().st_size,
                            "sha256": sha256 or sha256_of(path), **declared}
    started = http.post(start_url, json=body, headers=_headers(token), timeout=TIMEOUT_S)
    if started.status_code != 200 or started.json()["state"] == "stored":
        return started
    upload = started.json()["upload"]
    held = {part["number"]: part["md5"] for part in started.json().get("stored_parts", []) if part["md5"]}
    md5s: dict[int, str] = {}
    numbers = list(range(1, upload["parts"] + 1))
    for first in range(0, len(numbers), MAX_URLS_PER_REQUEST):
        batch = numbers[first:first + MAX_URLS_PER_REQUEST]
        signed = started if first == 0 else http.post(start_url, json={**body, "parts": batch},
                                                      headers=_headers(token), timeout=TIMEOUT_S)
        if signed.status_code != 200:
            return signed
        urls = {url["number"]: url["url"] for url in signed.json()["part_urls"]}
        for number, data in _parts(path, upload["part_size"], batch):
            digest = hashlib.md5(data, usedforsecurity=False)
            md5s[number] = digest.hexdigest()
            if held.get(number) != md5s[number]:  # else sent by an earlier run
                put = http.put(urls[number], data=data, timeout=TIMEOUT_S,
                               headers={"Content-MD5": base64.b64encode(digest.digest()).decode()})
                if put.status_code != 200:
                    return put
            sent(len(data), body["bytes"])
    parts = [{"number": number, "md5": md5} for number, md5 in sorted(md5s.items())]
    return http.post(f"{start_url}/{upload['id']}/complete", json={"parts": parts}, headers=_headers(token),
                     timeout=TIMEOUT_S)
