"""The session's S3 protocol server for the tests (testkit/s3.py): moto's standalone server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.s3 import S3_ENV, S3Server, start_moto

__all__ = ["S3_ENV", "S3Server", "s3_server"]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()
