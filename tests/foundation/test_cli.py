"""The crashreg command, run as a real process."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from registry.cli import main
from registry.cli_support import CliContext
from registry.config import Settings
from registry.db import sqlite_path
from registry.migrate import head_revisions
from tests.support.cli import REPO, crashreg
from tests.support.databases import BACKENDS, create_postgres_database, drop_postgres_database
from tests.support.http import auth


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


def crashreg_in(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """crashreg run from another folder, with exactly the given database setting."""
    base = {k: v for k, v in os.environ.items() if k != "CRASHREG_DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "registry", *args],
        env=base | env | {"PYTHONPATH": str(REPO)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1 and result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.fixture(params=BACKENDS)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database that exists but was never migrated, on each backend in turn."""
    if request.param == "sqlite":
        path = tmp_path / "empty.db"
        sqlite3.connect(path).close()
        yield f"sqlite:///{path}"
    else:
        url = create_postgres_database()
        yield url
        drop_postgres_database(url)


def test_missing_default_database_is_one_line_and_no_file_is_created(tmp_path) -> None:
    error = one_error_line(crashreg_in(tmp_path, {}, "tokens", "list"))
    assert f"no database at SQLite file {tmp_path / 'crashreg.db'}" in error
    assert "the default" in error and "crashreg db upgrade" in error
    assert list(tmp_path.iterdir()) == []


def test_unmigrated_database_is_one_line(empty_db_url, tmp_path) -> None:
    env = {"CRASHREG_DATABASE_URL": empty_db_url}
    for command in (["tokens", "list"], ["tokens", "create", "--name", "x", "--scope", "read"], ["serve"]):
        error = one_error_line(crashreg_in(tmp_path, env, *command))
        assert "has no crashreg schema (not migrated): run `crashreg db upgrade`" in error
    migrated = crashreg_in(tmp_path, env, "db", "upgrade")
    assert migrated.returncode == 0 and "at head" in migrated.stderr
    listed = crashreg_in(tmp_path, env, "tokens", "list")
    assert listed.returncode == 0 and listed.stdout.startswith("  id  name")


def test_database_behind_the_code_says_upgrade(db_url, tmp_path) -> None:
    env = {"CRASHREG_DATABASE_URL": db_url}
    assert crashreg_in(tmp_path, env, "db", "downgrade", "-1").returncode == 0
    try:
        error = one_error_line(crashreg_in(tmp_path, env, "tokens", "list"))
        heads = ", ".join(sorted(head_revisions()))
        assert f"this crashreg needs {heads}: run `crashreg db upgrade`" in error
    finally:
        assert crashreg_in(tmp_path, env, "db", "upgrade").returncode == 0


def test_unreachable_or_malformed_database_is_one_line(tmp_path) -> None:
    unreachable = {"CRASHREG_DATABASE_URL": "postgresql://crashreg:s3cret@127.0.0.1:1/crashreg"}
    refused = one_error_line(crashreg_in(tmp_path, unreachable, "tokens", "list"))
    assert "cannot open database postgresql://crashreg:***@127.0.0.1:1/crashreg" in refused
    assert "s3cret" not in refused
    bad_url = {"CRASHREG_DATABASE_URL": "crashreg.db"}
    malformed = one_error_line(crashreg_in(tmp_path, bad_url, "tokens", "list"))
    assert "is not a database URL" in malformed


def test_commands_name_their_database(db_url, tmp_path) -> None:
    listed = crashreg_in(tmp_path, {"CRASHREG_DATABASE_URL": db_url}, "tokens", "list")
    assert listed.returncode == 0
    path = sqlite_path(db_url)
    shown = f"SQLite file {path}" if path else make_url(db_url).render_as_string(hide_password=True)
    assert listed.stderr.splitlines()[0] == f"database: {shown} (CRASHREG_DATABASE_URL)"


def test_if_missing_makes_the_quickstart_token_once(db_url, tmp_path) -> None:
    env = {"CRASHREG_DATABASE_URL": db_url}
    args = ("tokens", "create", "--name", "quickstart", "--scope", "admin", "--if-missing")
    first = crashreg_in(tmp_path, env, *args)
    assert first.returncode == 0 and first.stdout.startswith("crs_")
    again = crashreg_in(tmp_path, env, *args)
    assert again.returncode == 0 and again.stdout == ""
    assert "'quickstart' exists" in again.stderr
    assert "crashreg tokens create --name NAME --scope admin" in again.stderr
    listed = crashreg_in(tmp_path, env, "tokens", "list").stdout
    assert sum(" quickstart " in line for line in listed.splitlines()) == 1


def test_a_bad_setting_is_one_line_for_any_command_and_help_still_works(tmp_path) -> None:
    env = {"CRASHREG_CAPTURE_WINDOW_DAYS": "a week"}
    error = one_error_line(crashreg_in(tmp_path, env, "tokens", "list"))
    assert error == "Error: CRASHREG_CAPTURE_WINDOW_DAYS must be a number, got 'a week'"
    helped = crashreg_in(tmp_path, env, "tokens", "list", "--help")
    assert helped.returncode == 0 and "Tokens with their scope" in helped.stdout


def test_commands_use_the_settings_they_are_given(db_url, monkeypatch) -> None:
    """The settings reach a command through its Click context; the environment is read only
    when none were given."""
    monkeypatch.setenv("CRASHREG_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    given = CliContext(Settings(database_url=db_url))
    created = CliRunner().invoke(main, ["tokens", "create", "--name", "given", "--scope", "read"], obj=given)
    assert created.exit_code == 0, created.output
    from_env = CliRunner().invoke(main, ["tokens", "list"])
    assert from_env.exit_code == 1
    assert "cannot open database postgresql://nobody@127.0.0.1:1/none" in from_env.output
