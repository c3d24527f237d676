"""tests/ mirrors the packages, and what tests share lives in tests/support (and tests/emulators).

A test module never imports another test module: builders, helpers and data go to tests/support,
the Jira and Grafana emulators to tests/emulators, fixtures to a conftest.py. The crash lab
(tests/lab) keeps its own QEMU harness beside its tests. bench/ imports nothing of tests/: what
both need is in testkit/, which the product never imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SHARED = ("tests.support", "tests.emulators")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module `path` imports or names as a pytest plugin, relative imports resolved."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    return imports_of(path.read_text(encoding="utf-8"), package)


def imports_of(source: str, package: list[str]) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module != "tests":
                names.add(module)
            # `from . import x`, `from tests import x`: x may be a module of the package
            names.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytest_plugins" for target in node.targets
        ):
            names.update(ast.literal_eval(node.value))
    return names


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def sources() -> list[Path]:
    return [p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts]


def python_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]


def test_test_modules_import_only_support_and_emulators() -> None:
    wrong = []
    for path in sources():
        allowed = (*SHARED, "tests.lab") if within(module_name(path), "tests.lab") else SHARED
        for name in sorted(imported(path)):
            if within(name, "tests") and name != "tests" and not any(within(name, a) for a in allowed):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "move what is shared into tests/support:\n" + "\n".join(wrong)


def test_bench_and_testkit_import_nothing_of_tests() -> None:
    """A bench runs from a checkout without the suite's conftest; what it shares with the tests
    lives in testkit/."""
    wrong = [f"{path.relative_to(ROOT)} imports {name}" for path in python_files("bench", "testkit")
             for name in sorted(imported(path)) if within(name, "tests")]
    assert not wrong, "move what bench/ and tests/ share into testkit/:\n" + "\n".join(wrong)


def test_the_product_imports_no_test_code() -> None:
    product = python_files("registry", "sync", "dashboards", "agents", "migrations")
    wrong = [f"{path.relative_to(ROOT)} imports {name}" for path in product for name in sorted(imported(path))
             if any(within(name, top) for top in ("tests", "testkit", "bench"))]
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_relative_imports_names_and_plugins() -> None:
    source = (
        "from .harness import Harness\nfrom .. import conftest\nimport tests.pages.support\n"
        "from tests import reports\npytest_plugins = ['tests.grafana.conftest']\n"
    )
    names = imports_of(source, ["tests", "jira_sync"])
    assert {"tests.jira_sync.harness", "tests.conftest", "tests.pages.support", "tests.reports",
            "tests.grafana.conftest"} <= names


def test_folders_mirror_the_packages() -> None:
    for top in ("registry", "sync"):
        folders = {p.name for p in (TESTS / top).iterdir() if p.is_dir() and p.name != "__pycache__"}
        packages = {p.parent.name for p in (ROOT / top).glob("*/__init__.py")}
        assert folders <= packages, f"tests/{top}/ folders with no {top}/ package: {folders - packages}"
