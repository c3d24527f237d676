"""The crashreg command, run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import auth


def crashreg(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"CRASHREG_DATABASE_URL": db_url}
    return subprocess.run(
        [sys.executable, "-m", "registry", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_tokens_create_list_revoke(db_url, client) -> None:
    created = crashreg(db_url, "tokens", "create", "--name", "kdump-fleet", "--scope", "report")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("crs_") and len(token) > 40
    assert "not kept" in created.stderr
    listed = crashreg(db_url, "tokens", "list")
    assert "kdump-fleet" in listed.stdout and token not in listed.stdout
    assert client.get("/api/v1/signatures", headers=auth(token)).status_code == 403  # report scope
    token_id = listed.stdout.splitlines()[1].split()[0]
    assert crashreg(db_url, "tokens", "revoke", token_id).returncode == 0
    assert client.get("/api/v1/signatures", headers=auth(token)).status_code == 401
    bad = crashreg(db_url, "tokens", "create", "--name", "x", "--scope", "root")
    assert bad.returncode == 2 and "root" in bad.stderr


def test_db_current_reports_head(db_url) -> None:
    current = crashreg(db_url, "db", "current")
    assert current.returncode == 0
    lines = current.stdout.splitlines()
    assert lines[0].split(":", 1)[1].strip() == lines[1].split(":", 1)[1].strip()
