"""The core_pattern handler on this host: how long from its start to the registry's answer?

    .venv/bin/python bench/core_pipe.py [--runs 12] [--large-mib 1024] [--json OUT]

This host's core_pattern stays `core`, so the kernel's part is played as tests/agents/
test_core_pipe.py plays it: a small C program (tests/support/data/cores/crashy.c, mode `null`)
crashes and dumps a real core, while its twin (tests/support/data/pipe/twin.c, LD_PRELOAD) is
held at the same fault; the built pyz, run by the system python3, gets the core through a pipe
and the twin's pid as %P. The registry is gunicorn (gunicorn.conf.py) on a fresh PostgreSQL
database whose capture budget is 0 full cores a week: every answer is `skip`, the answer the
goals are about (the time to the answer does not depend on it). Each run is a new crash. Then
one process with `--large-mib` MiB of touched memory (tests/support/data/pipe/touch.c, the
crash lab's large process; its twin holds as much, and its core is that large on disk).

Reported from the handler's own log line: the time from its start (its start time in
/proc/self/stat, the moment the kernel would have forked it) to the answer, split into start-up
(python3 and the imports), reading (the head, the unwind from /proc, the report) and the
report's round trip to the registry; the CPU time it took to the answer (user + system, less
noisy than wall time on a shared host); the bytes of the core and of its memory read before
the answer; its peak memory (VmHWM). Medians and extremes over the runs, per answer. The
baseline, measured in the same run: a bare `python3 -IS -c pass` (the core_pattern line's
interpreter and flags), its wall and CPU time. Exit
status 1 when a goal is missed (median answer < 200 ms small, < 500 ms large).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents import build_reporter  # noqa: E402
from agents.coredump.pipe import CORE_PATTERN  # noqa: E402
from bench.storm import create_database, drop_database, free_port, start_gunicorn  # noqa: E402
from registry.auth.tokens import create_token  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.migrate import upgrade  # noqa: E402

INTERPRETER = CORE_PATTERN[1:].split()[:2]  # a host's python3 and its flags, as the core_pattern line runs it
SOURCES = ROOT / "tests" / "support" / "data"
GOALS_MS = {"small": 200.0, "large": 500.0}
SUMMARY = re.compile(
    r": (?P<action>\w+) by \w+ .*?read (?P<core>\d+) bytes of the core and (?P<memory>\d+) of its memory "
    r"before the answer, (?P<ms>\d+) ms after the kernel started the handler \(start-up (?P<startup>\d+) ms, "
    r"reading (?P<reading>\d+) ms, round trip (?P<trip>\d+) ms; CPU (?P<cpu>\d+) ms, (?P<startup_cpu>\d+) of "
    r"them start-up\); .*peak memory (?P<kb>\d+) kB"
)


def build(work: Path) -> dict[str, Path]:
    cores = SOURCES / "cores"
    commands = [
        [
            "gcc",
            "-g",
            "-fno-omit-frame-pointer",
            "-shared",
            "-fPIC",
            "-o",
            str(work / "libcrashy.so"),
            str(cores / "libcrashy.c"),
        ],
        [
            "gcc",
            "-g",
            "-fno-omit-frame-pointer",
            "-o",
            str(work / "crashy"),
            str(cores / "crashy.c"),
            f"-L{work}",
            "-lcrashy",
            "-Wl,-rpath,$ORIGIN",
            "-pthread",
        ],
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(work / "twin.so"), str(SOURCES / "pipe" / "twin.c")],
        ["gcc", "-g", "-fno-omit-frame-pointer", "-o", str(work / "touch"),
         str(SOURCES / "pipe" / "touch.c")],
    ]
    for command in commands:
        subprocess.run(command, check=True, timeout=120)
    return {"crashy": work / "crashy", "touch": work / "touch", "twin": work / "twin.so",
            "pyz": build_reporter.build(work / "r.pyz")}


def unlimited_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def crash(built: dict[str, Path], directory: Path,
          command: tuple[str, ...] = ("crashy", "null")) -> tuple[Path, int]:
    """A real core of the built program `command[0]` run with the rest, and the pid of its twin
    held at the same fault."""
    directory.mkdir()
    ready = directory / "twin.pid"
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(built["twin"]), "CRASHREG_TWIN_READY": str(ready)}
    subprocess.run(
        [str(built[command[0]]), *command[1:]],
        cwd=directory,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=unlimited_cores,
        timeout=600,
        check=False,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the twin never reached its fault")
        time.sleep(0.01)
    # The kernel writes this core to disk here (a pipe handler would get it on stdin instead):
    # let it reach the disk first, or the registry's database commits queue behind it.
    os.sync()
    return next(directory.glob("core*")), int(ready.read_text())


def handle(built: dict[str, Path], conf: Path, core: Path, pid: int) -> dict[str, Any]:
    values = [str(pid), str(pid), "11", str(int(time.time())), "0", "0", "0", "1", "bench", "!crashy"]
    with core.open("rb") as stdin:
        done = subprocess.run(
            [*INTERPRETER, str(built["pyz"]), "--config", str(conf), "core", "--pipe", *values],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    found = SUMMARY.search(done.stderr)
    if not found:
        raise RuntimeError(f"no summary line from the handler:\n{done.stderr}")
    return {
        "action": found["action"],
        "answer_ms": int(found["ms"]),
        "startup_ms": int(found["startup"]),
        "reading_ms": int(found["reading"]),
        "trip_ms": int(found["trip"]),
        "cpu_ms": int(found["cpu"]),
        "startup_cpu_ms": int(found["startup_cpu"]),
        "core_bytes": int(found["core"]),
        "core_size": core.stat().st_size,
        "memory_bytes": int(found["memory"]),
        "peak_kb": int(found["kb"]),
    }


def bare_python(runs: int) -> dict[str, float]:
    """The baseline: a bare python3 as the line runs it, `-c pass`: wall and CPU (ms), medians."""
    walls, cpus = [], []
    for _ in range(runs):
        started = time.monotonic()
        child = subprocess.Popen([*INTERPRETER, "-c", "pass"])
        _, _, usage = os.wait4(child.pid, 0)
        walls.append((time.monotonic() - started) * 1000)
        cpus.append((usage.ru_utime + usage.ru_stime) * 1000)
    return {"wall_ms": statistics.median(walls), "cpu_ms": statistics.median(cpus)}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def table(groups: dict[str, list[dict[str, Any]]], bare: dict[str, float]) -> list[str]:
    """One row per group of runs: the stages, the CPU (and its ratio to a bare python3), bytes."""
    lines = [
        "| runs | answer | to the answer, ms | start-up | reading | round trip | CPU ms (x bare python3) "
        "| core bytes read (of) | memory bytes read | peak kB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in groups.items():
        if not runs:
            continue
        cpu = statistics.median(r["cpu_ms"] for r in runs)
        actions = "/".join(sorted({r["action"] for r in runs}))
        lines.append(
            f"| {name}: {len(runs)} | {actions} | {spread([r['answer_ms'] for r in runs])} | "
            f"{spread([r['startup_ms'] for r in runs])} | {spread([r['reading_ms'] for r in runs])} | "
            f"{spread([r['trip_ms'] for r in runs])} | {spread([r['cpu_ms'] for r in runs])} "
            f"({cpu / bare['cpu_ms']:.1f}x) | {spread([r['core_bytes'] for r in runs])} "
            f"({max(r['core_size'] for r in runs):,}) | {spread([r['memory_bytes'] for r in runs])} | "
            f"{spread([r['peak_kb'] for r in runs])} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--large-mib", type=int, default=1024, help="the large process's memory; 0: none")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    url = create_database()
    twins: list[int] = []
    server = None
    try:
        upgrade(url)
        database = Database(url)
        with database.session() as session:
            token, _ = create_token(session, "bench-core-pipe", "report", "agent")
        database.dispose()
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="crashreg-core-pipe-") as name:
            work = Path(name)
            os.environ["CRASHREG_WORKERS"] = "2"  # gunicorn.conf.py reads it; start_gunicorn waits for them
            os.environ["CRASHREG_CAPTURE_FULL_PER_WINDOW"] = "0"  # every answer a skip
            server = start_gunicorn(url, port, work / "gunicorn.log", workers=2)
            built = build(work)
            (work / "token").write_text(token)
            conf = work / "reporter.conf"
            conf.write_text(
                f'CRASHREG_URL="http://127.0.0.1:{port}"\nCRASHREG_TOKEN_FILE="{work / "token"}"\n'
                f'CRASHREG_SPOOL_DIR="{work / "spool"}"\nCRASHREG_CORE_DIR="{work / "cores"}"\n'
            )
            runs = []
            for run in range(args.runs):
                core, pid = crash(built, work / f"run-{run}")
                twins.append(pid)
                runs.append(handle(built, conf, core, pid))
            large = []
            if args.large_mib:
                core, pid = crash(built, work / "large", ("touch", str(args.large_mib)))
                twins.append(pid)
                large.append(handle(built, conf, core, pid))
                core.unlink()
            bare = bare_python(args.runs)
    finally:
        for pid in twins:
            os.kill(pid, signal.SIGKILL)
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        drop_database(url)
    groups = {"small process": runs, f"{args.large_mib} MiB touched": large}
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"load average {load}; bare {' '.join(INTERPRETER)} -c pass: {bare['wall_ms']:.0f} ms wall, "
          f"{bare['cpu_ms']:.0f} ms CPU (medians of {args.runs})")
    print("\n".join(table(groups, bare)))
    met = True
    for goal, chosen in (("small", runs), ("large", large)):
        if chosen:
            answer = statistics.median(r["answer_ms"] for r in chosen)
            met &= answer < GOALS_MS[goal]
            print(f"goal {goal}: median {answer:.0f} ms to the answer, goal < {GOALS_MS[goal]:.0f} ms: "
                  f"{'pass' if answer < GOALS_MS[goal] else 'fail'}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "large": large, "bare": bare}, indent=1))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
