"""The production server as configured by gunicorn.conf.py: its own refusals are JSON, every
answer closes the connection (the keep-alive choice explained in gunicorn.conf.py), and its
gthread setting serves others while a slow client trickles its request in."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gunicorn import exchange, serving


def sqlite_copy(template: Path, folder: Path) -> str:
    shutil.copy(template, folder / "crashreg.db")
    return f"sqlite:///{folder}/crashreg.db"


@pytest.fixture(scope="module")
def gunicorn(migrated_sqlite: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    folder = tmp_path_factory.mktemp("gunicorn")
    with serving(sqlite_copy(migrated_sqlite, folder), folder) as port:
        yield port


def test_a_request_line_too_long_is_a_json_414(gunicorn: int) -> None:
    line = b"GET /api/v1/signatures?q=" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"
    status, headers, body = exchange(gunicorn, line)
    assert status.split()[1] == "414"
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "uri_too_long"


def test_answers_close_the_connection_even_for_keep_alive_clients(gunicorn: int) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n"
    status, headers, body = exchange(gunicorn, request)
    assert status.endswith("200 OK") and json.loads(body) == {"status": "ok"}
    assert headers["connection"] == "close"


def test_gthread_workers_answer_others_while_a_slow_client_trickles_its_request(
    migrated_sqlite: Path, tmp_path: Path
) -> None:
    """gunicorn.conf.py's answer to slowly sending clients without a buffering proxy:
    CRASHREG_THREADS above 1. One thread waits on the half-sent headers, another serves. (A
    sync worker reads the headers before anything else: the second client would wait until
    the worker timeout killed it, past this test's socket timeout.)"""
    with (serving(sqlite_copy(migrated_sqlite, tmp_path), tmp_path, CRASHREG_THREADS="2") as port,
          socket.create_connection(("127.0.0.1", port), timeout=30) as slow):
        slow.sendall(b"POST /api/v1/reports HTTP/1.1\r\nHost: t\r\nContent-Len")
        status, _, body = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status.endswith("200 OK") and json.loads(body) == {"status": "ok"}
        slow.sendall(b"gth: 0\r\n\r\n")  # the rest arrives: an ordinary answer, a 401 (no token)
        assert b" 401 " in slow.recv(65536).split(b"\r\n", 1)[0]


def chunked(path: str, token: str, body: bytes) -> bytes:
    """A POST whose body is sent in chunks (Transfer-Encoding: chunked, no Content-Length)."""
    pieces = [body[start:start + 65536] for start in range(0, len(body), 65536)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + framed


def test_a_chunked_body_past_the_limit_is_a_413_not_its_first_part(
        db_url: str, make_token, database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Sent chunked, a body past the limit was read up to the limit and that part taken for the
    whole: a report padded past 2 MiB with spaces and then garbage was stored (201). Now a 413;
    a chunked body within the limit is read whole."""
    from sqlalchemy import func, select

    from registry.core.events import Report
    from testkit.reports import crash_report

    token = make_token("report")
    padded = json.dumps(crash_report(report_id="chunked-past")).encode() + b" " * (3 << 20) + b"garbage"
    within = json.dumps(crash_report(report_id="chunked-within")).encode()
    with serving(db_url, tmp_path) as port:
        past = exchange(port, chunked("/api/v1/reports", token, padded))
        whole = exchange(port, chunked("/api/v1/reports", token, within))
    assert past[0].split()[1] == "413", past
    assert json.loads(past[2])["error"]["code"] == "body_too_large"
    assert whole[0].split()[1] == "201", whole
    with database.session() as session:
        assert session.scalars(select(Report.report_id)).all() == ["chunked-within"]
        assert session.scalar(select(func.count()).select_from(Report)) == 1
