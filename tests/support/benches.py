"""The benches as modules: bench/ is a folder of scripts, not a package, so tests load them by
path (the figures' code and the tests that hold it to its word are then one code)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


@functools.cache
def load(name: str) -> ModuleType:
    """bench/<name>.py, imported once as `bench_<name>`."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
