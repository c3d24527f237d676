"""The partitioning migration (0034) run while reporters post: the longest ingest stall.

    .venv/bin/python bench/partition_upgrade.py [--events 1000000] [--clients 8] [--database-url URL]

Without --database-url, a scratch PostgreSQL database at 0032 is filled with `--events` events
and as many reports (INSERT ... SELECT) and dropped afterwards; with it, that registry (at a
revision before 0034, populated by whatever made it) is upgraded in place. The registry serves
over real HTTP (threaded) while `--clients` threads post new crash reports one after another;
after a baseline of `--baseline-seconds`, `crashreg db upgrade` runs as a process. Reported:
the migration's duration, the clients' latency before it (p50, p99) and the longest single
request that overlapped it (the stall, the bound stated in docs/partitioning.md), and the
acknowledged reports missing from the database or stored twice (both must be 0).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psycopg
import requests
from sqlalchemy import text
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from history import drop_secondary, restore_secondary  # noqa: E402 - bench/history.py's fast load

from registry.app import create_app  # noqa: E402
from registry.auth.tokens import create_token  # noqa: E402
from registry.config import DumpStoreSettings, Settings, SymbolSettings  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.migrate import upgrade  # noqa: E402
from testkit.reports import crash_report  # noqa: E402

ADMIN = os.environ.get("CRASHREG_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
BEFORE = "0032_symbol_misses"
POPULATION = [
    "INSERT INTO hosts (hostname, first_seen, updated_at, in_inventory, labels) "
    "SELECT 'bench-' || i, now(), now(), false, '{}' FROM generate_series(1, 10000) AS i",
    "INSERT INTO events (host_id, hostname, boot_key, crashed_at, received_at, first_source, sources, "
    "capture_action, capture_reason, labels) SELECT 1 + n %% 10000, 'bench-' || (1 + n %% 10000), 'b' || n, "
    "now() - make_interval(secs => n), now(), 'crash_kernel', '[\"crash_kernel\"]', 'skip', 'bench', '{}' "
    "FROM generate_series(1, %(events)s) AS n",
    "INSERT INTO reports (report_id, event_id, source, received_at, payload_sha256, payload, console_log, "
    "answer) "
    "SELECT 'bench-' || id, id, 'crash_kernel', received_at, md5(id::text), '{}', repeat('x', 2000), '{}' "
    "FROM events",
]
LOADED = ("reports", "events")  # their secondary indexes and keys dropped for the load, made after


def populated(events: int) -> str:
    name = f"crashreg_bench_partitions_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        upgrade(url, BEFORE)
        started = time.perf_counter()
        database = Database(url)
        with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            dropped_keys = [drop_secondary(connection, table) for table in LOADED]
            for statement in POPULATION:
                parameters = {"events": events} if "%(events)s" in statement else None
                connection.exec_driver_sql(statement, parameters)
                took = time.perf_counter() - started
                print(f"populated: {statement[:40]}... ({took:.0f} s)", file=sys.stderr)
            for entry in reversed(dropped_keys):
                restore_secondary(connection, entry)
            connection.execute(text("VACUUM ANALYZE"))
            print(f"indexes and keys made, analysed ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        database.dispose()
    except BaseException:
        dropped(url)
        raise
    return url


def dropped(url: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def run(url: str, clients: int, baseline_s: float) -> dict[str, object]:
    logging.getLogger("crashreg.access").setLevel(logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    scratch = Path(tempfile.mkdtemp())
    settings = Settings(database_url=url, dump_store=DumpStoreSettings(url=str(scratch / "dumps")),
                        symbols=SymbolSettings(cache_dir=str(scratch / "symbols")))
    database = Database(url)
    with database.session() as session:
        token, _ = create_token(session, f"bench-{uuid.uuid4().hex[:6]}", "report", "agent")
    server = make_server("127.0.0.1", 0, create_app(settings, database), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/api/v1/reports"
    timings: list[tuple[float, float]] = []
    acknowledged: list[str] = []
    failures: list[int] = []
    stop = threading.Event()

    def client(number: int) -> None:
        session = requests.Session()
        headers = {"Authorization": f"Bearer {token}"}
        while not stop.is_set():
            report = crash_report(host={"hostname": f"storm-{number}-{len(timings) % 50}"})
            started = time.perf_counter()
            response = session.post(base, json=report, headers=headers, timeout=300)
            timings.append((started, time.perf_counter()))
            (acknowledged.append(report["report_id"]) if response.status_code in (200, 201)
             else failures.append(response.status_code))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(baseline_s)
    began = time.perf_counter()
    print("crashreg db upgrade ...", file=sys.stderr)
    upgraded = subprocess.run([sys.executable, "-m", "registry", "db", "upgrade"], text=True,
                              env=os.environ | {"CRASHREG_DATABASE_URL": url})
    ended = time.perf_counter()
    time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    server.shutdown()
    database.dispose()
    before = sorted(end - start for start, end in timings if end < began)
    during = [end - start for start, end in timings if end >= began and start <= ended]
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as connection:
        stored = dict(connection.execute(
            "SELECT report_id, count(*) FROM reports WHERE report_id = ANY(%s) GROUP BY 1", (acknowledged,)))
    return {
        "migration_s": round(ended - began, 2),
        "migration_exit": upgraded.returncode,
        "requests": len(timings),
        "failures": len(failures),
        "p50_before_s": round(before[len(before) // 2], 4),
        "p99_before_s": round(before[int(len(before) * 0.99)], 4),
        "longest_during_s": round(max(during), 3),
        "lost": len(set(acknowledged) - set(stored)),
        "doubled": sum(1 for count in stored.values() if count > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--database-url", help="a populated registry before 0034, upgraded in place")
    args = parser.parse_args()
    url = args.database_url or populated(args.events)
    try:
        figures = run(url, args.clients, args.baseline_seconds)
    finally:
        if not args.database_url:
            dropped(url)
    print(json.dumps(figures, indent=2))
    sys.exit(0 if figures["lost"] == figures["doubled"] == figures["failures"] == 0
             and figures["migration_exit"] == 0 else 1)


if __name__ == "__main__":
    main()
