"""docs/configuration.md against the code: every variable the code reads is listed, every listed
variable is read, and a default written as a literal is the one the code uses (setting the
variable to it changes nothing, setting it to something else changes something)."""

from __future__ import annotations

import multiprocessing
import re
import runpy
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from registry.config import AlertThresholds, Settings
from sync.jira.config import JiraOptions

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
SOURCES = [
    *ROOT.glob("registry/**/*.py"),
    *ROOT.glob("sync/**/*.py"),
    *ROOT.glob("dashboards/**/*.py"),
    ROOT / "gunicorn.conf.py",
]
ROW = re.compile(r"^\| `(CRASHREG_[A-Z0-9_]+)` \| .* \| (.*) \|$")
SECTION = re.compile(r"^## .*\(`([^`]+)`\)$")
NAME = re.compile(r'"(CRASHREG_[A-Z0-9_]+)"')
APP_CONFIG_KEY = re.compile(r'config\[\s*"(CRASHREG_[A-Z0-9_]+)"')  # Flask app.config, not the environment


def documented() -> dict[str, tuple[str, str]]:
    """variable -> (the file its section names, its default cell)."""
    rows, section = {}, ""
    for line in CONFIGURATION.read_text().splitlines():
        if heading := SECTION.match(line):
            section = heading.group(1)
        elif row := ROW.match(line):
            assert row.group(1) not in rows, f"{row.group(1)} is listed twice"
            rows[row.group(1)] = (section, row.group(2).strip())
    return rows


def read_by_code() -> set[str]:
    names: set[str] = set()
    for path in SOURCES:
        text = path.read_text()
        names |= set(NAME.findall(text)) - set(APP_CONFIG_KEY.findall(text))
    # The alert thresholds are read by name made from their fields (CRASHREG_ALERT_<FIELD>).
    return names | {f"CRASHREG_ALERT_{item.name.upper()}" for item in fields(AlertThresholds)}


def test_every_variable_the_code_reads_is_documented_and_no_other() -> None:
    listed, read = set(documented()), read_by_code()
    assert read - listed == set(), "read by the code but missing from docs/configuration.md"
    assert listed - read == set(), "in docs/configuration.md but read by no code"


def test_the_environment_is_read_in_one_place() -> None:
    """registry/config.py reads it and its settings are passed on; gunicorn.conf.py holds gunicorn's
    process settings, and metrics.py asks for PROMETHEUS_MULTIPROC_DIR as the prometheus client does."""
    reads = re.compile(r"os\.environ|getenv")
    reading = {path.relative_to(ROOT).as_posix() for path in SOURCES if reads.search(path.read_text())}
    assert reading == {"registry/config.py", "registry/metrics.py", "gunicorn.conf.py"}


def registry_settings(environ: dict[str, str]) -> Any:
    return Settings.from_env(environ)


JIRA_ON = {"CRASHREG_JIRA_URL": "https://jira.test", "CRASHREG_JIRA_TOKEN": "t", "CRASHREG_JIRA_PROJECT": "X"}
# Every Jira variable but the webhook secret (the registry's webhook endpoint checks it) shapes the sync.
SYNC_VARIABLES = sorted(
    name for name in documented()
    if name.startswith("CRASHREG_JIRA_") and name != "CRASHREG_JIRA_WEBHOOK_SECRET"
)


def jira_options(environ: dict[str, str]) -> Any:
    """What the Jira sync makes of an environment (with the sync on)."""
    return JiraOptions.from_settings(Settings.from_env(JIRA_ON | environ))


def gunicorn_settings(environ: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    with monkeypatch.context() as patch:
        patch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # so the file adds nothing of its own
        for name in documented():
            patch.delenv(name, raising=False)
        for name, value in environ.items():
            patch.setenv(name, value)
        values = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    names = ("bind", "workers", "worker_class", "threads", "worker_connections", "keepalive",
             "control_socket")
    return {name: values[name] for name in names}


def readers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Callable[[dict[str, str]], Any]]:
    """Each section's file, as a function from an environment to what the code made of it."""
    return {
        "registry/config.py": registry_settings,
        "gunicorn.conf.py": lambda environ: gunicorn_settings(environ, monkeypatch, tmp_path),
    }


def another_value(literal: str) -> str:
    return str(int(literal) + 1) if literal.isdigit() else f"{literal}-other"


def outcome(read: Callable[[dict[str, str]], Any], environ: dict[str, str]) -> Any:
    try:
        return read(environ)
    except ValueError as error:  # a refused value is also proof the variable is read
        return f"refused: {error}"


def assert_default(read: Callable[[dict[str, str]], Any], name: str, default: str, where: str) -> None:
    """Setting `name` to its documented default changes nothing that `read` makes; another value does."""
    unset = read({})
    literal = re.fullmatch(r"`([^`]*)`", default)
    if literal:
        assert read({name: literal.group(1)}) == unset, f"{name}'s default is not {default}"
        probe = another_value(literal.group(1))
    else:
        probe = "https://other.test/x" if name.endswith("_URL") else "17"
    assert outcome(read, {name: probe}) != unset, f"{name} changes nothing in {where}"


