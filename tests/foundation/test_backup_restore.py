"""Backup and restore end to end, on both databases, with exactly the commands
docs/operations.md gives (read from its `<!-- backup:... -->` and `<!-- restore:... -->`
blocks): a registry with events and a dump in its local store is backed up while it runs,
wiped, restored, and then serves the same event and the same dump bytes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from sqlalchemy.engine import make_url

from registry.auth.tokens import create_token
from registry.config import DumpStoreSettings, Settings
from registry.migrate import upgrade
from registry.storage.parts import MIB
from tests.support.databases import (
    BACKENDS,
    POSTGRES_ADMIN_URL,
    create_postgres_database,
    drop_postgres_database,
)
from tests.support.dumps import PART, Api, stored_dump
from tests.support.http import serving

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
VENV_BIN = Path(sys.executable).parent


def documented_commands(step: str, backend: str) -> str:
    """The shell block docs/operations.md marks `<!-- {step}:{backend} -->`."""
    found = re.search(rf"<!-- {step}:{backend} -->\n```sh\n(.*?)```", DOCS.read_text(), re.DOTALL)
    assert found, f"docs/operations.md has no {step} block for {backend}"
    return found.group(1)


def run_documented(step: str, backend: str, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", documented_commands(step, backend)],
                          env=os.environ | {"PATH": f"{VENV_BIN}:{os.environ['PATH']}"} | env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(backend, database URL) of a registry of the test's own, at the migration head."""
    if request.param == "sqlite":
        path = tmp_path / "registry" / "crashreg.db"
        path.parent.mkdir()
        shutil.copy(request.getfixturevalue("migrated_sqlite"), path)
        yield "sqlite", f"sqlite:///{path}"
        return
    url = create_postgres_database()
    upgrade(url)
    yield "postgresql", url
    drop_postgres_database(url)


def wipe(backend: str, url: str, store: Path) -> None:
    """The disaster: the database gone (an empty one in its place), the store's directory gone."""
    shutil.rmtree(store)
    if backend == "sqlite":
        path = Path(make_url(url).database or "")
        for file in path.parent.glob(path.name + "*"):
            file.unlink()
        return
    drop_postgres_database(url)
    name = url.rsplit("/", 1)[1]
    subprocess.run(["createdb", "--maintenance-db", POSTGRES_ADMIN_URL, name], check=True)


def test_a_registry_backed_up_wiped_and_restored_serves_the_same_event_and_dump(
    backend: tuple[str, str], tmp_path: Path
) -> None:
    kind, url = backend
    store, saved = tmp_path / "dump-store", tmp_path / "backup"
    saved.mkdir()
    settings = Settings(database_url=url, public_url="http://crashreg.test",
                        dump_store=DumpStoreSettings(url=str(store), part_size_mb=PART // MIB))
    with serving(settings) as (base, database):

        def make_token(scope: str, kind: str = "agent", name: str | None = None) -> str:
            with database.session() as session:
                return create_token(session, name or f"{scope}-backup", scope, kind)[0]

        api = Api(base, make_token)
        event, capture, data = stored_dump(api)
        before = api.get(f"/api/v1/events/{event['event_id']}").json()
        env = {"CRASHREG_DATABASE_URL": url, "CRASHREG_DUMP_STORE": str(store), "BACKUP": str(saved),
               "CRASHREG_DB_FILE": make_url(url).database or ""}
        run_documented("backup", kind, env)  # while the registry serves

    wipe(kind, url, store)
    said = run_documented("restore", kind, env)
    current, head = re.findall(r"^(?:current|head):\s+(\S+)", said, re.MULTILINE)
    assert current == head  # the restored database is at the migration head

    with serving(settings) as (base, _):
        api.url = base
        assert api.get(f"/api/v1/events/{event['event_id']}").json() == before
        link = api.get(f"/api/v1/captures/{capture['id']}/download")
        assert link.status_code == 200, link.text
        fetched = requests.get(link.json()["url"], timeout=60)
        assert fetched.status_code == 200 and fetched.content == data
