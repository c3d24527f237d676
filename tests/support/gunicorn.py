"""The registry served by gunicorn with gunicorn.conf.py, as production runs it: for clients
whose behaviour depends on how that server reads, answers and closes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def exchange(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status, headers, body


@contextmanager
def serving(database_url: str, folder: Path, **settings: str) -> Iterator[int]:
    """gunicorn with gunicorn.conf.py and one worker over `database_url` (its dump store and
    symbol cache in `folder`); its port."""
    port = free_port()
    env = os.environ | {"CRASHREG_DATABASE_URL": database_url, "PROMETHEUS_MULTIPROC_DIR": str(folder),
                        "CRASHREG_DUMP_STORE": str(folder / "dumps"),
                        "CRASHREG_SYMBOL_CACHE_DIR": str(folder / "symbols")} | settings
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "--workers", "1",
         "--bind", f"127.0.0.1:{port}", "registry.wsgi:app"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=(folder / "gunicorn.log").open("wb"),
    )
    try:
        for _ in range(600):  # readiness, not timing: up to a minute on a loaded machine
            try:
                if exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")[0].endswith("200 OK"):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail((folder / "gunicorn.log").read_text())
        yield port
    finally:
        server.terminate()
        server.wait(timeout=60)
