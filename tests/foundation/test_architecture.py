"""The import graph points one way, and pure logic stays free of Flask and SQLAlchemy.

ALLOWED states which domains each domain imports; every import between registry's domain
packages, sync/ and dashboards/ must be in it, every edge in it must be used by an import, and
the table itself has no cycle. An import is any way a module is reached: at the top, in a
function, by importlib, or named in a string (a wiring Target). The server (registry/, sync/,
dashboards/) imports no agent."""

from __future__ import annotations

import ast
import re
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
    return module_imports(ast.parse(path.read_text(), filename=str(path)), package)


def module_imports(tree: ast.AST, package: str) -> set[str]:
    """Every module a module of `package` imports, at any depth, relative imports resolved."""
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


def agent_files() -> list[tuple[Path, str]]:
    """The files the pyz carries from agents/, each with its package as the pyz names it."""
    files = [(ROOT / "agents" / "crashreg_report.py", "agents")]
    for name in build_reporter.AGENT_PACKAGES:
        files += [(path, ".".join(path.parent.relative_to(ROOT).parts))
                  for path in sorted((ROOT / "agents" / name).rglob("*.py"))]
    return files


# What one agent imports beyond the standard library, where it runs (inside the functions that
# need it): the DPU agent's drgn, on the DPU.
OPTIONAL = {"agents.dpu": ("drgn",)}


def test_the_reporter_imports_the_standard_library_and_the_engine_only() -> None:
    """The reporter and the agent packages zipped with it: the standard library, the engine,
    each other (build_reporter.AGENT_PACKAGES) and nothing else."""
    ours = ("registry.fingerprint", "agents.crashreg_report",
            *(f"agents.{name}" for name in build_reporter.AGENT_PACKAGES))
    offenders = {}
    for path, package in agent_files():
        allowed = (*ours, *OPTIONAL.get(package, ()))
        found = [m for m in foreign(absolute_imports(path, package), "registry.fingerprint")
                 if not any(m == own or m.startswith(own + ".") for own in allowed)]
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


# The agents' packages in import order: each imports only those before it (the toolkit first,
# the commands last), so there is no circle, and nothing imports the command file.
AGENT_LAYERS = ("reporter", ("kernellog", "coredump", "dpu"), "crashreg_report")


def test_the_agents_import_the_toolkit_and_never_the_commands() -> None:
    layer_of = {}
    for number, layer in enumerate(AGENT_LAYERS):
        for name in (layer,) if isinstance(layer, str) else layer:
            layer_of[name] = number
    assert set(layer_of) - {"crashreg_report"} == set(build_reporter.AGENT_PACKAGES)
    offenders = {}
    for path, package in agent_files():
        own = package.split(".")[1] if "." in package else "crashreg_report"
        edges = {m.split(".")[1] for m in absolute_imports(path, package) if m.startswith("agents.")}
        wrong = sorted(e for e in edges - {own} if layer_of.get(e, len(AGENT_LAYERS)) >= layer_of[own])
        if wrong:
            offenders[str(path.relative_to(ROOT))] = wrong
    assert offenders == {}
    surgery = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "agents").rglob("*.py"))
               if re.search(r"sys\.path *(\[|=|\.(insert|append|extend))", path.read_text())]
    assert surgery == []


def test_the_registry_package_marker_imports_nothing() -> None:
    """The zipapp holds registry/__init__.py: an import there would pull the registry onto hosts."""
    tree = ast.parse((ROOT / "registry" / "__init__.py").read_text())
    assert [ast.dump(n) for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] == []


