"""The registry over HTTP: one HTTP/1.1 request per connection, retries with backoff.

Not http.client: its imports (the email package, ssl with OpenSSL's start) were a third of a
core handler's instructions to its answer (bench/README.md, core handler)."""

from __future__ import annotations

import io
import json
import socket
import time
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from agents.reporter.config import Config
from agents.reporter.log import log

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class BadResponse(OSError):
    """What came back is not an HTTP/1.x response."""


MAX_HEADER_LINES = 200


MAX_LINE = 65536
COPY_PIECE = 1 << 20


def http_request(
    config: Config, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
    within: float | None = None,
) -> Response:
    """One request to the registry with the config's token: connect within connect_timeout,
    all of it within max_time, and both within `within` seconds when given (what is left of a
    delivery's deadline)."""
    if not config.url:
        raise Unsent("no registry URL configured")
    token = config.token()
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    if body is not None:
        auth |= {"Content-Type": "application/json", "Content-Length": str(len(body))}
    connect_timeout, max_time = config.connect_timeout, config.max_time
    if within is not None:
        connect_timeout, max_time = min(connect_timeout, within), min(max_time, within)
    return http_exchange(config.url.rstrip("/") + path, method, auth | (headers or {}), body,
                         connect_timeout, max_time, config.ca_file)


def http_exchange(url: str, method: str, headers: dict[str, str], body: bytes | None, connect_timeout: float,
                  max_time: float, ca_file: str, sink: BinaryIO | None = None) -> Response:
    """One request, one connection (`Connection: close`); TLS (ca_file, else the system's CAs)
    for an https URL. With `sink` the body is written there as it arrives (a debug file of
    hundreds of MB), and max_time bounds each read instead of the whole exchange."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    deadline = time.monotonic() + max_time
    all_headers = {"Host": parts.netloc, "Accept": "application/json", "Accept-Encoding": "identity",
                   "Connection": "close"} | headers
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sock = connect(host, parts.port or (443 if https else 80), connect_timeout)
    try:
        if https:
            import ssl

            context = ssl.create_default_context(cafile=ca_file or None)
            sock = context.wrap_socket(sock, server_hostname=host)
        sock.settimeout(max_time if sink else max(0.1, deadline - time.monotonic()))
        lines = [f"{method} {target} HTTP/1.1", *(f"{key}: {value}" for key, value in all_headers.items())]
        late = TimeoutError(f"{method} {parts.path} took longer than {max_time}s")
        try:
            sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        except (BrokenPipeError, ConnectionResetError) as unsent:
            # A server may answer and close before it has read the body: gunicorn refuses one
            # past its limit with a 413 that way. The answer waits in the receive queue.
            try:
                return _answer(sock, method, sink, deadline, late)
            except OSError:
                raise unsent from None
        return _answer(sock, method, sink, deadline, late)
    finally:
        sock.close()


def connect(host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to host:port within `timeout` seconds, its name lookup included (as
    curl's --connect-timeout): socket.create_connection resolves before any timeout applies,
    and a resolver that never answers held each attempt for its own retries (10 s and more)."""
    deadline = time.monotonic() + timeout
    problem: OSError = OSError(f"no address for {host}")
    for family, kind, protocol, _, address in lookup(host, port, timeout):
        sock = socket.socket(family, kind, protocol)
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.connect(address)
            return sock
        except OSError as error:
            sock.close()
            problem = error
    raise problem


