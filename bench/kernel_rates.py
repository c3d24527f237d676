"""The epidemiology dashboard's crash rate by kernel version on years of kernel history: what the
panel's read of the kernels' daily rollup (migration 0048) costs a refresh, against the 500 ms a
panel may take (bench/grafana_queries.py), what the rollup costs to build and to keep.

    .venv/bin/python bench/kernel_rates.py --database-url URL [--every 30] [--runs 10]

URL: a registry bench/history.py built (100,000 hosts over 730 days). Its kernel history (one
rollout on a tenth of the hosts) is far thinner than a fleet's, so inside one transaction that
is rolled back at the end (the kept registry is left as it was) every host also takes a new
kernel every `--every` days, the rollout of each spread over 14 days, and one BIOS update a
year (changes of another attribute the rollup must skip). Then, timed:

- the back-fill: every host's kernel intervals computed and summed (0048's build, the fold's code);
- the panel's SQL, expanded as Grafana does (testkit/grafana_sql.py), `--runs` times for the last
  7, 30, 90 and 365 days (p50 and p95 in ms), and beside it the structure not chosen: the same
  figures cut from the kept intervals (`rollup_kernel_intervals`) at each read;
- the rollups job on a day of changes: a fourteenth of the hosts taking a kernel in the last 24 h
  (a rollout's day), then as many others taking one back-dated 200 days (a late inventory
  upload): the queue the triggers filled, folded as the job folds it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboards import build_dashboards  # noqa: E402
from registry.rollups.kernels import recount_hosts  # noqa: E402
from testkit.grafana_sql import TimeRange, expand_target  # noqa: E402

HISTORY_SQL = """
INSERT INTO host_attribute_changes (host_id, attribute, old_value, new_value, changed_at)
SELECT h.id, 'kernel_version', 'r' || (r - 1), 'r' || r,
       h.first_seen + make_interval(days => r * :every, secs => h.id::bigint * 7919 % (14 * 86400))
FROM hosts h CROSS JOIN generate_series(1, :rollouts) AS r
UNION ALL
SELECT h.id, 'bios_version', 'b' || (r - 1), 'b' || r,
       h.first_seen + make_interval(days => r * 365, secs => h.id::bigint * 104729 % (14 * 86400))
FROM hosts h CROSS JOIN generate_series(1, :years) AS r
"""
# A day of changes: a fourteenth of the hosts move to kernel `new` at `at` (+ up to a day).
DAY_OF_CHANGES = """
WITH moved AS (
    UPDATE hosts SET kernel_version = :new WHERE id % 14 = :slice RETURNING id, :old AS old_value
)
INSERT INTO host_attribute_changes (host_id, attribute, old_value, new_value, changed_at)
SELECT id, 'kernel_version', old_value, :new,
       CAST(:at AS timestamptz) + make_interval(secs => id::bigint * 7919 % 86400) FROM moved
"""
# The structure not chosen: every read cuts the kept intervals to the range.
INTERVALS_SQL = """
SELECT kernel_version, COUNT(DISTINCT host_id),
       SUM(EXTRACT(EPOCH FROM LEAST(COALESCE(valid_to, :b), :b) - GREATEST(valid_from, :a))) / 86400
FROM rollup_kernel_intervals WHERE valid_from < :b AND (valid_to IS NULL OR valid_to > :a)
GROUP BY kernel_version
"""


def panel_target() -> dict[str, object]:
    board = next(b for b in build_dashboards("postgresql", "x") if b["uid"] == "crashreg-epidemiology")
    panel = next(p for p in board["panels"] if p["title"].startswith("Crash rate by kernel version"))
    return panel["targets"][0]


def timed(step: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = step()
    return time.perf_counter() - began, result


def percentiles(times: list[float]) -> str:
    p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
    return f"p50 {statistics.median(times) * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms"


def fold_queue(connection: Connection) -> tuple[int, int]:
    """What the rollups job does with the kernels' queue: take it, compute its hosts again."""
    hosts = set(connection.execute(text("DELETE FROM rollup_kernel_hosts RETURNING host_id")).scalars())
    return len(hosts), recount_hosts(connection, hosts)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True, help="a registry bench/history.py built")
    parser.add_argument("--every", type=int, default=30, help="days between kernel rollouts")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    url = args.database_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(url)
    with engine.connect() as connection:  # one transaction, rolled back
        raw = connection.connection.driver_connection
        connection.execute(text("SET jit = off"))  # as for Grafana's role (sync/grafana/role.py)
        first, last = connection.execute(text("SELECT MIN(first_seen), now() FROM hosts")).one()
        days, rollouts = (last - first).days, (last - first).days // args.every
        seconds, _ = timed(
            lambda: connection.execute(
                text(HISTORY_SQL), {"every": args.every, "rollouts": rollouts, "years": max(1, days // 365)}
            )
        )
        connection.execute(text("UPDATE hosts SET kernel_version = :k"), {"k": f"r{rollouts}"})
        for table in ("hosts", "host_attribute_changes"):
            connection.execute(text(f"ANALYZE {table}"))
        changes, hosts = connection.execute(
            text("SELECT (SELECT count(*) FROM host_attribute_changes), (SELECT count(*) FROM hosts)")
        ).one()
        print(
            f"{hosts} hosts, {changes} attribute changes over {days} days "
            f"(kernel every {args.every} days) in {seconds:.0f}s (the triggers queueing each)"
        )

        seconds, (queued, changed) = timed(lambda: fold_queue(connection))
        sizes = connection.execute(
            text(
                "SELECT (SELECT count(*) FROM rollup_kernel_intervals), "
                "(SELECT count(*) FROM rollup_kernel_daily), "
                "(SELECT count(*) FROM rollup_kernel_gaps)"
            )
        ).one()
        print(
            f"back-fill: {changed} of {queued} hosts' intervals computed in {seconds:.1f}s: "
            f"{sizes[0]} intervals, {sizes[1]} daily rows, {sizes[2]} gap rows"
        )
        for table in ("rollup_kernel_intervals", "rollup_kernel_daily", "rollup_kernel_gaps"):
            connection.execute(text(f"ANALYZE {table}"))

        target = panel_target()
        for span in (7, 30, 90, 365):
            window = TimeRange(last - timedelta(days=span), last)
            sql = expand_target(target, {}, window)
            read = [timed(lambda sql=sql: raw.execute(sql).fetchall()) for _ in range(args.runs)]
            cut = [
                timed(
                    lambda a=window.start: connection.execute(text(INTERVALS_SQL), {"a": a, "b": last}).all()
                )
                for _ in range(args.runs)
            ]
            print(
                f"last {span:3d} days: panel {percentiles([t for t, _ in read])} "
                f"({len(read[0][1])} kernels); intervals cut at each read {percentiles([t for t, _ in cut])}"
            )

        for slice_, (label, at) in enumerate(
            (
                ("in the last 24 h", last - timedelta(days=1)),
                ("back-dated 200 days", last - timedelta(days=200)),
            )
        ):
            connection.execute(
                text(DAY_OF_CHANGES),
                {"new": f"new{slice_}", "old": f"r{rollouts}", "slice": slice_, "at": at},
            )
            seconds, (queued, changed) = timed(lambda: fold_queue(connection))
            print(
                f"a day of changes {label}: {queued} hosts folded in {seconds * 1000:.0f} ms "
                f"({changed} changed, {seconds / max(queued, 1) * 1e6:.0f} us a host)"
            )
        connection.rollback()
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
