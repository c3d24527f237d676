"""A debuginfod client: one server's answer for one build-id, streamed to a file.

The protocol is elfutils' (debuginfod(8)): `GET <server>/buildid/<id>/debuginfo`,
`/executable` or `/source/<absolute path>`; 200 with the file, 404 when the server has none.
The timeout bounds the connection and each read, as DEBUGINFOD_TIMEOUT does, and the maximum
time the whole transfer, as DEBUGINFOD_MAXTIME does (a server trickling a byte at a time
would hold the fetch for good); a file past the size limit is abandoned.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import requests
import urllib3

CHUNK = 1 << 20


class FetchFailed(Exception):
    """The server's answer could not be taken whole (besides requests' own exceptions)."""


class TooLarge(FetchFailed):
    """The server's file is past the registry's symbol size limit."""


@dataclass(frozen=True)
class DebuginfodServer:
    url: str  # without the trailing slash
    timeout_s: float
    max_time_s: float = 300.0

    def artifact_url(self, build_id: str, artifact: str) -> str:
        """`artifact`: debuginfo, executable, or source/<absolute path>."""
        return f"{self.url}/buildid/{build_id}/{quote(artifact)}"

    def fetch(self, build_id: str, artifact: str, destination: Path, max_bytes: int) -> bool:
        """Write the server's file into `destination` (whole or not at all): True; False when
        the server has none (404). Connection errors, timeouts and other answers raise
        requests' exceptions; a file past `max_bytes` raises TooLarge, one not whole within
        `max_time_s` (or cut) FetchFailed."""
        deadline = time.monotonic() + self.max_time_s
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
                    # read1: what has arrived, so that the deadline is looked at after each read
                    while chunk := _read_some(answer):
                        received += len(chunk)
                        if received > max_bytes:
                            raise TooLarge(f"{answer.url} is past {max_bytes} bytes")
                        if time.monotonic() > deadline:
                            raise FetchFailed(f"{answer.url} was not whole after {self.max_time_s:g} s "
                                              f"({received} bytes)")
                        out.write(chunk)
                announced = answer.headers.get("Content-Length")
                if announced is not None and announced.isdigit() and received != int(announced):
                    raise FetchFailed(f"{answer.url} ended after {received} of {announced} bytes")
                temporary.replace(destination)
            finally:
                temporary.unlink(missing_ok=True)
        return True


def _read_some(answer: requests.Response) -> bytes:
    try:
        return answer.raw.read1(CHUNK)  # type: ignore[no-any-return]
    except urllib3.exceptions.HTTPError as error:  # a read timed out, the connection was cut
        raise FetchFailed(f"{answer.url}: {error}") from error
