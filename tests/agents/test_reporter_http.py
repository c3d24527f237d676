"""The reporter's own HTTP/1.1 client (http_request: http.client costs the core handler a third
of its start-up), against a real socket server answering the ways servers and proxies do."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from agents.reporter import client
from agents.reporter.config import Config


@contextmanager
def raw_server(answer: bytes, read_body: bool = True) -> Iterator[tuple[str, list[bytes]]]:
    """A TCP server that reads one request (headers and a Content-Length body), sends `answer`
    byte for byte and closes: what the client must cope with, unpolished by any framework.
    Not `read_body`: it answers after the headers and closes without reading the body (as
    gunicorn refuses a body past its limit), so the client's send fails midway."""
    listener = socket.create_server(("127.0.0.1", 0))
    requests: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            if not read_body:
                conn.sendall(answer)
                return
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            requests.append(head + b"\r\n\r\n" + body)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", requests
    finally:
        thread.join(timeout=10)
        listener.close()


def call(url: str, method: str = "POST", body: bytes | None = b'{"a": 1}') -> object:
    config = Config(url=url, token_file="/nonexistent", max_time=10)
    return client.http_request(config, method, "/api/v1/reports?x=1", body)


@pytest.mark.parametrize(("answer", "body"), [
    (b'HTTP/1.1 201 Created\r\nContent-Length: 12\r\n\r\n{"ok": true}', b'{"ok": true}'),
    (b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'
     b'4;ext=1\r\n{"a"\r\n5\r\n: 12}\r\n0\r\nX-Trailer: 1\r\n\r\n', b'{"a": 12}'),
    (b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"to": "the close"}',
     b'{"to": "the close"}'),
    (b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", b""),
], ids=["content-length", "chunked-with-extension-and-trailer", "to-the-close", "no-content"])
def test_bodies_framed_every_way_http_allows_arrive_whole(answer: bytes, body: bytes) -> None:
    with raw_server(answer) as (url, requests):
        response = call(url)
    assert response.body == body
    head = requests[0].split(b"\r\n\r\n")[0].decode()
    assert head.startswith("POST /api/v1/reports?x=1 HTTP/1.1\r\n")
    assert "Connection: close" in head and "Content-Length: 8" in head
    assert requests[0].endswith(b'{"a": 1}')


@pytest.mark.parametrize(("answer", "problem"), [
    (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP/1.x status line"),
    (b'HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{"cut":', "the body ended after 7 of 50 bytes"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length '-1'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a chunk size b'zz'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort", "a chunk ended early"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * 300 + b"\r\n", "more than 200 header lines"),
    (b"", "not an HTTP/1.x status line"),
], ids=["not-http", "truncated-body", "negative-length", "bad-chunk-size", "short-chunk", "header-flood",
        "closed-without-answer"])
def test_a_broken_answer_is_a_network_error_the_reporter_retries(answer: bytes, problem: str) -> None:
    """BadResponse is an OSError: the send loop retries and spools it like a dropped connection,
    never takes it for the registry's answer."""
    with raw_server(answer) as (url, _), pytest.raises(client.BadResponse) as error:
        call(url)
    assert isinstance(error.value, OSError)
    assert problem in str(error.value)


def test_a_head_answer_has_no_body_whatever_its_length_says() -> None:
    with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 123\r\n\r\n") as (url, requests):
        response = call(url, method="HEAD", body=None)
    assert (response.status, response.body) == (200, b"")
    assert b"Content-Length" not in requests[0]


def test_an_answer_given_before_the_body_was_read_is_read_after_the_send_fails() -> None:
    """A 413 sent before the server stopped reading reaches the reporter (which then slims the
    report) instead of a broken pipe (which spooled a report no resend could deliver)."""
    refusal = (b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\n"
               b"too large")
    with raw_server(refusal, read_body=False) as (url, _):
        response = call(url, body=b"x" * (16 << 20))
    assert isinstance(response, client.Response)
    assert (response.status, response.body) == (413, b"too large")


def test_a_server_trickling_its_answer_is_left_within_max_time() -> None:
    """max_time bounds the whole answer, not each read: a proxy sending a byte at a time stops
    holding the crash kernel (or the dying process) once it is spent."""
    answer = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 400\r\n\r\n" + b"x" * 400
    listener = socket.create_server(("127.0.0.1", 0))
    sent: list[int] = []
    left = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            count = 0
            try:
                for byte in answer:
                    conn.sendall(bytes([byte]))
                    count += 1
                    if left.wait(0.05):  # the client has given up: see whether the socket says so
                        conn.sendall(b"x" * 65536 * 8)
            except OSError:
                pass
            sent.append(count)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    config = Config(url=url, token_file="/nonexistent", max_time=0.5)
    with pytest.raises(TimeoutError, match=r"took longer than 0\.5s"):
        client.http_request(config, "POST", "/api/v1/reports", b"{}")
    left.set()
    thread.join(timeout=60)
    listener.close()
    assert sent and sent[0] < len(answer)  # the client closed before the answer was whole
