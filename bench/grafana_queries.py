"""Every Grafana panel query on PostgreSQL with a million events: p95 under 500 ms each?

    .venv/bin/python bench/grafana_queries.py [--events 1000000] [--hosts 20000] [--runs 20] [--json OUT]

Builds a fresh PostgreSQL database with the epidemiology bench's fleet (bench/epidemiology.py:
`--hosts` hosts, `--events` crash events over 300 signatures and 90 days, a kernel rollout),
then adds what the dashboards also read: capture decisions and ~15% captures, 0.2% regressed
events, per-signature counters, Jira links and resolutions, RCAs, stored epidemiology.

Each panel's SQL is expanded exactly as Grafana would (testkit/grafana_sql.py) for the
dashboards' default range, the last 30 days (here: the last 30 days of data, a third of all
events), and run `--runs` times through the read-only role `crashreg grafana provision`
creates. Reported per query: p50 and p95 in ms, and p95 as a ratio to the baseline of the
same run, one sequential `SELECT count(*) FROM events`; and the time to refresh the rollups
(what the scheduler's Grafana job does every 5 minutes). Exit status 1 if a p95 misses 500 ms.
`--database-url URL` / `--history N` measure a kept registry (bench/history.py's) instead, the
range's end the day after its last crash, the rollups refreshed once; beside each query its p95
on an empty registry (1,000 hosts, no event) in the same run.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import epidemiology as fleet_bench  # noqa: E402 - bench/epidemiology.py builds the fleet

from dashboards import build_dashboards  # noqa: E402
from registry.db import Database  # noqa: E402
from sync.grafana.role import ensure_readonly_role  # noqa: E402
from sync.grafana.rollups import refresh_rollups  # noqa: E402
from testkit.grafana_sql import TimeRange, Variable, expand_target  # noqa: E402

GOAL_MS = 500.0
# The bench database's rollups: how long building them from its events took (the backfill after
# migration 0033 on a registry this size).
BUILT_ROLLUPS: dict[str, float] = {}
DATA_END = datetime(2026, 10, 30, tzinfo=UTC)  # the fleet bench's 90 days end here

EXTRAS_SQL = (
    # Capture decisions (5% full, 10% filtered), host memory, a few regressions.
    """UPDATE events SET
         capture_action = CASE WHEN id % 20 = 0 THEN 'full' WHEN id % 10 = 3 THEN 'filtered' ELSE 'skip' END,
         memory_gb = (ARRAY[256, 512, 1024, 2048])[1 + host_id % 4],
         regression = CASE WHEN id % 500 = 7 THEN 'regressed' END""",
    "UPDATE hosts SET memory_gb = (ARRAY[256, 512, 1024, 2048])[1 + id % 4]",
    """INSERT INTO captures (event_id, signature_id, method, status, dump_level, bytes, duration_s,
                             downtime_s, created_at, updated_at)
       SELECT id, signature_id, 'makedumpfile',
              CASE WHEN (id / 3) % 11 = 4 THEN 'failed' ELSE 'completed' END,
              CASE WHEN capture_action = 'full' THEN 0 ELSE 31 END,
              memory_gb::bigint * CASE WHEN capture_action = 'full' THEN 850000000 ELSE 40000000 END,
              memory_gb * CASE WHEN capture_action = 'full' THEN 0.9 ELSE 0.08 END + id % 60,
              memory_gb * CASE WHEN capture_action = 'full' THEN 0.9 ELSE 0.08 END + id % 60 + 90,
              crashed_at, crashed_at
       FROM events WHERE capture_action <> 'skip'""",
    """INSERT INTO signature_counters (signature_id, shard, events, last_seen)
       SELECT signature_id, 0, COUNT(*), MAX(crashed_at) FROM events GROUP BY signature_id""",
    """UPDATE signatures s SET first_seen = f.first_seen,
         status = (ARRAY['new', 'triaged', 'resolved', 'regressed', 'ignored'])[1 + s.id % 5],
         resolved_at = CASE WHEN s.id % 5 = 2 THEN f.first_seen + make_interval(days => s.id % 40) END
       FROM (SELECT signature_id, MIN(crashed_at) AS first_seen FROM events GROUP BY signature_id) f
       WHERE f.signature_id = s.id""",
    """INSERT INTO jira_links (signature_id, issue_key, url, status_category, created_at)
       SELECT id, 'CRASH-' || id, 'https://jira.example/browse/CRASH-' || id,
              CASE WHEN status = 'resolved' THEN 'done' ELSE 'indeterminate' END, first_seen
       FROM signatures WHERE id % 2 = 0""",
    """INSERT INTO rcas (signature_id, status, summary, body, author, author_kind, confidence, evidence,
                         token_name, checks, checks_passed, checked_at, created_at, updated_at)
       SELECT id, CASE WHEN id % 3 = 0 THEN 'confirmed' ELSE 'proposed' END, 'cause', 'body', 'bench',
              CASE WHEN id % 2 = 0 THEN 'ai' ELSE 'human' END, 0.7, '[]', 'bench', '[]', true,
              first_seen + interval '2 days', first_seen + interval '2 days', first_seen + interval '2 days'
       FROM signatures WHERE id % 3 <> 1""",
    """INSERT INTO epidemiology_verdicts (signature_id, verdict, reason, baseline, events, hosts,
                                         top_attribute, top_value, top_lift, top_p_value, analysis,
                                         computed_at)
       SELECT id, (ARRAY['single-host', 'hardware-config', 'software', 'inconclusive'])[1 + id % 4], 'bench',
              'fleet', 100, 10, 'bios_version', 'bios2.0', 50, 1e-9, '{}', now()
       FROM signatures""",
    """INSERT INTO epidemiology_findings (signature_id, baseline, rank, attribute, value, in_signature,
                                         overall, lift, p_value, log10_p, events, computed_at)
       SELECT id, 'fleet', r, (ARRAY['bios_version', 'kernel_version', 'sku'])[r], 'v' || r, 0.9, 0.1,
              9.0 / r, 1e-9, -9, 90, now()
       FROM signatures, generate_series(1, 3) AS r""",
    """INSERT INTO epidemiology_suspect_hosts (rank, physical_host, crashes, signatures, expected_signatures,
                                              p_value, log10_p, evidence, detail, computed_at)
       SELECT r, 'hv-' || r, 50, 8, 1.5, 1e-6, -6, 'bench', '{}', now() FROM generate_series(1, 20) AS r""",
)


def add_dashboard_data(url: str) -> None:
    database = Database(url)
    with database.engine.begin() as connection:
        for statement in EXTRAS_SQL:
            connection.execute(text(statement))
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))
    database.dispose()


def timed(conn: psycopg.Connection, sql: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        conn.execute(sql).fetchall()
        times.append((time.perf_counter() - started) * 1000)
    return times


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def data_end(url: str) -> datetime:
    """The end of the dashboards' default range: the day after the registry's last crash."""
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        end = conn.execute(
            "SELECT date_trunc('day', max(crashed_at)) + interval '1 day' FROM events").fetchone()[0]
    return end or DATA_END


def measure(url: str, role: str, runs: int, end: datetime = DATA_END, refreshes: int = 3) -> dict[str, Any]:
    database = Database(url)
    role_url = make_url(url).set(drivername="postgresql", username=role, password=secrets.token_hex(12))
    ensure_readonly_role(database.engine, role_url.render_as_string(hide_password=False))
    database.dispose()
    time_range = TimeRange(end - timedelta(days=30), end)
    conn = psycopg.connect(role_url.render_as_string(hide_password=False), autocommit=True)
    busiest = conn.execute(
        "SELECT signature_id FROM rpt_signatures ORDER BY event_count DESC LIMIT 1"
    ).fetchone()
    variables = {"signature": Variable("signature", str(busiest[0]))}
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as owner:
        baseline = statistics.median(timed(owner, "SELECT count(*) FROM events", runs))
    database = Database(url)
    refresh_ms = []
    for _ in range(refreshes):
        started = time.perf_counter()
        refresh_rollups(database)
        refresh_ms.append((time.perf_counter() - started) * 1000)
    database.dispose()
    queries = [
        (f"{board['uid']} / {panel['title']}", expand_target(target, variables, time_range))
        for board in build_dashboards("postgresql", "https://crashreg.example")
        for panel in board["panels"]
        for target in panel["targets"]
    ]
    results = []
    with click.progressbar(queries, label="panel queries", file=sys.stderr) as bar:
        for name, sql in bar:
            samples = timed(conn, sql, runs)
            results.append(
                {
                    "query": name,
                    "p50_ms": round(statistics.median(samples), 1),
                    "p95_ms": round(p95(samples), 1),
                    "p95_to_scan": round(p95(samples) / baseline, 3),
                }
            )
    conn.close()
    refresh = statistics.median(refresh_ms)
    return {
        "scan_ms": round(baseline, 1),
        **BUILT_ROLLUPS,
        "rollup_refresh_ms": round(refresh, 1),
        "rollup_refresh_to_scan": round(refresh / baseline, 2),
        "queries": results,
    }


def arguments(doc: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", type=Path)
    from history import history_arguments

    history_arguments(parser)
    return parser.parse_args()


@contextmanager
def read_only_role(url: str, prefix: str) -> Iterator[tuple[str, str]]:
    """(URL, role name) for a kept registry: the read-only role is dropped afterwards, the
    registry kept."""
    from history import drop_role

    role = f"{prefix}_{uuid.uuid4().hex[:6]}"
    try:
        yield url, role
    finally:
        drop_role(url, role)


@contextmanager
def bench_database(prefix: str, hosts: int, events: int) -> Iterator[tuple[str, str]]:
    """(URL, role name): a fresh database with the fleet and what the dashboards read, and the
    name for the read-only role; both dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin_url = fleet_bench.POSTGRES_ADMIN
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    role = f"crashreg_grafana_bench_{uuid.uuid4().hex[:6]}"
    try:
        started = time.perf_counter()
        fleet_bench.build(url, hosts, events)
        add_dashboard_data(url)
        elapsed = time.perf_counter() - started
        print(f"built {events} events on {hosts} hosts in {elapsed:.1f}s", file=sys.stderr)
        database = Database(url)
        BUILT_ROLLUPS["backfill_s"] = round(fleet_bench.backfill_rollups(database), 1)
        database.dispose()
        yield url, role
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def main() -> int:
    args = arguments(__doc__)
    from history import history_url

    kept = history_url(args)
    if kept:
        with read_only_role(kept, "crashreg_grafana_bench") as (url, role):
            figures = {"database": url.rsplit("/", 1)[1], "runs": args.runs,
                       **measure(url, role, args.runs, data_end(url), refreshes=1)}
        with bench_database("crashreg_bench_grafana", 1000, 0) as (url, role):  # the same run's baseline
            empty = measure(url, role, args.runs, refreshes=1)
        figures["empty_registry"] = {key: empty[key] for key in ("scan_ms", "rollup_refresh_ms")}
        for row, baseline in zip(figures["queries"], empty["queries"], strict=True):
            row["empty_p95_ms"] = baseline["p95_ms"]
    else:
        with bench_database("crashreg_bench_grafana", args.hosts, args.events) as (url, role):
            figures = {"events": args.events, "hosts": args.hosts, "runs": args.runs,
                       **measure(url, role, args.runs)}
    width = max(len(r["query"]) for r in figures["queries"])
    print(f"{'query':<{width}}  p50 ms  p95 ms  p95/scan   (scan: {figures['scan_ms']} ms)")
    for row in figures["queries"]:
        print(
            f"{row['query']:<{width}}  {row['p50_ms']:6.1f}  {row['p95_ms']:6.1f}  {row['p95_to_scan']:8.3f}"
        )
    print(
        f"rollup refresh (all rpt_* materialized views, concurrently): {figures['rollup_refresh_ms']} ms "
        f"= {figures['rollup_refresh_to_scan']} x scan"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0 if all(r["p95_ms"] < GOAL_MS for r in figures["queries"]) else 1


if __name__ == "__main__":
    sys.exit(main())
