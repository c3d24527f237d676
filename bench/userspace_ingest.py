"""CPU a userspace report costs ingest in-process on PostgreSQL: a process's crash with many frames.

    cd TREE && /work/main/.venv/bin/python /work/main/bench/userspace_ingest.py [--reports 1200]

The code measured is the tree it runs in (its registry/), so one command compares commits, as
bench/ingest_cpu.py does. One bug of a service crashing on many hosts: each report's stack has
30 frames in the crashing thread and 16 in each of 4 other threads, across 6 libraries whose
build-ids the registry has no symbols for (each report notes them as misses, as a vendor's
library without debug info is noted on every crash). The reports go straight to the registry's
WSGI app (Flask's test environ, no gunicorn) on a fresh PostgreSQL database. Printed per
report: this process's CPU (validation, the engine, symbolication, the driver) and PostgreSQL's
backends' CPU, then the report's validation alone: the compiled loader against `schema.load`.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

TREE = Path.cwd()
sys.path[:0] = [str(TREE), str(TREE / "bench")]

import ingest_cpu  # noqa: E402
import storm  # noqa: E402

LIBRARIES = 6
FRAMES, THREADS, THREAD_FRAMES = 30, 4, 16
WARM = 50


def report_body(rng: random.Random, libraries: list[tuple[str, str]], host: int) -> dict[str, Any]:
    """One host's report of the bug: the same functions, at offsets of its own."""

    def frames(count: int) -> list[dict[str, str]]:
        return [{"function": f"store::stage_{at}", "module": libraries[at % LIBRARIES][0],
                 "build_id": libraries[at % LIBRARIES][1], "offset": hex(rng.randrange(1 << 20))}
                for at in range(count)]

    return {
        "report_id": f"u-{uuid.uuid4().hex}", "source": "userspace", "crashed_at": "2026-12-06T10:00:00Z",
        "host": {"hostname": f"svc-{host:05d}"},
        "stack": {"executable": "/opt/app/bin/store", "signal": "SIGSEGV", "frames": frames(FRAMES),
                  "threads": [{"tid": tid, "frames": frames(THREAD_FRAMES)} for tid in range(THREADS)],
                  "registers": {"rip": "0x555555560123", "rsp": "0x7fffffffe3a0"}},
    }


def validation_ms(body: dict[str, Any]) -> tuple[float, float]:
    """The report's validation, best of 5 x 100: the compiled loader's, and schema.load's."""
    from registry.ingest.api import LOAD_REPORT, REPORT_SCHEMA

    def best(load: Any) -> float:
        runs = []
        for _ in range(5):
            started = time.process_time()
            for _ in range(100):
                load(copy.deepcopy(body))
            runs.append((time.process_time() - started) / 100 * 1000)
        return min(runs)

    copying = best(lambda _: None)  # the deep copy each load is given, measured alone
    return best(LOAD_REPORT) - copying, best(REPORT_SCHEMA.load) - copying


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=1200)
    args = parser.parse_args()
    with storm.fresh_database() as (url, token):  # migrated, with a reporter token
        os.environ["CRASHREG_DATABASE_URL"] = url
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="crashreg-userspace-"))
        from registry.app import create_app

        app = create_app()
        logging.getLogger("crashreg").handlers[0].setStream(open(os.devnull, "w"))  # noqa: SIM115
        rng = random.Random(7)
        libraries = [(f"/opt/app/lib/libstage{at}.so", f"{rng.getrandbits(160):040x}")
                     for at in range(LIBRARIES)]
        bodies = [json.dumps(report_body(rng, libraries, host)).encode()
                  for host in range(WARM + args.reports)]
        statuses: list[str] = []

        def call(body: bytes) -> None:
            environ = ingest_cpu.environ("/api/v1/reports", body, token)
            answer = app(environ, lambda status, *_: statuses.append(status))
            b"".join(answer)

        for body in bodies[:WARM]:
            call(body)
        backends = list(storm.database_backends(url))
        before, started = storm.cpu_seconds(backends), time.process_time()
        for body in bodies[WARM:]:
            call(body)
        own = time.process_time() - started
        after = storm.cpu_seconds(list(storm.database_backends(url)))
        failed = [status for status in statuses if not status.startswith("20")]
        if failed:
            raise SystemExit(f"{len(failed)} failed requests, e.g. {failed[0]}")
        postgres = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
        frames = FRAMES + THREADS * THREAD_FRAMES
        print(f"a userspace report of {frames} frames, {LIBRARIES} libraries without symbols: process "
              f"{own / args.reports * 1000:.2f} ms, PostgreSQL {postgres / args.reports * 1000:.2f} ms "
              f"({args.reports} reports)")
        compiled, schema = validation_ms(json.loads(bodies[0]))
        print(f"its validation: the compiled loader {compiled:.2f} ms, schema.load {schema:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