@pytest.mark.parametrize("name", sorted(documented()))
def test_documented_default_is_the_code_s(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    section, default = documented()[name]
    if section == "sync/grafana/export.py":
        pytest.skip("expanded by Grafana from its own environment: crashreg only writes its name")
    assert_default(readers(monkeypatch, tmp_path)[section], name, default, section)


@pytest.mark.parametrize("name", sorted(documented()))
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_variable_means_its_default(
    name: str, empty: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An exported-but-empty variable (`CRASHREG_X=` in a unit file) is the same as an unset one."""
    section, _ = documented()[name]
    if section == "sync/grafana/export.py":
        pytest.skip("expanded by Grafana from its own environment: crashreg only writes its name")
    read = readers(monkeypatch, tmp_path)[section]
    assert read({name: empty}) == read({}), f"{name}={empty!r} is not its default"


@pytest.mark.parametrize("name", SYNC_VARIABLES)
def test_the_jira_sync_uses_each_jira_variable_as_documented(name: str) -> None:
    """registry/config.py reads them; sync/jira/config.py turns them into the sync's options."""
    assert_default(jira_options, name, documented()[name][1], "the Jira sync's options")


def test_database_default_is_a_file_in_the_working_directory(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings.from_env({}).database_url == f"sqlite:///{tmp_path / 'crashreg.db'}"
    assert documented()["CRASHREG_DATABASE_URL"][1] == "`crashreg.db` in the working directory"


def test_a_read_replica_needs_postgresql_on_both_sides() -> None:
    with pytest.raises(ValueError, match="both must be postgresql"):
        Settings.from_env({"CRASHREG_READ_DATABASE_URL": "postgresql://replica/crashreg"})  # SQLite primary
    with pytest.raises(ValueError, match="both must be postgresql"):
        Settings.from_env({"CRASHREG_DATABASE_URL": "postgresql://db/crashreg",
                           "CRASHREG_READ_DATABASE_URL": "sqlite:///copy.db"})
    settings = Settings.from_env({"CRASHREG_DATABASE_URL": "postgresql://db/crashreg",
                                  "CRASHREG_READ_DATABASE_URL": "postgresql://replica/crashreg"})
    assert settings.read_replica.url == "postgresql://replica/crashreg"
    assert "//replica/" not in repr(settings)  # the URL may hold a password


@pytest.mark.parametrize(("name", "value", "refusal"), [
    ("CRASHREG_CAPTURE_WINDOW_DAYS", "-7", "must be >= 0"),  # every crash a full 2 TB dump
    ("CRASHREG_CAPTURE_WINDOW_DAYS", "0", "must be >= 1"),
    ("CRASHREG_CAPTURE_FULL_PER_WINDOW", "-3", "must be >= 0"),  # a new bug's first crashes skipped
    ("CRASHREG_CAPTURE_WINDOW_DAYS", "1000000", "must be at most 36,500"),  # every report a 500
    ("CRASHREG_RETENTION_LOG_DAYS", "1000000", "must be at most 36,500"),
    ("CRASHREG_RETENTION_DUMP_DAYS", "99999999999", "must be at most 36,500"),
    ("CRASHREG_ALERT_NEW_SIGNATURE_HOURS", "1e12", "must be at most 876,000"),
    ("CRASHREG_INGEST_LOCK_WAIT_S", "99999999999", "must be at most 86,400"),  # every connection refused
    ("CRASHREG_INGEST_LOCK_WAIT_S", "nan", "must be a finite number"),  # every engine a ValueError
    ("CRASHREG_INGEST_LOCK_WAIT_S", "1e400", "must be a finite number"),
])
def test_a_setting_no_operator_means_is_refused_at_start(name: str, value: str, refusal: str) -> None:
    with pytest.raises(ValueError, match=f"{name} {refusal}"):
        Settings.from_env({name: value})
    assert Settings.from_env({name: "36500" if "DAYS" in name else "5"})  # a century, or a few: fine


@pytest.mark.parametrize("url", ["postgresql+psycopg2://db/crashreg", "mysql://db/crashreg",
                                 "postgresql+asyncpg://db/crashreg", "oracle://db"])
def test_a_database_url_for_another_driver_is_one_line_naming_the_ones_crashreg_speaks(url: str) -> None:
    with pytest.raises(ValueError, match=r"CRASHREG_DATABASE_URL: crashreg speaks to PostgreSQL through "
                                         r"psycopg 3 .* not '" + url.partition(":")[0].replace("+", r"\+")):
        Settings.from_env({"CRASHREG_DATABASE_URL": url})


def test_other_docs_state_the_same_defaults() -> None:
    """Tables elsewhere in docs/ (jira.md's, contract.md's) repeat some variables: a
    default written as a value there is the same value (words may differ)."""
    canonical = {name: default for name, (_, default) in documented().items()}
    for path in sorted((ROOT / "docs").glob("*.md")):
        if path == CONFIGURATION:
            continue
        for line in path.read_text().splitlines():
            if row := ROW.match(line):
                name, default = row.group(1), row.group(2).strip()
                assert name in canonical, f"{path.name} documents {name}, docs/configuration.md does not"
                if any(re.fullmatch(r"`[^`]*`", cell) for cell in (default, canonical[name])):
                    assert default == canonical[name], f"{path.name}: {name} defaults to {default}"


def test_gunicorn_runs_sync_workers_unless_threads_are_asked_for(monkeypatch, tmp_path) -> None:
    default = gunicorn_settings({}, monkeypatch, tmp_path)
    assert default["worker_class"] == "sync" and default["threads"] == 1
    assert default["workers"] == multiprocessing.cpu_count() + 1
    threaded = gunicorn_settings({"CRASHREG_THREADS": "4"}, monkeypatch, tmp_path)
    assert threaded["worker_class"] == "gthread"
    assert threaded["worker_connections"] == 4  # no more clients than its threads serve
