"""One signature's epidemiology over a large registry on PostgreSQL: under one second?

    .venv/bin/python bench/epidemiology.py [--events 1000000] [--hosts 20000] [--runs 5] [--json OUT]

Builds a fresh PostgreSQL database (migrated by Alembic) holding `--hosts` inventory hosts
(8 per physical host, 4 SKUs with their BIOS versions, a kernel rollout recorded in the
attribute history) and `--events` crash events over 300 signatures, generated inside the
database (generate_series). Signature 1 is a BIOS-linked hardware bug (~1/300 of the
events, all on one BIOS version); signature 2 is a large spread bug (10% of all events).

Measured: the analysis behind GET /signatures/{id}/epidemiology (`signature_epidemiology`:
SQL aggregation over the signature's events and the fleet's attribute history, verdict,
onset, uptime) for both signatures: the first run and the median of `--runs` before any
refresh (every event read live), then, after storing the large signatures' samples as the
refresh job does (`store_samples`), the median of `--runs` as served (the all-crashes view
from the last refresh too) and one run with the all-crashes view computed live; as the
baseline of the same run, a bare `SELECT count(*) FROM events` (one scan). The bodies with and
without the stored sample must be identical. Exit status 1 when an analysis misses the goal,
the bodies differ or the BIOS bug does not come out as hardware-config.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.core.signatures import Signature  # noqa: E402
from registry.db import Database, utcnow  # noqa: E402
from registry.epidemiology.service import signature_epidemiology, store_samples  # noqa: E402
from registry.migrate import upgrade  # noqa: E402
from registry.rollups.fold import rebuild  # noqa: E402

POSTGRES_ADMIN = os.environ.get("CRASHREG_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
GOAL_SECONDS = 1.0
SIGNATURES = 300

HOSTS_SQL = """
INSERT INTO hosts (hostname, physical_host, region, cluster, sku, cpu_model, microcode, bios_version,
                   bmc_version, kernel_version, os_image, hypervisor, gpu_driver, labels,
                   first_seen, updated_at, in_inventory, booted_at)
SELECT 'vm-' || i, 'hv-' || p, (ARRAY['us-east','us-west','eu-central'])[1 + p % 3], 'c' || (p % 12),
       'sku' || s, 'cpu' || s, 'mc' || s || '.' || (p / 4 % 2), 'bios' || s || '.' || (p % 2),
       'bmc' || (p % 3), 'k' || (i * 13 % 3), 'img' || (i * 13 % 3), 'kvm-8.2',
       CASE WHEN s >= 2 THEN 'gpu' || (p % 2) END,
       jsonb_build_object('team', 't' || (i % 5), 'tier', CASE WHEN i % 5 = 0 THEN 'staging' ELSE 'prod' END),
       timestamptz '2026-08-01', timestamptz '2026-08-01', true,
       timestamptz '2026-08-01' - make_interval(secs => (i * 7919 % 10000000))
FROM (SELECT i, i / 8 AS p, (i / 8 * 7) % 4 AS s FROM generate_series(0, :hosts - 1) AS i) AS g
ORDER BY i
"""

# 10% of the hosts moved from k0 to their current kernel on day 45 (the rollout history).
CHANGES_SQL = """
INSERT INTO host_attribute_changes (host_id, attribute, old_value, new_value, changed_at)
SELECT id, 'kernel_version', 'k0', kernel_version, timestamptz '2026-09-15'
FROM hosts WHERE id % 10 = 0 AND kernel_version <> 'k0'
"""

SIGNATURES_SQL = """
INSERT INTO signatures (fingerprint, algorithm_version, title, kind, frames, labels, status, first_seen,
                        created_at, updated_at, fix_versions, capture_policy, extra_full_captures)
SELECT md5('sig' || n), 1, 'bench signature ' || n, 'kernel', '[]', '[]', 'new',
       timestamptz '2026-08-01', now(), now(), '[]', 'auto', 0
FROM generate_series(1, :signatures) AS n ORDER BY n
"""

# Signature 1: hosts whose physical host p has p % 4 = 2, i.e. SKU 2 with BIOS bios2.0 only.
EVENTS_SQL = """
INSERT INTO events (host_id, hostname, boot_key, signature_id, fingerprint, crashed_at, received_at,
                    uptime_s, first_source, sources, capture_action, capture_reason,
                    physical_host, region, cluster, sku, cpu_model, microcode, bios_version, bmc_version,
                    kernel_version, os_image, hypervisor, gpu_driver, labels)
SELECT h.id, h.hostname, 'b' || g.n, g.sig, md5('sig' || g.sig),
       g.crashed_at, g.crashed_at + interval '2 minutes',
       CASE WHEN g.sig = 1 THEN g.n % 200000 ELSE g.n * 7 % 10000000 END,
       'crash_kernel', '["crash_kernel"]', 'skip', 'bench',
       h.physical_host, h.region, h.cluster, h.sku, h.cpu_model, h.microcode, h.bios_version, h.bmc_version,
       h.kernel_version, h.os_image, h.hypervisor, h.gpu_driver, h.labels
