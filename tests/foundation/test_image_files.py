"""The image carries no key, token, database, dump, virtual environment or git history (issue
44): the files the Dockerfile's COPY lines select, less .dockerignore's (tests/support/image.py),
read from the Dockerfile and .dockerignore themselves."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.image import image_files, read_dockerfile
from tests.support.secret_scan import secret_findings

ROOT = Path(__file__).resolve().parents[2]
SQLITE = b"SQLite format 3\x00"
PRIVATE_KEY = "-----BEGIN " + "PRIVATE KEY-----"  # split: this file holds no key
ELF_CORE = b"\x7fELF"  # with e_type 4 (ET_CORE) at offset 16
# What a working checkout holds beside the sources and the image must not: a database and its
# journal, a virtual environment, git's history and config, kept dumps, a key, a token, an env
# file, bytecode, a core.
PLANTED = {
    "crashreg.db": SQLITE,
    "registry/crashreg.db-wal": b"WAL",
    "sync/reporting.sqlite3": SQLITE,
    ".venv/lib/python3.11/site-packages/flask/__init__.py": b"",
    ".git/config": b"[remote]\n",
    "crashreg-dumps/00/vmcore": b"KDUMP",
    "registry/crashreg-dumps/part-1": b"KDUMP",
    "registry/tls/server.key": PRIVATE_KEY.encode(),
    "dashboards/grafana.pem": PRIVATE_KEY.encode(),
    "registry/.env": b"CRASHREG_SECRET_KEY=not-shipped\n",
    "sync/jira/bot.token": b"not-shipped\n",
    "registry/__pycache__/app.cpython-311.pyc": b"",
    "registry/demo/cores/ingest-worker.tar.xz": b"",
    "registry/demo/crash.core": ELF_CORE + b"\x02\x01\x01" + bytes(9) + b"\x04\x00",
}


def is_database_key_or_core(path: Path) -> bool:
    head = path.read_bytes()[:4096]
    return (head.startswith(SQLITE) or PRIVATE_KEY.encode() in head
            or (head.startswith(ELF_CORE) and head[16:18] == b"\x04\x00"))


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A build context: what the COPY lines name, as in this checkout, with PLANTED added."""
    context = tmp_path / "context"
    context.mkdir()
    for name in ["Dockerfile", ".dockerignore"]:
        shutil.copy(ROOT / name, context / name)
    for copy in read_dockerfile(ROOT / "Dockerfile").copies:
        for source in copy.sources:
            (shutil.copytree if (ROOT / source).is_dir() else shutil.copy)(ROOT / source, context / source)
    for name, content in PLANTED.items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        (context / name).write_bytes(content)
    return context


def test_the_image_leaves_out_keys_tokens_databases_dumps_and_environments(context: Path) -> None:
    files = image_files(context, read_dockerfile(context / "Dockerfile"))
    copied = {str(path.relative_to(context)) for path in files.values()}
    assert copied & set(PLANTED) == set()
    assert [name for name in copied if is_database_key_or_core(context / name)] == []
    needed = {"pyproject.toml", "registry/wsgi.py", "migrations/env.py", "registry/demo/cores/stacks.json"}
    assert needed <= copied


def test_the_image_files_hold_no_secret() -> None:
    """The scanner of the repository's secrets test (detect-secrets with .secrets.baseline's
    audited false positives) over every file the image gets."""
    files = image_files(ROOT, read_dockerfile(ROOT / "Dockerfile")).values()
    assert secret_findings(files, ROOT) == []