def lookup(host: str, port: int, timeout: float) -> list[tuple[Any, ...]]:
    """getaddrinfo's addresses for host:port, within `timeout` seconds: an address is read at
    once; a name is looked up in a daemon thread, abandoned (TimeoutError) once the time is
    up (no resolver call can be interrupted, and the process need not wait for it to exit)."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass  # a name, not an address
    import threading

    found: list[Any] = []

    def resolve() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            found.append(error)

    resolver = threading.Thread(target=resolve, name=f"lookup {host}", daemon=True)
    resolver.start()
    resolver.join(timeout)
    if not found:
        raise TimeoutError(f"the name lookup of {host} took longer than {timeout:g}s")
    if isinstance(found[0], OSError):
        raise found[0]
    return found[0]


def _answer(sock: socket.socket, method: str, sink: BinaryIO | None, deadline: float,
            late: TimeoutError) -> Response:
    """The response, read within the deadline (with a sink, each read within max_time)."""
    if sink is not None:
        with sock.makefile("rb") as stream:
            return read_response(stream, method, sink)
    with io.BufferedReader(_WithinDeadline(sock, deadline, late)) as stream:
        return read_response(stream, method, None)


class _WithinDeadline(socket.SocketIO):
    """A socket's reads, each allowed what is left of the exchange's time: a server that
    trickles its answer a byte at a time cannot hold the reporter past max_time."""

    def __init__(self, sock: socket.socket, deadline: float, late: TimeoutError) -> None:
        super().__init__(sock, "rb")
        self._deadline, self._late = deadline, late

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._late
        self._sock.settimeout(left)
        try:
            return super().readinto(buffer) or 0
        except TimeoutError:
            raise self._late from None


def _line(stream: Any) -> bytes:
    line = stream.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise BadResponse("a response line longer than 64 KiB")
    return line


def read_response(stream: Any, method: str, sink: BinaryIO | None = None) -> Response:
    """Status line, headers, then the body: chunked, Content-Length, or up to the close; into
    `sink` when one is given (the Response's body is then empty)."""
    status_line = _line(stream).decode("latin-1").split(None, 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
        raise BadResponse(f"not an HTTP/1.x status line: {' '.join(status_line)[:100]!r}")
    status = int(status_line[1])
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        line = _line(stream).decode("latin-1").rstrip("\r\n")
        if not line:
            break
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    else:
        raise BadResponse(f"more than {MAX_HEADER_LINES} header lines")
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Response(status, headers, b"")
    out = sink if sink is not None and status == 200 else io.BytesIO()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        _chunked(stream, out)
    elif (length := headers.get("content-length")) is not None:
        if not length.isdigit():
            raise BadResponse(f"Content-Length {length[:40]!r}")
        if (copied := _copy(stream, out, int(length))) != int(length):
            raise BadResponse(f"the body ended after {copied} of {length} bytes")
    else:
        _copy(stream, out, None)
    return Response(status, headers, out.getvalue() if isinstance(out, io.BytesIO) else b"")


def _copy(stream: Any, out: BinaryIO, size: int | None) -> int:
    """Up to `size` bytes (None: to the end) from stream to out, in pieces; how many came."""
    copied = 0
    while size is None or copied < size:
        piece = stream.read(COPY_PIECE if size is None else min(COPY_PIECE, size - copied))
        if not piece:
            break
        out.write(piece)
        copied += len(piece)
    return copied


def _chunked(stream: Any, out: BinaryIO) -> None:
    while True:
        size_text = _line(stream).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"a chunk size {size_text[:40]!r}") from None
        if size == 0:
            while _line(stream).strip():  # trailers
                pass
            return
        if _copy(stream, out, size) != size or _line(stream).strip():
            raise BadResponse("a chunk ended early")


class Unsent(Exception):
    """The registry did not take the report: unreachable (status None), or it answered `status`
    (`fields`: those its error names)."""

    def __init__(self, problem: str, status: int | None = None, fields: frozenset[str] = frozenset()) -> None:
        super().__init__(problem)
        self.status = status
        self.fields = fields

    @property
    def refused(self) -> bool:
        """A verdict on the report itself (bad body, reused report_id): resending cannot help.
        Auth failures are not: a fixed token on the host makes the same resend succeed."""
        status = self.status or 0
        return 400 <= status < 500 and status not in RETRYABLE_STATUSES | {401, 403}


def post_with_retries(config: Config, path: str, body: bytes, until: float | None = None) -> Response:
    """POST with retries on network errors, 408, 429 and 5xx, all within one deadline: `until`
    (time.monotonic()), by default CRASHREG_DEADLINE seconds from now. Each attempt's timeouts
    are clipped to the time left; each wait is retry_wait's (the answer's Retry-After, else the
    backoff, plus jitter), and a wait that would reach the deadline is not waited: Unsent at
    once, so the caller falls back (decides offline, spools) while there is time."""
    until = time.monotonic() + config.deadline if until is None else until
    delay = config.retry_delay
    for attempt in range(config.retries + 1):
        status, retry_after = None, None
        try:
            response = http_request(config, "POST", path, body, within=max(0.001, until - time.monotonic()))
        except OSError as error:
            problem = f"{type(error).__name__}: {error}"
        else:
            if 200 <= response.status < 300:
                return response
            said = response.body[:300].decode("utf-8", "replace").strip()
            status, problem = response.status, f"HTTP {response.status} {said}"
            if status not in RETRYABLE_STATUSES:
                raise Unsent(problem, status, error_fields(response.body))
            retry_after = response.headers.get("retry-after")
        log(f"attempt {attempt + 1}: {problem}")
        if attempt == config.retries:
            break
        import random

        wait = retry_wait(delay, retry_after, random.random())
        if time.monotonic() + wait >= until:
            log(f"no attempt after a wait of {wait:.1f} s: past the delivery's deadline "
                f"(CRASHREG_DEADLINE, {config.deadline:g} s)")
            break
        time.sleep(wait)
        delay *= 2
    raise Unsent(problem, status)


def retry_wait(delay: float, retry_after: str | None, jitter: float) -> float:
    """Seconds before the next attempt: the answer's Retry-After in seconds (the registry's on a
    503; an HTTP date is not read), else half the backoff `delay`; plus `jitter` (0 to 1) times
    the delay, so that a fleet's hosts, failed or told alike, do not come back in lockstep."""
    told = (retry_after or "").strip()
    return (float(told) if told.isdigit() else delay / 2) + jitter * delay


def error_fields(body: bytes) -> frozenset[str]:
    """The fields a registry's error answer names (`{"error": {"fields": {...}}}`), if any."""
    try:
        fields = json.loads(body)["error"]["fields"]
    except (ValueError, TypeError, KeyError):
        return frozenset()
    return frozenset(fields) if isinstance(fields, dict) else frozenset()


def report_body(report: dict[str, Any]) -> bytes:
    return json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode()


def send_report_body(config: Config, body: bytes, until: float | None = None) -> dict[str, Any]:
    """POST /api/v1/reports (within `until`, post_with_retries'); the registry's answer, or Unsent."""
    return post_with_retries(config, "/api/v1/reports", body, until).json()
