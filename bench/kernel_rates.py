"""The epidemiology dashboard's crash rate by kernel version on years of kernel history: what
reading `rpt_kernel_intervals` (migration 0047, a plain view over hosts and their kernel
changes) costs a panel refresh, against the 500 ms a panel may take (bench/grafana_queries.py).

    .venv/bin/python bench/kernel_rates.py --database-url URL [--every 30] [--runs 10]

URL: a registry bench/history.py built (100,000 hosts over 730 days). Its kernel history (one
rollout on a tenth of the hosts) is far thinner than a fleet's, so inside one transaction that
is rolled back at the end (the kept registry is left as it was) every host also takes a new
kernel every `--every` days, the rollout of each spread over 14 days, and one BIOS update a
year (changes of another attribute the view must skip). Then the panel's SQL, expanded as
Grafana does (testkit/grafana_sql.py), runs `--runs` times for the last 7, 30, 90 and 365 days
of the history, and the whole view is read once (what SQLite's reporting copy pays every
5 minutes). Reported: p50 and p95 in ms, and the rows of the view.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboards import build_dashboards  # noqa: E402
from testkit.grafana_sql import TimeRange, expand_target  # noqa: E402

HISTORY_SQL = """
INSERT INTO host_attribute_changes (host_id, attribute, old_value, new_value, changed_at)
SELECT h.id, 'kernel_version', 'r' || (r - 1), 'r' || r,
       h.first_seen + make_interval(days => r * %(every)s, secs => h.id::bigint * 7919 %% (14 * 86400))
FROM hosts h CROSS JOIN generate_series(1, %(rollouts)s) AS r
UNION ALL
SELECT h.id, 'bios_version', 'b' || (r - 1), 'b' || r,
       h.first_seen + make_interval(days => r * 365, secs => h.id::bigint * 104729 %% (14 * 86400))
FROM hosts h CROSS JOIN generate_series(1, %(years)s) AS r
"""


def panel_target() -> dict[str, object]:
    board = next(b for b in build_dashboards("postgresql", "x") if b["uid"] == "crashreg-epidemiology")
    panel = next(p for p in board["panels"] if p["title"].startswith("Crash rate by kernel version"))
    return panel["targets"][0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="a registry bench/history.py built")
    parser.add_argument("--every", type=int, default=30, help="days between kernel rollouts")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    url = args.database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as connection:  # one transaction, rolled back
        connection.execute("SET jit = off")  # as for Grafana's role (sync/grafana/role.py)
        first, last = connection.execute("SELECT MIN(first_seen), now() FROM hosts").fetchone()
        days = (last - first).days
        started = time.perf_counter()
        connection.execute(HISTORY_SQL, {"every": args.every, "rollouts": days // args.every,
                                         "years": max(1, days // 365)})
        connection.execute("UPDATE hosts SET kernel_version = 'r' || %s", (days // args.every,))
        connection.execute("ANALYZE hosts")
        connection.execute("ANALYZE host_attribute_changes")
        changes, = connection.execute("SELECT count(*) FROM host_attribute_changes").fetchone()
        hosts, = connection.execute("SELECT count(*) FROM hosts").fetchone()
        print(f"{hosts} hosts, {changes} attribute changes over {days} days "
              f"(kernel every {args.every} days) in {time.perf_counter() - started:.0f}s")
        target = panel_target()
        for span in (7, 30, 90, 365):
            sql = expand_target(target, {}, TimeRange(last - timedelta(days=span), last))
            times, rows = [], []
            for _ in range(args.runs):
                began = time.perf_counter()
                rows = connection.execute(sql).fetchall()
                times.append((time.perf_counter() - began) * 1000)
            p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
            print(f"last {span:3d} days: p50 {statistics.median(times):7.1f} ms  p95 {p95:7.1f} ms  "
                  f"({len(rows)} kernels)")
        began = time.perf_counter()
        whole = "SELECT count(*) FROM (SELECT * FROM rpt_kernel_intervals) v"
        intervals, = connection.execute(whole).fetchone()
        print(f"the whole view: {intervals} intervals in {(time.perf_counter() - began) * 1000:.0f} ms")
        connection.rollback()
    return 0


if __name__ == "__main__":
    sys.exit(main())
