"""moto's standalone S3 server (`moto_server`) on 127.0.0.1, in its own process: the S3 protocol
server the tests and bench/dumps.py run the dump store against."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
