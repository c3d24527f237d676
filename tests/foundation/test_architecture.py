"""The import graph points one way, and pure logic stays free of Flask and SQLAlchemy.

ALLOWED states which domains each domain imports; every import between registry's domain
packages, sync/ and dashboards/ must be in it, every edge in it must be used by an import, and
the table itself has no cycle."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents import build_reporter

ROOT = Path(__file__).resolve().parents[2]
# Pure packages and modules: plain functions over plain data, reusable by the reporters.
PURE = [
    "registry/fingerprint",
    "registry/core/attributes.py",
    "registry/epidemiology/exact.py",
    "registry/epidemiology/attributes.py",
    "registry/epidemiology/findings.py",
    "registry/epidemiology/verdict.py",
    "registry/epidemiology/onset.py",
    "registry/epidemiology/uptime.py",
    "registry/epidemiology/suspects.py",
    "registry/epidemiology/mixture.py",
    "registry/epidemiology/narrative.py",
    "registry/epidemiology/analysis.py",
    "registry/epidemiology/process.py",
    "registry/demo/simulator.py",
    "registry/capture/policy.py",
    "registry/storage/parts.py",
    "registry/symbols/elf.py",
    "registry/symbolication/stack.py",
    "registry/symbols/misses.py",
    "registry/rca/checks.py",
    "registry/retention/policy.py",
    "registry/retention/trim.py",
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


def absolute_imports(path: Path, package: str) -> set[str]:
    """Every module a file imports, relative imports resolved against its package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module or "")
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level <= len(parts) else ["<beyond>"]
            names.add(".".join([*base, node.module] if node.module else base))
    return names - {"__future__"}


def foreign(modules: set[str], own: str) -> list[str]:
    """What is neither the standard library nor inside `own`."""
    return sorted(m for m in modules if m.split(".")[0] not in sys.stdlib_module_names
                  and m != own and not m.startswith(own + "."))


def test_the_engine_imports_only_the_standard_library_and_itself() -> None:
    """The reporter zipapp carries registry/fingerprint alone onto hosts with only python3."""
    engine = ROOT / "registry" / "fingerprint"
    offenders = {}
    for path in sorted(engine.rglob("*.py")):
        package = ".".join(path.parent.relative_to(ROOT).parts)
        if found := foreign(absolute_imports(path, package), "registry.fingerprint"):
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_the_reporter_imports_the_standard_library_and_the_engine_only() -> None:
    """The reporter and the agent packages zipped with it: the standard library, the engine,
    each other (build_reporter.AGENT_PACKAGES) and nothing else."""
    ours = {"registry.fingerprint", "crashreg_report", *build_reporter.AGENT_PACKAGES}
    files = [(ROOT / "agents" / "crashreg_report.py", "")]
    for name in build_reporter.AGENT_PACKAGES:  # relative imports resolve as the pyz names them
        files += [(path, ".".join(path.parent.relative_to(ROOT / "agents").parts))
                  for path in sorted((ROOT / "agents" / name).rglob("*.py"))]
    offenders = {}
    for path, package in files:
        found = [m for m in foreign(absolute_imports(path, package), "registry.fingerprint")
                 if m.split(".")[0] not in ours]
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_the_registry_package_marker_imports_nothing() -> None:
    """The zipapp holds registry/__init__.py: an import there would pull the registry onto hosts."""
    tree = ast.parse((ROOT / "registry" / "__init__.py").read_text())
    assert [ast.dump(n) for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] == []


