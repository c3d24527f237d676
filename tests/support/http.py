"""Talking HTTP in tests: bearer headers, a test server's shutdown poll, a port nobody serves."""

from __future__ import annotations

import socket

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
