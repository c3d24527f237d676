"""Dump store tests run on both stores (moto's S3 server, a local directory) and both databases."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.config import DumpStoreSettings, Settings
from tests.support.dumps import api  # noqa: F401 (the registry over HTTP)
from tests.support.s3 import S3Server, s3_server  # noqa: F401 (the session's S3 server)

STORES = ["s3", "local"]


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_url(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> str:
    """s3://<a new bucket>/crash with boto3 pointed at moto, or a directory."""
    if store_kind == "local":
        return str(tmp_path / "dumps")
    server: S3Server = request.getfixturevalue("s3_server")
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    return f"s3://{server.bucket()}/crash"


@pytest.fixture
def settings(db_url: str, store_url: str) -> Settings:
    return Settings(database_url=db_url, public_url="http://crashreg.test",
                    dump_store=DumpStoreSettings(url=store_url, part_size_mb=5))
