"""The symbol store on S3 (moto's server through boto3): an upload in parts lands in the
bucket, the registry's debuginfod serves it from there, the command stores into it, and
retention deletes from it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from flask import Flask

from registry import domains
from registry.config import DumpStoreSettings, RetentionSettings, Settings
from registry.db import Database, utcnow
from registry.retention.gc import collect
from registry.signatures.identify import identify
from registry.storage.store import open_store
from registry.symbolication.service import symbolicator_for
from registry.symbols.keep import Origin, keep_file
from registry.symbols.sources import SymbolSources
from tests.support.http import auth
from tests.support.s3 import S3Server, s3_server  # noqa: F401 (the session's S3 server)
from tests.support.symbols import Pipeline, Program, symbol_tables_of


@pytest.fixture
def settings(db_url: str, tmp_path: Path, s3_server: S3Server,  # noqa: F811
             monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return Settings(database_url=db_url, public_url="http://crashreg.test",
                    dump_store=DumpStoreSettings(url=f"s3://{s3_server.bucket()}/crash", part_size_mb=5))


def bucket_keys(s3_server: S3Server, settings: Settings) -> list[str]:  # noqa: F811
    bucket = settings.dump_store.url.removeprefix("s3://").split("/")[0]
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="crash/symbols/")
    return sorted(item["Key"] for item in listed.get("Contents", []))


def test_symbols_on_s3_are_uploaded_served_kept_and_collected(
    app: Flask, live_server: str, database: Database, settings: Settings, s3_server: S3Server,  # noqa: F811
    make_token: Callable[..., str], symbol_programs: dict[str, Program], tmp_path: Path,
) -> None:
    uploaded, other = symbol_programs["uploaded"], symbol_programs["upstream"]
    app.extensions["crashreg.settings"] = replace(
        settings, symbols=replace(settings.symbols, cache_dir=str(tmp_path / "registry-cache")))
    pipeline = Pipeline(live_server, make_token("symbols"), tmp_path)
    answer = pipeline.upload(uploaded.debug.read_bytes(), uploaded.build_id)
    assert answer.status_code == 200 and answer.json()["new_kinds"] == ["debuginfo"], answer.text

    served = requests.get(f"{live_server}/debuginfod/buildid/{uploaded.build_id}/debuginfo",
                          headers=auth(make_token("read")), timeout=60)
    assert served.status_code == 200 and served.content == uploaded.debug.read_bytes()

    store = open_store(settings.dump_store, settings.public_url)
    assert keep_file(database, store, other.stripped, Origin("upload", "cli")).new_kinds == ("executable",)
    assert [key.split("/")[2] for key in bucket_keys(s3_server, settings)] == sorted(
        [uploaded.build_id, other.build_id])

    aged = replace(settings, retention=RetentionSettings(symbol_days=1))
    assert collect(database, store, aged, now=utcnow() + timedelta(days=2)).symbols_deleted == 2
    assert bucket_keys(s3_server, settings) == []


def test_a_file_in_the_bucket_is_copied_here_in_the_background_even_after_a_miss(
    database: Database, settings: Settings, symbol_programs: dict[str, Program], tmp_path: Path,
) -> None:
    program = symbol_programs["uploaded"]
    local = replace(settings, symbols=replace(settings.symbols, cache_dir=str(tmp_path / "cache")))
    sources = SymbolSources(local, database)
    try:
        assert sources.find(program.build_id, wait=True) is None  # a miss, remembered
        keep_file(database, sources.store, program.debug, Origin("upload", "elsewhere"))  # another process
        assert sources.find(program.build_id, wait=False) is None  # in the bucket only: copied meanwhile
        sources.settle()
        found = sources.find(program.build_id, wait=False)
        assert found is not None and found.read_bytes() == program.debug.read_bytes()
    finally:
        sources.close()


def test_dwarf_replacing_a_table_in_the_bucket_reaches_this_machines_copy(
    database: Database, settings: Settings, s3_server: S3Server,  # noqa: F811
    symbol_programs: dict[str, Program], tmp_path: Path,
) -> None:
    """The table's copy this machine fetched from the bucket is dropped, the DWARF file fetched
    in its place and the symcache made again from it; the table's object leaves the bucket."""
    program = symbol_programs["uploaded"]
    settings = replace(settings, symbols=replace(settings.symbols, cache_dir=str(tmp_path / "cache")))
    store = open_store(settings.dump_store, settings.public_url)
    _, table = symbol_tables_of(program.unstripped, tmp_path / "table")
    keep_file(database, store, table, Origin("upload", "cli"))
    symbolicator = symbolicator_for(settings, database, domains.wiring().signatures, identify)
    try:
        assert symbolicator.prepare({program.build_id}) == 1
        assert symbolicator.symcaches.lines(program.build_id) is False
        assert keep_file(database, store, program.debug, Origin("upload", "cli")).new_kinds == ("debuginfo",)

        assert symbolicator.refresh(program.build_id)

        assert symbolicator.symcaches.lines(program.build_id) is True
        copy = symbolicator.sources.find(program.build_id, wait=False)
        assert copy is not None and copy.read_bytes() == program.debug.read_bytes()
        [key] = bucket_keys(s3_server, settings)
        assert key.endswith(hashlib.sha256(program.debug.read_bytes()).hexdigest())
        assert not symbolicator.refresh(program.build_id)  # made from DWARF: nothing to do
    finally:
        symbolicator.close()
        symbolicator.sources.close()
