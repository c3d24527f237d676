"""moto's standalone S3 server (`moto_server`) on 127.0.0.1, in its own process: the S3 protocol
server the tests and bench/dumps.py run the dump store against; and `S3Gate`, a front to it
that can stop one chosen request (a test pulls a plug there)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.config
import requests

# Credentials of the test server only (moto accepts any); never a host's.
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "crashreg-test-key-id",
    "AWS_SECRET_ACCESS_KEY": "crashreg-test-secret-key",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen[bytes]

    def env(self) -> dict[str, str]:
        return S3_ENV | {"AWS_ENDPOINT_URL_S3": self.endpoint}

    def client(self, **config: Any) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=S3_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
            config=botocore.config.Config(**config),
        )

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"dumps-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


def start_moto(log: Path, host: str = "127.0.0.1") -> S3Server:
    """moto_server in its own process group on an ephemeral port; returns once it answers."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    server = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen(
        [str(server), "-H", host, "-p", str(port)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    endpoint = f"http://{host}:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited ({process.returncode}); see {log}")
        try:
            requests.get(endpoint + "/moto-api/", timeout=5)
            return S3Server(endpoint, process)
        except requests.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"moto_server did not answer within 60 s; see {log}")


HOP_HEADERS = ("content-length", "transfer-encoding", "connection", "date", "server")  # the gate's own


class S3Gate:
    """A real HTTP server in front of an S3 server, forwarding each request unchanged (the Host
    header too: a URL signed for the gate's address stays valid). `hold(method, path)` picks
    the request to stop: it is neither forwarded nor answered, `on_hold` runs first (a test
    kills the client there: the power or the process goes with that request in flight), and
    its connection is closed. `forwarded` lists (method, path, status) of the others."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.hold: Callable[[str, str], bool] = lambda method, path: False
        self.on_hold: Callable[[], None] = lambda: None
        self.held: list[tuple[str, str]] = []
        self.forwarded: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with gate._lock:
                    held = gate.hold(self.command, self.path)
                    if held:
                        gate.held.append((self.command, self.path))
                if held:
                    gate.on_hold()
                    self.close_connection = True
                    return
                upstream = http.client.HTTPConnection(
                    gate.upstream.hostname or "127.0.0.1", gate.upstream.port, timeout=120
                )
                try:
                    upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                    answer = upstream.getresponse()
                    content = answer.read()
                finally:
                    upstream.close()
                with gate._lock:
                    gate.forwarded.append((self.command, self.path, answer.status))
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in HOP_HEADERS:
                        self.send_header(name, value)
                head = self.command == "HEAD"  # no body, the object's length
                length = answer.getheader("Content-Length", "0") if head else str(len(content))
                self.send_header("Content-Length", length)
                self.end_headers()
                if not head:
                    self.wfile.write(content)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, method: str, needle: str = "") -> int:
        """Requests forwarded and answered 2xx with this method whose path holds `needle`."""
        return sum(1 for m, path, status in self.forwarded if m == method and needle in path and status < 300)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