# Modules every domain may use; they import no domain (registry/__init__.py is the marker).
PLATFORM = frozenset({
    "__init__", "bounds", "cli_support", "config", "db", "direct", "errors", "ids", "metrics", "migrate",
    "openapi", "operations", "outbox", "requests", "schema_loader", "upsert", "web",
})
# The application level: it puts the domains together (app factory, CLI, wiring, and the demo
# package: its simulated fleet, its feed and `crashreg demo`, which serves the whole app).
APPLICATION = frozenset({"__main__", "app", "cli", "demo", "domains", "models", "wsgi"})
DOMAINS = frozenset({
    "auth", "capture", "core", "epidemiology", "fingerprint", "grafana", "ingest", "inventory",
    "jira", "pages", "rca", "retention", "signatures", "storage", "symbols", "symbolication",
})
# domain -> the domains it imports (the platform: always). core holds the records every domain
# shares; cross-domain writes go through listeners the wiring gives (registry/core/wiring.py).
# Every edge is one some import uses (test below): the table is the README's picture.
ALLOWED: dict[str, frozenset[str]] = {
    "platform": frozenset(),
    "fingerprint": frozenset(),  # the standard library only (test below)
    "core": frozenset(),
    "auth": frozenset({"core"}),
    "grafana": frozenset({"core"}),
    "inventory": frozenset({"core", "auth"}),
    "signatures": frozenset({"core", "fingerprint", "auth"}),
    "capture": frozenset({"core", "signatures", "auth"}),
    "jira": frozenset({"core", "auth"}),
    "epidemiology": frozenset({"core", "signatures", "auth"}),
    "rca": frozenset({"core", "signatures", "capture", "storage", "epidemiology", "jira", "auth"}),
    "ingest": frozenset({"core", "fingerprint", "signatures", "capture", "symbolication", "auth"}),
    "storage": frozenset({"core", "capture", "auth"}),
    "symbols": frozenset({"core", "storage", "auth"}),
    "symbolication": frozenset({"core", "fingerprint", "signatures", "symbols"}),
    "retention": frozenset({"core", "fingerprint", "capture", "rca", "storage", "symbols", "auth"}),
    "pages": frozenset({"core", "fingerprint", "signatures", "capture", "epidemiology", "rca", "retention",
                        "ingest", "storage", "auth"}),
    "application": DOMAINS - {"fingerprint"},
    "dashboards": frozenset(),
    "sync": frozenset({"application", "dashboards", "core", "signatures", "capture", "epidemiology", "rca",
                       "jira", "grafana", "retention", "storage", "symbolication"}),
}


def unit(module: str) -> str | None:
    """The row of ALLOWED a module belongs to (None: not ours: the standard library, a package)."""
    parts = module.split(".")
    if parts[0] in ("sync", "dashboards"):
        return parts[0]
    if parts[0] != "registry":
        return None
    name = parts[1] if len(parts) > 1 else "__init__"
    if name in DOMAINS:
        return name
    if name in APPLICATION:
        return "application"
    if name in PLATFORM:
        return "platform"
    return f"unclassified: registry.{name}"


def imported_units(path: Path) -> set[str]:
    """The ALLOWED rows a file imports from (`from registry import x` counts as registry.x)."""
    package = ".".join(path.parent.relative_to(ROOT).parts)
    tree = ast.parse(path.read_text(), filename=str(path))
    modules = absolute_imports(path, package)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "registry":
            here = ROOT / "registry"
            modules |= {f"registry.{a.name}" for a in node.names
                        if (here / a.name).is_dir() or (here / f"{a.name}.py").exists()}
    return {u for m in modules if (u := unit(m)) is not None}


def rows_imported() -> Iterator[tuple[str, str, set[str]]]:
    """Each file of registry/, sync/ and dashboards/: its path, its row of ALLOWED, the other
    rows it imports."""
    for path in python_files("registry", "sync", "dashboards"):
        own = unit(".".join(path.with_suffix("").relative_to(ROOT).parts))
        assert own is not None and not own.startswith("unclassified"), f"{path}: add it to a row of ALLOWED"
        yield str(path.relative_to(ROOT)), own, imported_units(path) - {own}


def test_every_import_between_domains_is_allowed() -> None:
    offenders: dict[str, list[str]] = {}
    for path, own, imported in rows_imported():
        allowed = ALLOWED[own] | ({"platform"} if own != "fingerprint" else set())
        if found := sorted(imported - allowed):
            offenders[path] = found
    assert offenders == {}


def test_every_allowed_import_is_used() -> None:
    """An edge no import uses is a promise the code does not keep: the picture in README.md
    and docs/architecture.md would draw a dependency that is not there."""
    used: dict[str, set[str]] = {}
    for _, own, imported in rows_imported():
        used.setdefault(own, set()).update(imported)
    unused = [f"{own} -> {target}" for own, targets in sorted(ALLOWED.items())
              for target in sorted(targets - used.get(own, set()))]
    assert unused == [], (
        f"ALLOWED lists edges no import uses: {', '.join(unused)}. Remove them from ALLOWED here "
        "and from the pictures in README.md and docs/architecture.md.")


def test_the_allowed_imports_have_no_cycle() -> None:
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"cycle: {' -> '.join((*path, node))}"
        if node in done:
            return
        for target in sorted(ALLOWED.get(node, frozenset()) - {node}):
            visit(target, (*path, node))
        done.add(node)

    for node in sorted(ALLOWED):
        visit(node, ())