# Modules every domain may use; they import no domain (registry/__init__.py is the marker).
PLATFORM = frozenset({
    "__init__", "bounds", "build_ids", "cli_support", "config", "db", "direct", "dump_encodings", "errors",
    "ids", "metrics", "migrate", "openapi", "operations", "outbox", "partitions", "replica", "requests",
    "schema_loader", "upsert", "web",
})
# The application level: it puts the domains together (app factory, CLI, wiring, and the demo
# package: its simulated fleet, its feed and `crashreg demo`, which serves the whole app).
APPLICATION = frozenset({"__main__", "app", "cli", "demo", "domains", "models", "wsgi"})
DOMAINS = frozenset({
    "auth", "capture", "core", "epidemiology", "fingerprint", "grafana", "ingest", "inventory",
    "jira", "pages", "rca", "retention", "rollups", "signatures", "storage", "symbols", "symbolication",
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
    "ingest": frozenset({"core", "fingerprint", "signatures", "capture", "storage", "symbolication", "auth"}),
    "storage": frozenset({"core", "capture", "auth"}),
    "symbols": frozenset({"core", "storage", "auth"}),
    "symbolication": frozenset({"core", "fingerprint", "signatures", "symbols"}),
    "retention": frozenset({"core", "fingerprint", "capture", "rca", "storage", "symbols", "auth"}),
    "rollups": frozenset({"core"}),
    "pages": frozenset({"core", "fingerprint", "signatures", "capture", "epidemiology", "rca", "retention",
                        "ingest", "storage", "rollups", "auth"}),
    "application": DOMAINS - {"fingerprint"},
    "dashboards": frozenset(),
    "sync": frozenset({"application", "dashboards", "core", "signatures", "capture", "epidemiology", "rca",
                       "jira", "grafana", "retention", "rollups", "storage", "symbolication"}),
}


def unit(module: str) -> str | None:
    """The row of ALLOWED a module belongs to (None: not ours: the standard library, a package)."""
    parts = module.split(".")
    if parts[0] in ("sync", "dashboards", "agents"):
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


# A module named in a string: a wiring Target ("package.module:attribute") or a module the
# wiring lists, importlib.import_module or __import__ loads ("registry.auth.models").
NAMED_MODULE = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.\w+)+|[A-Za-z_]\w*(?=:))(?::[\w.]+)?")


def ours(module: str) -> bool:
    """A module of this tree (a package or a file of it)."""
    path = ROOT.joinpath(*module.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


IMPORTERS = ("import_module", "__import__")  # importlib's and the builtin: any string they take


def named_modules(tree: ast.AST) -> set[str]:
    """Modules of this tree a string names (imported when the string is loaded: an arrow like
    any import), and whatever importlib.import_module or __import__ is given."""
    nodes = list(ast.walk(tree))
    strings = {node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    loaded = {node.args[0].value for node in nodes
              if isinstance(node, ast.Call) and called(node) in IMPORTERS and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}
    return loaded | {match["module"] for text in strings
                     if (match := NAMED_MODULE.fullmatch(text)) and ours(match["module"])}


def called(call: ast.Call) -> str:
    """The name a call calls: `f(...)` and `x.f(...)` both call f."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def imported_units(path: Path) -> set[str]:
    """The ALLOWED rows a file imports from."""
    package = ".".join(path.parent.relative_to(ROOT).parts)
    return units_of(ast.parse(path.read_text(), filename=str(path)), package)


def units_of(tree: ast.AST, package: str) -> set[str]:
    """The ALLOWED rows a module of `package` imports from: its imports at any depth (a
    function's too), `from registry import x` as registry.x, and the modules its strings name
    (named_modules)."""
    modules = module_imports(tree, package) | named_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in ("registry", "agents"):
            here = ROOT / node.module
            modules |= {f"{node.module}.{a.name}" for a in node.names
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


def test_the_server_never_imports_an_agent() -> None:
    """registry/, sync/ and dashboards/ are the server (its wheel, its image: they carry no
    agent). An agent is a program of the hosts: the server runs it, never imports it (the demo
    reads the stacks the core reader stored, registry/demo/labelled_cores.py)."""
    assert sorted(path for path, _, imported in rows_imported() if "agents" in imported) == []


@pytest.mark.parametrize("source", [
    "import agents.coredump",
    "from agents.coredump.report import userspace_report",
    "from agents import coredump",
    "def read():\n    from agents.coredump import core_file_analysis\n",
    "class Demo:\n    def read(self):\n        import agents\n",
    "import importlib\nimportlib.import_module('agents.coredump')",
    "from importlib import import_module\nimport_module('agents')",
    "__import__('agents.coredump.report')",
    "TARGET = 'agents.coredump.report:userspace_report'  # a wiring Target",
    "MODULES = ['agents.coredump.report']  # a module the wiring lists",
])
def test_every_form_of_an_import_is_an_arrow(source: str) -> None:
    """The table sees an arrow however the module is reached: at the top, in a function, by
    importlib or __import__, or named in a string the wiring loads."""
    assert "agents" in units_of(ast.parse(source), "registry.demo")


def test_the_architecture_doc_draws_the_table() -> None:
    """docs/architecture.md's table of domains is ALLOWED: every domain (but the core and the
    engine, layers of their own there) in one row, with the domains it may import."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc[doc.index("| domain | may import |"):].split("\n\n")[0].splitlines()[2:]
    drawn = {}
    for row in table:
        domains, imports = (cell.strip() for cell in row.strip("|").split("|"))
        may = frozenset(name.strip() for name in imports.split(","))
        drawn |= {domain.strip(): may for domain in domains.split(",")}
    assert drawn == {domain: ALLOWED[domain] for domain in DOMAINS - {"core", "fingerprint"}}
