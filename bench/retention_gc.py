"""Retention's gc over a million captures on PostgreSQL: how long, how much memory.

    .venv/bin/python bench/retention_gc.py [--captures 1000000] [--hosts 20000]

Builds a fresh PostgreSQL database with the epidemiology bench's fleet (bench/epidemiology.py:
`--captures` crash events over 300 signatures and 90 days, ending 2026-10-30), then, set-based:
a completed capture and a stored dump for every event (a local-directory store), each
signature's 3 capture slots on its newest events, a tenth of the signatures resolved on
2026-09-01 and a tenth regressed, a pin on every 1,000th capture, and 300 open RCAs citing 3
captures each. The objects are not written to disk: each deletion is the store's real
unlink() finding nothing, so the figure is the registry's side of the work (reading the
facts, deciding, marking, recording) plus one system call per object.

Then runs `crashreg storage gc` three times as the operator would, in a child process each:
`--dry-run`, the real run (deletes everything past its age), and a second run (nothing left:
the hourly job's steady cost), after `crashreg storage --help` (the start-up alone). Reported
per run: wall time, CPU time and peak RSS of the command's process.

`--database-url URL` / `--history N` run the same commands on a kept registry (bench/history.py's:
dumps past retention already deleted and old logs trimmed, as the hourly job leaves them, so
the real run is the steady cost plus what aged since the build) and, with `--rebuild`,
`crashreg signatures rebuild --dry-run` (every event fingerprinted again, nothing changed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import epidemiology as fleet_bench  # noqa: E402 - bench/epidemiology.py builds the fleet

from registry.config import DumpStoreSettings  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.storage.store import open_store  # noqa: E402

RETENTION_SQL = (
    """INSERT INTO captures (event_id, signature_id, method, status, bytes, created_at, updated_at)
       SELECT id, signature_id, 'makedumpfile', 'completed', 4000000000 + id % 1000, crashed_at, crashed_at
       FROM events""",
    """INSERT INTO dumps (capture_id, store, key, state, encoding, bytes, part_size, created_at, stored_at)
       SELECT id, :store, 'bench/' || id || '.vmcore', 'stored', 'identity', bytes, 16777216,
              created_at, created_at + interval '1 hour'
       FROM captures""",
    """INSERT INTO capture_slots (signature_id, slot, event_id, state, since)
       SELECT signature_id, n, id, 'completed', crashed_at
       FROM (SELECT signature_id, id, crashed_at,
                    row_number() OVER (PARTITION BY signature_id ORDER BY crashed_at DESC) AS n
             FROM events) AS newest
       WHERE n <= 3""",
    """UPDATE signatures SET status = CASE WHEN id % 10 = 0 THEN 'resolved' ELSE 'regressed' END,
              resolved_at = timestamptz '2026-09-01'
       WHERE id % 10 IN (0, 1)""",
    """INSERT INTO dump_pins (capture_id, note, pinned_by, pinned_at)
       SELECT id, 'bench', 'bench', now() FROM captures WHERE id % 1000 = 0""",
    """INSERT INTO rcas (signature_id, status, summary, body, author, author_kind, evidence, token_name,
                         checks, checks_passed, checked_at, created_at, updated_at)
       SELECT s.id, 'proposed', 'cause', 'body', 'bench', 'human',
              (SELECT jsonb_agg(jsonb_build_object('type', 'capture', 'capture_id', c.id::text))
               FROM (SELECT id FROM captures WHERE signature_id = s.id ORDER BY id LIMIT 3) AS c),
              'bench', '[]', true, now(), now(), now()
       FROM signatures s""",
)


def build(url: str, store: str) -> None:
    database = Database(url)
    with database.engine.begin() as connection:
        for statement in RETENTION_SQL:
            connection.execute(text(statement), {"store": store} if ":store" in statement else {})
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))
    database.dispose()


def states(url: str) -> dict[str, int]:
    database = Database(url)
    with database.engine.connect() as connection:
        counted = dict(connection.execute(text("SELECT state, count(*) FROM dumps GROUP BY state")).all())
    database.dispose()
    return {str(state): int(count) for state, count in counted.items()}


def run_command(url: str, store_dir: Path, *args: str) -> dict[str, object]:
    """`crashreg ARGS` in a child process: wall time, its CPU time and peak RSS (its own, from
    wait4), the last of what it printed and of its progress (stderr, shown as it goes)."""
    env = os.environ | {"CRASHREG_DATABASE_URL": url, "CRASHREG_DUMP_STORE": str(store_dir)}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "registry", *args], env=env, cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress = []
    assert child.stderr is not None and child.stdout is not None
    for line in child.stderr:
        progress.append(line.rstrip())
        print(f"  {line.rstrip()[:150]}", file=sys.stderr, flush=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"crashreg {' '.join(args)} failed: {progress[-5:]}")
    return {"command": "crashreg " + " ".join(args), "seconds": round(time.perf_counter() - started, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024),
            "progress_lines": len(progress), "summary": output.strip()[-400:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captures", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--rebuild", action="store_true",
                        help="also `crashreg signatures rebuild --dry-run` (every event fingerprinted again)")
    parser.add_argument("--json", type=Path)
    from history import DUMP_STORE, history_arguments, history_url

    history_arguments(parser)
    args = parser.parse_args()
    kept = history_url(args)
    if kept:  # its dumps are in the generator's store (the objects were never written)
        commands = [("storage", "--help"), ("storage", "gc", "--dry-run"), ("storage", "gc"),
                    ("storage", "gc")]
        if args.rebuild:
            commands.append(("signatures", "rebuild", "--dry-run"))
        runs = [run_command(kept, DUMP_STORE, *command) for command in commands]
        figures = {"database": kept.rsplit("/", 1)[1], "runs": runs}
        print(json.dumps(figures, indent=2))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    with tempfile.TemporaryDirectory() as scratch, fleet_bench.built_database(
            "crashreg_bench_gc", args.hosts, args.captures) as url:
        store_dir = Path(scratch) / "dumps"
        location = open_store(DumpStoreSettings(url=str(store_dir)), "http://bench").uri("").rstrip("/")
        started = time.perf_counter()
        build(url, location)
        print(f"captures, dumps, slots, pins, RCAs in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        runs = [run_command(url, store_dir, *args) for args in (
            ("storage", "--help"),  # the command's start-up alone, the baseline
            ("storage", "gc", "--dry-run"), ("storage", "gc"), ("storage", "gc"))]
        print(json.dumps({"captures": args.captures, "runs": runs, "dumps_after": states(url)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
