"""A debuginfod client: one server's answer for one build-id, streamed to a file.

The protocol is elfutils' (debuginfod(8)): `GET <server>/buildid/<id>/debuginfo`,
`/executable` or `/source/<absolute path>`; 200 with the file, 404 when the server has none.
The timeout bounds the connection and each read, as DEBUGINFOD_TIMEOUT does; a file past the
size limit is abandoned.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import requests

CHUNK = 1 << 20


class TooLarge(Exception):
    """The server's file is past the registry's symbol size limit."""


@dataclass(frozen=True)
class DebuginfodServer:
    url: str  # without the trailing slash
    timeout_s: float

    def artifact_url(self, build_id: str, artifact: str) -> str:
        """`artifact`: debuginfo, executable, or source/<absolute path>."""
        return f"{self.url}/buildid/{build_id}/{quote(artifact)}"

    def fetch(self, build_id: str, artifact: str, destination: Path, max_bytes: int) -> bool:
        """Write the server's file into `destination` (whole or not at all): True; False when
        the server has none (404). Connection errors, timeouts and other answers raise
        requests' exceptions; a file past `max_bytes` raises TooLarge."""
        with requests.get(self.artifact_url(build_id, artifact), stream=True, timeout=self.timeout_s,
                          headers={"Accept-Encoding": "identity"}) as answer:
            if answer.status_code == 404:
                return False
            answer.raise_for_status()
            if int(answer.headers.get("Content-Length") or 0) > max_bytes:
                raise TooLarge(f"{answer.url} is {answer.headers['Content-Length']} bytes")
            temporary = destination.with_name(f".{destination.name}.{secrets.token_hex(4)}.tmp")
            try:
                received = 0
                with temporary.open("wb") as out:
                    for chunk in answer.iter_content(CHUNK):
                        received += len(chunk)
                        if received > max_bytes:
                            raise TooLarge(f"{answer.url} is past {max_bytes} bytes")
                        out.write(chunk)
                temporary.replace(destination)
            finally:
                temporary.unlink(missing_ok=True)
        return True
