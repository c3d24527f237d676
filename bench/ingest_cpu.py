"""CPU a report in-process, the registry against the floor route: no gunicorn, no client.

    cd TREE && /work/main/.venv/bin/python /work/main/bench/ingest_cpu.py [--hosts 1000] [--profile OUT]

The code measured is the tree it runs in (its registry/ and bench/storm.py), so one command
compares commits: check each out (`git worktree add /tmp/before REV`) and alternate the runs.
The storm's requests (bench/storm.py: one real log varied per host, 10% resends) go straight to
the WSGI app storm.py serves (on a fresh PostgreSQL database), one at a time in this process,
the floor route and the registry taking turns CHUNK requests at a time so that the machine's
drift in speed falls on both alike. Printed per request: this process's CPU (the worker's part:
Flask, validation, fingerprinting, the driver), PostgreSQL's backends' CPU (from /proc) and the
WAL written (the cluster's: run it alone), and the registry's ratio to the floor route. Without
the machine's other work between requests (accepting, gunicorn's parsing, scheduling), the
ratio shows what the code costs; bench/storm.py and bench/wrk_storm.py measure the served
whole. `--parts`: also the process CPU a report of each step of the ingest path (PARTS, the
ones the tree has), timed around the call; steps nest (the transaction holds the read and the
writes). `--partitions N`: N empty partitions ahead of each partitioned table rather than 2,
as years of history have them below (a generic plan opens them alike). `--pressure`: a second
process streams 64 MB through the caches the whole run (a busy neighbour on a shared machine),
which shows how much of each route's cost is its memory footprint: what the served storm's
ratio pays on a loaded machine.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TREE = Path.cwd()
sys.path[:0] = [str(TREE), str(TREE / "bench")]

import storm  # noqa: E402
from sqlalchemy import text  # noqa: E402

from registry.auth.tokens import create_token  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.migrate import upgrade  # noqa: E402
from registry.partitions import ensure_ahead  # noqa: E402

# (module, function) of the ingest path's steps, as they were named before and after issue 29.
PARTS = (
    ("registry.ingest.api", "validated_report"), ("registry.requests", "body_problems"),
    ("registry.ingest.api", "report_warnings"), ("registry.ingest.service", "payload_digest"),
    ("registry.ingest.service", "fingerprinted"), ("registry.ingest.service", "stored_or_replayed"),
    ("registry.ingest.service", "read_context"), ("registry.ingest.service", "store"),
    ("registry.ingest.service", "stored_at_once"), ("registry.ingest.api", "jsonify"),
    ("registry.app", "_start_request"), ("registry.app", "_log_request"),
)


ROUTES = {"floor route": "/floor/", "registry": "/api/v1/reports"}
CHUNK = 50


# --pressure's neighbour: writes one byte of every 64-byte cache line of 32 MB (random bytes:
# real pages, not the zero page) over and over, evicting what the routes keep in the CPU's
# caches between their requests. (A plain copy would not: large copies bypass the caches.)
MEMORY_STREAM = (
    "import os\nlines = bytearray(os.urandom(32 << 20))\n"
    "while True:\n    lines[::64] = lines[1::64]"
)


def timed_parts() -> collections.Counter[str]:
    """Wrap each of PARTS the tree has with a CPU timer; the counter gets seconds per step."""
    spent: collections.Counter[str] = collections.Counter()
    for module_name, name in PARTS:
        module = importlib.import_module(module_name)
        function = getattr(module, name, None)
        if function is None:
            continue

        def timed(*args: Any, _function: Any = function, _name: str = name, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return _function(*args, **kwargs)
            finally:
                spent[_name] += time.process_time() - started

        setattr(module, name, functools.wraps(function)(timed))
    return spent


def wal_position() -> Callable[[], int]:
    """The cluster's WAL insert position in bytes, read on a connection of its own (to the
    maintenance database: not one of the measured database's backends)."""
    import psycopg

    connection = psycopg.connect(storm.POSTGRES_ADMIN, autocommit=True)

    def position() -> int:
        return int(connection.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()[0])

    return position


