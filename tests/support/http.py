"""Talking HTTP in tests: bearer headers, a test server's shutdown poll, a port nobody serves,
reports released at the same instant, the registry served on a socket."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import requests
from werkzeug.serving import make_server

from registry.app import create_app
from registry.config import Settings
from registry.db import Database

# How often a test server's loop looks for shutdown (the stdlib default, 0.5 s, is paid by
# every test that stops one).
SERVER_POLL_S = 0.02


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def closed_port() -> int:
    """A port nothing listens on: connections to it are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def release_together(url: str, token: str, bodies: list[dict]) -> list[requests.Response]:
    """Each body POSTed as a report on a connection of its own, all released at once."""
    barrier = threading.Barrier(len(bodies))

    def send(body: dict) -> requests.Response:
        with requests.Session() as http:
            barrier.wait()
            return http.post(f"{url}/api/v1/reports", json=body, headers=auth(token), timeout=60)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


@contextmanager
def serving(settings: Settings) -> Iterator[tuple[str, Database]]:
    """The registry over real HTTP, on `settings`' database and store."""
    database = Database(settings.database_url)
    server = make_server("127.0.0.1", 0, create_app(settings, database), threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(SERVER_POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", database
    finally:
        server.shutdown()
        thread.join()
        database.dispose()
