"""Real userspace cores: small C and C++ programs (tests/support/data/cores/) compiled once per
session and crashed, each way twice, with `ulimit -c unlimited` in directories of the
session's own (the kernel writes `core` or `core.<pid>` into the crashing process's working
directory when core_pattern is a plain file name)."""

from __future__ import annotations

import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import DATA

SOURCES = DATA / "cores"
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
RUNS = 2
# mode -> what the program does (crashy.c's argument); the C++ program has one way to crash.
C_MODES = ("null", "strlen", "library", "qsort", "thread", "abort", "return-to-null",
           "misaligned-return", "sse", "handler", "misaligned-call")
FRAMELESS_MODES = ("null", "strlen", "library", "qsort", "thread", "abort")  # -O2: CFI only
CPP_MODE = "c++-terminate"


@dataclass(frozen=True)
class Crash:
    """One way to crash, run RUNS times: the program and each run's core."""

    mode: str
    program: Path
    cores: tuple[Path, ...]


def core_pattern_problem() -> str | None:
    """Why this host cannot give the tests cores (None: it can)."""
    try:
        pattern = CORE_PATTERN.read_text().strip()
    except OSError as error:
        return f"cannot read {CORE_PATTERN}: {error}"
    if pattern.startswith("|"):
        return f"core_pattern pipes cores to {pattern.split()[0][1:]}; the tests need a file pattern"
    if "/" in pattern:
        return f"core_pattern {pattern!r} writes cores outside the crashing process's directory"
    missing = [tool for tool in ("gcc", "g++") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not installed" if missing else None


def _unlimited_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def crash(program: Path, argument: str | None, directory: Path) -> Path:
    """Run `program` in `directory` until it dumps core; the core's path."""
    directory.mkdir(parents=True)
    done = subprocess.run([str(program), *([argument] if argument else [])], cwd=directory,
                          preexec_fn=_unlimited_cores, capture_output=True, timeout=60, check=False)
    cores = sorted(directory.glob("core*"))
    assert done.returncode < 0 and cores, f"{program.name} {argument}: exit {done.returncode}, no core"
    return cores[0]


def compile_programs(build: Path) -> dict[str, Path]:
    library = build / "libcrashy.so"
    commands = {
        "library": ["gcc", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", str(library),
                    str(SOURCES / "libcrashy.c")],
        "crashy": ["gcc", "-g", "-fno-omit-frame-pointer", "-o", str(build / "crashy"),
                   str(SOURCES / "crashy.c"), f"-L{build}", "-lcrashy", "-Wl,-rpath,$ORIGIN", "-pthread"],
        "crashy-O2": ["gcc", "-O2", "-g", "-o", str(build / "crashy-O2"), str(SOURCES / "crashy.c"),
                      f"-L{build}", "-lcrashy", "-Wl,-rpath,$ORIGIN", "-pthread"],
        "crashy-cc": ["g++", "-g", "-fno-omit-frame-pointer", "-o", str(build / "crashy-cc"),
                      str(SOURCES / "crashy.cc")],
    }
    subprocess.run(commands.pop("library"), check=True, capture_output=True, timeout=120)
    running = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
               for command in commands.values()]
    for process in running:
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output.decode()
    return {name: build / name for name in commands} | {"library": library}


@pytest.fixture(scope="session")
def crash_cores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Crash]:
    """mode -> Crash: every C mode (-O0, frame pointers), `<mode>-O2` (frameless, CFI only),
    and the C++ program's uncaught exception."""
    problem = core_pattern_problem()
    if problem:
        pytest.skip(problem)
    root = tmp_path_factory.mktemp("cores")
    programs = compile_programs(root)
    plan = [(mode, programs["crashy"], mode) for mode in C_MODES]
    plan += [(f"{mode}-O2", programs["crashy-O2"], mode) for mode in FRAMELESS_MODES]
    plan += [(CPP_MODE, programs["crashy-cc"], None)]
    return {name: Crash(name, program, tuple(crash(program, argument, root / name / f"run-{run}")
                                             for run in range(RUNS)))
            for name, program, argument in plan}
