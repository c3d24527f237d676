"""The shared vectors pin the algorithm; the inlined reporter reproduces them byte for byte."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType

import pytest

from agents import build_reporter
from registry.fingerprint import ALGORITHM_VERSION, analyse_report
from tests.fingerprint.make_vectors import VECTORS, inputs

DATA = json.loads(VECTORS.read_text())


def test_vectors_are_for_this_algorithm_version_and_cover_every_input() -> None:
    assert DATA["algorithm_version"] == ALGORITHM_VERSION, "regenerate: make_vectors"
    assert [v["name"] for v in DATA["vectors"]] == [c["name"] for c in inputs()]


@pytest.mark.parametrize("vector", DATA["vectors"], ids=lambda v: v["name"])
def test_the_engine_reproduces_each_vector(vector: dict) -> None:
    signature = analyse_report(vector["console_log"], vector["stack"])
    assert (signature.fingerprint if signature else None) == vector["fingerprint"]
    assert (signature.title if signature else None) == vector["title"]


def load_reporter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crashreg_report_build",
                                                  build_reporter.REPORTER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_the_committed_reporter_inlines_the_current_engine() -> None:
    current = build_reporter.REPORTER.read_text()
    assert build_reporter.render(current) == current, "run agents/build_reporter.py"


def test_the_inlined_reporter_reproduces_each_vector() -> None:
    reporter = load_reporter()
    for vector in DATA["vectors"]:
        signature = reporter.analyse_report(vector["console_log"], vector["stack"])
        assert (signature.fingerprint if signature else None) == vector["fingerprint"], \
            vector["name"]


def test_the_build_refuses_name_clashes_and_foreign_imports(tmp_path, monkeypatch) -> None:
    clash = build_reporter.render(build_reporter.REPORTER.read_text()).replace(
        build_reporter.END, f"{build_reporter.END}\nALGORITHM_VERSION = 0")
    with pytest.raises(build_reporter.BuildError, match="clashes"):
        build_reporter.render(clash)
    engine = tmp_path / "engine"
    engine.mkdir()
    for name in build_reporter.MODULES:
        (engine / f"{name}.py").write_text("import requests\n" if name == "frames" else "")
    monkeypatch.setattr(build_reporter, "ENGINE", engine)
    with pytest.raises(build_reporter.BuildError, match="standard library"):
        build_reporter.render(build_reporter.REPORTER.read_text())
