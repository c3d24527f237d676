"""One `crashreg` command imports what it needs, not every domain: the wiring every command reads
names the domains' blueprints, commands, collectors, listeners and jobs without importing them
(registry/core/wiring.py), and the `crashreg` group imports a command when it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.core.wiring import Wiring, load
from registry.domains import ENTRY_POINTS, wiring
from tests.support.cli import REPO

# Imported by a command that opens its database or runs the scheduler, never by its --help.
LIBRARIES = {"alembic", "apscheduler"}


def declared_modules(wired: Wiring) -> set[str]:
    """Every module the wiring names: each imports a domain's API, services or jobs."""
    targets = [*wired.blueprints, *wired.commands.values(), *wired.collectors, *wired.signatures.folded,
               *wired.signatures.events_moved, wired.engine, wired.symbolication,
               wired.symbolication_on_demand, wired.frame_names_on_demand]
    declared = {target.split(":")[0] for target in targets} | set(wired.job_modules)
    # less where the integrations register, which every command imports (sync.scheduler: its command)
    return declared - {entry.module for entry in entry_points(group=ENTRY_POINTS)}


def imported_by(*args: str) -> set[str]:
    """The modules a new interpreter holds once `crashreg ARGS` has run."""
    code = (
        "import json, sys\n"
        "from registry.cli import main\n"
        f"main({list(args)!r}, standalone_mode=False)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return set(json.loads(ran.stdout.splitlines()[-1]))


@pytest.mark.parametrize(("args", "own"), [
    (["tokens", "--help"], "registry.auth.commands"),
    (["jira", "--help"], "sync.jira.commands"),
    (["db", "current", "--help"], None),
])
def test_a_command_imports_no_other_domain(args: list[str], own: str | None) -> None:
    imported = imported_by(*args)
    others = declared_modules(wiring()) - {own}
    assert sorted(imported & (others | LIBRARIES)) == []
    assert own is None or own in imported


def test_a_command_outside_the_app_imports_no_flask() -> None:
    """The wiring reaches Flask only from the running app (app_engine, app_listeners)."""
    assert "flask" not in imported_by("db", "current", "--help")


def test_help_lists_every_wired_command_under_the_name_it_is_declared_by() -> None:
    helped = CliRunner().invoke(main, ["--help"])
    assert helped.exit_code == 0, helped.output
    listed = {line.split()[0] for line in helped.output.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == {*wiring().commands, "db", "serve"}
    assert {name: load(target).name for name, target in wiring().commands.items()} == {
        name: name for name in wiring().commands}