def environ(path: str, body: bytes, token: str) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": "bench", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "bench",
        "HTTP_AUTHORIZATION": f"Bearer {token}", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr, "wsgi.multithread": False, "wsgi.multiprocess": True,
        "wsgi.run_once": False, "wsgi.version": (1, 0), "REMOTE_ADDR": "127.0.0.1",
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--profile", type=Path, help="cProfile the registry's requests into this file")
    parser.add_argument("--parts", action="store_true", help="also the CPU a report of each step")
    parser.add_argument("--pressure", action="store_true", help="a neighbour streaming memory meanwhile")
    parser.add_argument("--partitions", type=int, default=0, metavar="N",
                        help="N empty partitions ahead a partitioned table (history's count) instead of 2")
    args = parser.parse_args()
    spent = timed_parts() if args.parts else None
    url = storm.create_database()
    neighbour = subprocess.Popen([sys.executable, "-c", MEMORY_STREAM]) if args.pressure else None
    try:
        upgrade(url)
        database = Database(url)
        if args.partitions:
            with database.engine.connect() as connection:
                ensure_ahead(connection.execution_options(isolation_level="AUTOCOMMIT"), args.partitions)
        with database.session() as session:
            token, _ = create_token(session, "storm", "report", "agent")
            session.execute(text(storm.FLOOR_TABLE))
        database.dispose()
        os.environ["CRASHREG_DATABASE_URL"] = url
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="crashreg-ingest-cpu-"))
        app = storm.bench_app()
        template = storm.DEFAULT_LOG.read_text(errors="replace").partition("\n\n")[2]
        bodies = [json.dumps(body).encode() for body in storm.storm_requests(template, args.hosts)]
        statuses: list[str] = []

        def call(path: str, body: bytes) -> None:
            answer = app(environ(path, body, token), lambda status, *_: statuses.append(status))
            b"".join(answer)
            getattr(answer, "close", lambda: None)()

        logging.getLogger("crashreg").handlers[0].setStream(open(os.devnull, "w"))  # noqa: SIM115
        for number in range(20):  # imports, connections, compiled statements, a signature
            warm = {
                "report_id": f"warm-{number}", "source": "crash_kernel", "crashed_at": "2026-11-29T00:00:00Z",
                "host": {"hostname": f"warm-{number}"}, "console_log": "Kernel panic - not syncing: warm up",
            }
            call("/api/v1/reports", json.dumps(warm).encode())
            call("/floor/", json.dumps(warm).encode())

        def backends() -> dict[str, dict[int, float]]:
            """CPU so far of the database's backends: the floor route's one connection, the rest."""
            applications = storm.database_backends(url)
            used = storm.cpu_seconds(list(applications))
            is_floor = {pid: applications[pid] == storm.FLOOR_APPLICATION for pid in used}
            return {
                "floor route": {pid: seconds for pid, seconds in used.items() if is_floor[pid]},
                "registry": {pid: seconds for pid, seconds in used.items() if not is_floor[pid]},
            }

        # The routes take turns, CHUNK requests at a time, so the machine's drift in speed
        # (minutes apart on a shared box) falls on both alike.
        own = dict.fromkeys(ROUTES, 0.0)
        wal = dict.fromkeys(ROUTES, 0)
        position = wal_position()
        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile(time.process_time)
        statuses.clear()
        if spent is not None:
            spent.clear()
        before = backends()
        for start in range(0, len(bodies), CHUNK):
            for name, path in ROUTES.items():
                timing_registry = name == "registry"
                if profile is not None and timing_registry:
                    profile.enable()
                started, written = time.process_time(), position()
                for body in bodies[start:start + CHUNK]:
                    call(path, body)
                own[name] += time.process_time() - started
                wal[name] += position() - written
                if profile is not None and timing_registry:
                    profile.disable()
        after = backends()
        if profile is not None:
            profile.dump_stats(args.profile)
        failed = [status for status in statuses if not status.startswith("20")]
        if failed:
            raise SystemExit(f"{len(failed)} failed requests, e.g. {failed[0]}")
        costs = {}
        for name in ROUTES:
            postgres = sum(seconds - before[name].get(pid, 0.0) for pid, seconds in after[name].items())
            costs[name] = (own[name] / len(bodies) * 1000, postgres / len(bodies) * 1000)
            own_ms, postgres_ms = costs[name]
            print(f"{name:12s} CPU a request: process {own_ms:.2f} ms, PostgreSQL {postgres_ms:.2f} ms, "
                  f"together {own_ms + postgres_ms:.2f} ms; WAL {wal[name] / len(bodies) / 1024:.1f} KB")
        if spent is not None:
            for part, seconds in spent.most_common():
                print(f"  {part:20s} {seconds / len(bodies) * 1000:.2f} ms a report")
        (floor_own, floor_pg), (own, pg) = costs["floor route"], costs["registry"]
        print(f"registry / floor route: together {(own + pg) / (floor_own + floor_pg):.2f}x, process "
              f"{own / floor_own:.2f}x, PostgreSQL {pg / floor_pg:.2f}x; "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        if neighbour is not None:
            neighbour.kill()
        storm.drop_database(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
