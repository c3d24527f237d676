"""The import graph points one way, and pure logic stays free of Flask and SQLAlchemy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Pure packages and modules: plain functions over plain data, reusable by the reporters.
PURE = [
    "registry/fingerprint",
    "registry/inventory/attributes.py",
    "registry/epidemiology/exact.py",
    "registry/epidemiology/attributes.py",
    "registry/epidemiology/findings.py",
    "registry/epidemiology/verdict.py",
    "registry/epidemiology/onset.py",
    "registry/epidemiology/uptime.py",
    "registry/epidemiology/suspects.py",
    "registry/capture/policy.py",
    "registry/rca/checks.py",
    "registry/signatures/regression.py",
    "registry/pages/charts.py",
    "registry/pages/console.py",
    "registry/pages/verdict.py",
]
FRAMEWORKS = ("flask", "sqlalchemy", "marshmallow", "werkzeug", "alembic")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def python_files(*parts: str) -> list[Path]:
    files: list[Path] = []
    for part in parts:
        target = ROOT / part
        files += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    return files


@pytest.mark.parametrize("package", ["registry", "dashboards"])
def test_registry_and_dashboards_never_import_sync(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "sync")
        for path in python_files(package)
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_pure_logic_imports_no_framework() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            m for m in imported_modules(path) if m.split(".")[0] in FRAMEWORKS
        )
        for path in python_files(*PURE)
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}
