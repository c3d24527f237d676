"""The server's wheel (what `pip install .` installs, in the image too) carries the server:
registry/, sync/, dashboards/ and the migrations, and no agent (issue 42)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = {"registry", "sync", "dashboards", "migrations"}
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "__pycache__", "build", "dist", "*.egg-info", ".*_cache",
                                    ".hypothesis", "crashreg-dumps", "*.db")


def test_the_server_wheel_ships_no_agent(tmp_path: Path) -> None:
    """Built by pip from a copy of this tree (the build writes into the tree it builds): its
    top-level packages are the server's; the demo carries its stored stacks, not its cores."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCE)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir",
                            str(tmp_path / "dist"), str(tree)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("crashreg-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert packages == SERVER
    assert not [name for name in names if "agents" in name.split("/")[:-1]]
    cores = sorted(name for name in names if name.startswith("registry/demo/cores/"))
    assert cores == ["registry/demo/cores/stacks.json"]