FROM (
  SELECT n, timestamptz '2026-08-01' + make_interval(days => n % 90, secs => n * 37 % 86400) AS crashed_at,
         CASE WHEN n % 300 = 0 THEN 1 WHEN n % 10 = 5 THEN 2 ELSE 3 + n % (:signatures - 2) END AS sig,
         CASE WHEN n % 300 = 0 THEN 1 + 8 * (4 * ((n / 300) % (:hosts / 32)) + 2) + (n / 300) % 8
              ELSE 1 + (n / 10 * 7919 + n % 10 * 977) % :hosts END AS host_id
  FROM generate_series(1, :events) AS n
) AS g JOIN hosts h ON h.id = g.host_id
"""


def build(url: str, hosts: int, events: int) -> None:
    upgrade(url)
    database = Database(url)
    with database.engine.begin() as connection:
        connection.execute(text(HOSTS_SQL), {"hosts": hosts})
        connection.execute(text(CHANGES_SQL))
        connection.execute(text(SIGNATURES_SQL), {"signatures": SIGNATURES})
        connection.execute(text(EVENTS_SQL), {"events": events, "hosts": hosts, "signatures": SIGNATURES})
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))
    backfill_rollups(database)
    database.dispose()


def backfill_rollups(database: Database) -> float:
    """The rollups built from the bulk-loaded events, as after the migration on a registry that
    has them (the load's queued changes are in the build's snapshot); returns the seconds."""
    started = time.perf_counter()
    rebuild(database)
    elapsed = time.perf_counter() - started
    print(f"rollups built from events in {elapsed:.1f}s", file=sys.stderr)
    return elapsed


def timed(function: Any, runs: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return times, result


@contextmanager
def built_database(prefix: str, hosts: int, events: int) -> Iterator[str]:
    """A scratch PostgreSQL database holding `build`'s registry, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    url = POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        started = time.perf_counter()
        build(url, hosts, events)
        elapsed = time.perf_counter() - started
        print(f"built {events} events on {hosts} hosts in {elapsed:.1f}s", file=sys.stderr)
        yield url
    finally:
        with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def count_events(session: Any) -> int:
    return session.execute(text("SELECT count(*) FROM events")).scalar()


def measure(url: str, runs: int) -> dict[str, Any]:
    """Before any refresh: the first run (cold: this process has no fleet-wide uptime histogram
    yet) and the median of `runs`, every event read live. Then the large signatures' samples
    are stored (as the refresh does) and measured as served: the median of `runs` (the
    all-crashes view from the last refresh) and one run computing the all-crashes view live."""
    database = Database(url)
    figures: dict[str, Any] = {}
    bodies: dict[str, Any] = {}
    with database.session() as session:
        scans, _ = timed(lambda: count_events(session), runs)
        figures["scan_s"] = round(statistics.median(scans), 3)
        for name, signature_id in (("bios_signature", 1), ("spread_signature", 2)):
            signature = session.get_one(Signature, signature_id)
            times, bodies[name] = timed(partial(signature_epidemiology, session, signature), runs)
            figures[name] = {
                "first_s": round(times[0], 3),
                "live_median_s": round(statistics.median(times), 3),
            }
    with database.session() as session:
        stored = store_samples(session, utcnow())
    with database.session() as session:
        for name, signature_id in (("bios_signature", 1), ("spread_signature", 2)):
            signature = session.get_one(Signature, signature_id)
            served = partial(signature_epidemiology, session, signature, crash_view=False)
            times, body = timed(served, runs)
            live, _ = timed(partial(signature_epidemiology, session, signature, crash_view=True), 1)
            top = body["findings"][0] if body["findings"] else {}
            figures[name] |= {
                "events": body["events"],
                "verdict": body["verdict"],
                "top_finding": f"{top.get('attribute')}={top.get('value')}" if top else None,
                "stored_sample": signature_id in stored,
                "median_s": round(statistics.median(times), 3),
                "median_ratio_to_scan": round(statistics.median(times) / figures["scan_s"], 2),
                "with_live_crash_view_s": round(live[0], 3),
                "same_body": json.dumps(body, default=str) == json.dumps(bodies[name], default=str),
            }
    database.dispose()
    return figures


def population_parser(description: str | None) -> argparse.ArgumentParser:
    """The options of a bench over a built population (this one's, the pages'): its size, the
    runs per figure, and where the figures go."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    from history import history_arguments  # bench/history.py builds its fleet with this module's SQL

    history_arguments(parser)
    return parser


def main() -> int:
    parser = population_parser(__doc__)
    args = parser.parse_args()
    from history import history_url

    url = history_url(args)
    if url:
        figures = {"database": url.rsplit("/", 1)[1], "runs": args.runs, **measure(url, args.runs)}
    else:
        with built_database("crashreg_bench_epi", args.hosts, args.events) as url:
            figures = {"events": args.events, "hosts": args.hosts, "runs": args.runs,
                       **measure(url, args.runs)}
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    ok = (
        all(figures[k]["median_s"] < GOAL_SECONDS for k in ("bios_signature", "spread_signature"))
        and all(figures[k]["same_body"] for k in ("bios_signature", "spread_signature"))
        and figures["bios_signature"]["verdict"] == "hardware-config"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
