"""The core_pattern handler on this host: how long from its start to the registry's answer?

    .venv/bin/python bench/core_pipe.py [--runs 12] [--json OUT]

This host's core_pattern stays `core`, so the kernel's part is played as tests/agents/
test_core_pipe.py plays it: a small C program (tests/support/data/cores/crashy.c, mode `null`)
crashes and dumps a real core, while its twin (tests/support/data/pipe/twin.c, LD_PRELOAD) is
held at the same fault; the built pyz, run by the system python3, gets the core through a pipe
and the twin's pid as %P. The registry is gunicorn (gunicorn.conf.py) on a fresh PostgreSQL
database. Each run is a new crash: the first three answers are `full` (the default budget), the
rest `skip`.

Reported from the handler's own log line: the time from its start (its start time in
/proc/self/stat, the moment the kernel would have forked it) to the answer, the bytes of the
core and of its memory read before the answer, and its peak memory (VmHWM); the medians and
extremes over the runs, for full and skip answers apart. Exit status 1 when the small-process
goal (median answer < 200 ms) is missed.
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
from bench.storm import create_database, drop_database, free_port, start_gunicorn  # noqa: E402
from registry.auth.tokens import create_token  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.migrate import upgrade  # noqa: E402

PYTHON = "/usr/bin/python3"  # a host's python3, not this virtualenv's
SOURCES = ROOT / "tests" / "support" / "data"
GOAL_MS = 200.0
SUMMARY = re.compile(
    r": (?P<action>\w+) by \w+ .*?read (?P<core>\d+) bytes of the core and (?P<memory>\d+) of its memory "
    r"before the answer, (?P<ms>\d+) ms after the kernel started the handler; .*peak memory (?P<kb>\d+) kB"
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
    ]
    for command in commands:
        subprocess.run(command, check=True, timeout=120)
    return {"crashy": work / "crashy", "twin": work / "twin.so", "pyz": build_reporter.build(work / "r.pyz")}


def unlimited_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def crash(built: dict[str, Path], directory: Path) -> tuple[Path, int]:
    """A real core of crashy's `null`, and the pid of its twin held at the same fault."""
    directory.mkdir()
    ready = directory / "twin.pid"
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(built["twin"]), "CRASHREG_TWIN_READY": str(ready)}
    subprocess.run(
        [str(built["crashy"]), "null"],
        cwd=directory,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=unlimited_cores,
        timeout=60,
        check=False,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the twin never reached its fault")
        time.sleep(0.01)
    return next(directory.glob("core*")), int(ready.read_text())


def handle(built: dict[str, Path], conf: Path, core: Path, pid: int) -> dict[str, Any]:
    values = [str(pid), str(pid), "11", str(int(time.time())), "0", "0", "0", "1", "bench", "!crashy"]
    with core.open("rb") as stdin:
        done = subprocess.run(
            [PYTHON, "-I", str(built["pyz"]), "--config", str(conf), "core", "--pipe", *values],
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
        "core_bytes": int(found["core"]),
        "memory_bytes": int(found["memory"]),
        "peak_kb": int(found["kb"]),
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
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
    finally:
        for pid in twins:
            os.kill(pid, signal.SIGKILL)
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        drop_database(url)
    print("| answer | runs | to the answer, ms: median (min-max) | core bytes read | memory bytes read "
          "| peak kB |")
    print("|---|---|---|---|---|---|")
    for action in ("full", "skip"):
        chosen = [r for r in runs if r["action"] == action]
        if chosen:
            print(
                f"| {action} | {len(chosen)} | {spread([r['answer_ms'] for r in chosen])} | "
                f"{spread([r['core_bytes'] for r in chosen])} | "
                f"{spread([r['memory_bytes'] for r in chosen])} | "
                f"{spread([r['peak_kb'] for r in chosen])} |"
            )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    return 0 if statistics.median(r["answer_ms"] for r in runs) < GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
