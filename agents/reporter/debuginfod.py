"""Debug info by build-id from debuginfod servers (elfutils' protocol), standard library only.

`GET <server>/buildid/<build-id>/debuginfo` (or `/executable`): 200 with the file, 404 when the
server has none. The servers are CRASHREG_DEBUGINFOD_URLS (space-separated, tried in order, as
elfutils' DEBUGINFOD_URLS), by default the registry's own `<CRASHREG_URL>/debuginfod/`.

Credentials: the registry's /debuginfod/ wants a `read` token, and a host's report token must
never be one (report tokens are fleet-wide; debug info and sources can be proprietary), so the
client never sends CRASHREG_TOKEN_FILE's token. It sends CRASHREG_DEBUGINFOD_TOKEN_FILE's token
to the servers under CRASHREG_URL only, and CRASHREG_DEBUGINFOD_HEADERS_FILE's `Name: value`
lines (elfutils' DEBUGINFOD_HEADERS_FILE) to every server, as elfutils does.

Files are kept as elfutils' client keeps them, `<cache>/<build-id>/debuginfo`, written whole or
not at all, and believed only when their own build-id note is the one asked for. A build-id no
server had is not asked for again by the same client (one agent run).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents.reporter.client import http_exchange
from agents.reporter.config import Config, read_token
from agents.reporter.elf import file_build_id, file_reader
from agents.reporter.log import log

KINDS = ("debuginfo", "executable")
REFUSED = {401: "no credential", 403: "a credential without read access"}
# The registry answers 503 with Retry-After while one of its servers is still sending a file it
# fetches for the asker (docs/symbols.md): asked again that many times, each wait capped.
BUSY_RETRIES = 6
BUSY_WAIT_MAX_S = 30.0


@dataclass
class Debuginfod:
    servers: tuple[str, ...]  # base URLs, without the trailing slash
    cache: Path
    timeout: float
    ca_file: str = ""
    token_prefix: str = ""  # servers under this URL get the read token
    token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    misses: set[tuple[str, str]] = field(default_factory=set)
    answers: dict[str, str] = field(default_factory=dict)  # each URL asked in this run: its answer

    @classmethod
    def from_config(cls, config: Config) -> Debuginfod:
        registry = config.url.rstrip("/")
        urls = config.debuginfod_urls.split() or ([f"{registry}/debuginfod/"] if registry else [])
        return cls(tuple(url.rstrip("/") for url in urls), Path(config.debuginfod_cache),
                   config.debuginfod_timeout, config.ca_file, f"{registry}/" if registry else "",
                   read_secret(config.debuginfod_token_file), headers_file(config.debuginfod_headers_file))

    def headers_for(self, server: str) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token and self.token_prefix and (
            server + "/").startswith(self.token_prefix) else {}
        return {"Accept": "*/*"} | self.headers | auth

    def find(self, build_id: str, kind: str = "debuginfo") -> Path | None:
        """The file for a build-id: the cache's, else the first server's (then cached), else None."""
        build_id = build_id.lower()
        cached = self.cache / build_id / kind
        if cached.is_file() and cached.stat().st_size:
            return cached
        if (build_id, kind) in self.misses:
            return None
        for server in self.servers:
            if self._fetch(server, build_id, kind, cached):
                return cached
        self.misses.add((build_id, kind))
        return None

    def _fetch(self, server: str, build_id: str, kind: str, target: Path) -> bool:
        url = f"{server}/buildid/{build_id}/{kind}"
        partial = target.with_name(f".{kind}.{os.getpid()}.part")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            for attempt in range(BUSY_RETRIES + 1):
                with partial.open("wb") as sink:
                    answer = http_exchange(url, "GET", self.headers_for(server), None, self.timeout,
                                           self.timeout, self.ca_file, sink)
                wait = busy_wait(answer.status, answer.headers)
                if wait is None or attempt == BUSY_RETRIES:
                    break
                log(f"debuginfod {url}: HTTP 503, still fetching: asked again in {wait:g} s")
                time.sleep(wait)
            if answer.status != 200:
                why = REFUSED.get(answer.status)
                return self._answered(url, f"HTTP {answer.status}" + (
                    f" ({why}: CRASHREG_DEBUGINFOD_TOKEN_FILE names a read token)" if why else ""))
            with partial.open("rb") as handle:
                found = file_build_id(file_reader(handle))
            if found != build_id:
                return self._answered(url, f"the file's build-id is {found or 'missing'}: not used")
            os.replace(partial, target)
            return self._answered(url, f"{target.stat().st_size} bytes", found=True)
        except OSError as error:
            return self._answered(url, f"{type(error).__name__}: {error}")
        finally:
            partial.unlink(missing_ok=True)

    def _answered(self, url: str, answer: str, found: bool = False) -> bool:
        self.answers[url] = answer
        log(f"debuginfod {url}: {answer}")
        return found

    def asked(self, build_id: str, kind: str = "debuginfo") -> list[str]:
        """`URL: answer` for each server asked for this file in this run, in order."""
        path = f"/buildid/{build_id.lower()}/{kind}"
        return [f"{url}: {answer}" for url, answer in self.answers.items() if url.endswith(path)]


def busy_wait(status: int, headers: dict[str, str]) -> float | None:
    """How long to wait before asking again (a 503 with a Retry-After in seconds), else None."""
    after = headers.get("retry-after", "")
    if status != 503 or not after.isdigit():
        return None
    return min(float(after), BUSY_WAIT_MAX_S)


def read_secret(path: str) -> str | None:
    """CRASHREG_DEBUGINFOD_TOKEN_FILE's token, read as every token file is (read_token)."""
    return read_token(path, "debuginfod token file") if path else None


def headers_file(path: str) -> dict[str, str]:
    """elfutils' DEBUGINFOD_HEADERS_FILE: one `Name: value` header per line."""
    if not path:
        return {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        log(f"debuginfod headers file {path} unreadable")
        return {}
    return {name.strip(): value.strip() for name, colon, value in (line.partition(":") for line in lines)
            if colon and name.strip()}
