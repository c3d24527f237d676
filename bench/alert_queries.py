"""Every alert rule's query on PostgreSQL with a million events: what one evaluation costs.

    .venv/bin/python bench/alert_queries.py [--events 1000000] [--hosts 20000] [--runs 20] [--json OUT]

The fleet of bench/grafana_queries.py (bench/epidemiology.py's hosts, events over 300
signatures and 90 days, plus captures, regressions, Jira links, ...), and a recent rollout
(10% of the hosts move to kernel k9 two weeks before the end), so that the crash-rate rules
compare a rollout's crashes with the rest of the fleet's (the costly case: every crash since
the rollout is read).
Each rule's query is expanded as Grafana's PostgreSQL backend expands it for an evaluation at
the end of the data, then run `--runs` times as the read-only role. Reported per rule: p50 and
p95 in ms, and p95 as a ratio to the baseline of the same run, one sequential
`SELECT count(*) FROM events`. Grafana evaluates the whole group every
CRASHREG_ALERT_INTERVAL_S (300 s), so the sum of the p50s is what one evaluation costs the
database. Also what the crash-rate rules add to the rollups the scheduler's grafana-rollups
job refreshes every 5 minutes: `rpt_daily_breakdown` grouped by 7 dimensions (migration 0017)
against 5 (0011), each its defining query run to completion. Exit status 1 if a p95 misses
500 ms. `--database-url URL` / `--history N` measure a kept registry (bench/history.py's, its
rollout the attribute history's) instead, evaluated at the day after its last crash, each rule
beside its p95 on an empty registry (1,000 hosts, no event) in the same run.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import grafana_queries as panels_bench  # noqa: E402 - and bench/grafana_queries.py what Grafana reads

from dashboards import FOLDER_UID, build_dashboards  # noqa: E402
from dashboards.alerts import build_rule_group  # noqa: E402
from dashboards.dialects import POSTGRESQL  # noqa: E402
from registry.config import AlertThresholds  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.rollups.fold import fold  # noqa: E402
from sync.grafana.role import ensure_readonly_role  # noqa: E402
from testkit.grafana_sql import TimeRange, expand_target  # noqa: E402

# The migration that defines rpt_daily_breakdown's two shapes.
_spec = importlib.util.spec_from_file_location(
    "grafana_alerts_migration", ROOT / "migrations/versions/20261201_0017_grafana_alerts.py"
)
rollup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rollup)

ROLLOUT_SQL = (
    """INSERT INTO host_attribute_changes (host_id, attribute, old_value, new_value, changed_at)
       SELECT id, 'kernel_version', kernel_version, 'k9', timestamptz '2026-10-16'
       FROM hosts WHERE id % 10 = 5""",
    "UPDATE hosts SET kernel_version = 'k9' WHERE id % 10 = 5",
    "UPDATE events SET kernel_version = 'k9' "
    "WHERE host_id % 10 = 5 AND crashed_at >= timestamptz '2026-10-16'",
    "ANALYZE",
)


def add_rollout(url: str) -> dict[str, float]:
    """The rollout, then what Grafana's refresh does before the rules read: the rollout's
    changes to events folded into the rollups (timed: changes per second)."""
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        for statement in ROLLOUT_SQL:
            conn.execute(statement)
    database = Database(url)
    started = time.perf_counter()
    outcome = fold(database)
    elapsed = time.perf_counter() - started
    database.dispose()
    return {"fold_changes": outcome.changes, "fold_s": round(elapsed, 2),
            "fold_changes_per_s": round(outcome.changes / elapsed)}


def measure(url: str, role: str, runs: int, end: datetime = panels_bench.DATA_END) -> dict[str, Any]:
    database = Database(url)
    role_url = make_url(url).set(drivername="postgresql", username=role, password=secrets.token_hex(12))
    ensure_readonly_role(database.engine, role_url.render_as_string(hide_password=False))
    database.dispose()
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as owner:
        baseline = statistics.median(panels_bench.timed(owner, "SELECT count(*) FROM events", runs))
        breakdown = {
            dimensions: statistics.median(
                panels_bench.timed(
                    owner, f"SELECT count(*) FROM ({rollup._breakdown('postgresql', names)}) q", 3
                )
            )
            for dimensions, names in (("0011", rollup.DIMENSIONS_0011), ("0017", rollup.DIMENSIONS))
        }
    boards = build_dashboards("postgresql", "https://crashreg.example")
    group = build_rule_group(
        POSTGRESQL, "https://crashreg.example", AlertThresholds(), True, boards, FOLDER_UID
    )
    results = []
    with psycopg.connect(role_url.render_as_string(hide_password=False), autocommit=True) as conn:
        for rule in group["rules"]:
            query = rule["data"][0]
            span = TimeRange(end - timedelta(seconds=query["relativeTimeRange"]["from"]), end)
            samples = panels_bench.timed(conn, expand_target(query["model"], {}, span), runs)
            results.append(
                {
                    "rule": rule["uid"],
                    "p50_ms": round(statistics.median(samples), 1),
                    "p95_ms": round(panels_bench.p95(samples), 1),
                    "p95_to_scan": round(panels_bench.p95(samples) / baseline, 3),
                }
            )
    return {
        "scan_ms": round(baseline, 1),
        "breakdown_ms": {key: round(value, 1) for key, value in breakdown.items()},
        "rules": results,
    }


def main() -> int:
    args = panels_bench.arguments(__doc__)
    from history import history_url

    kept = history_url(args)
    if kept:
        with panels_bench.read_only_role(kept, "crashreg_alerts_bench") as (url, role):
            figures = {"database": url.rsplit("/", 1)[1], "runs": args.runs,
                       **measure(url, role, args.runs, panels_bench.data_end(url))}
        with panels_bench.bench_database("crashreg_bench_alerts", 1000, 0) as (url, role):  # the baseline
            empty = measure(url, role, args.runs)
        for row, baseline in zip(figures["rules"], empty["rules"], strict=True):
            row["empty_p95_ms"] = baseline["p95_ms"]
    else:
        with panels_bench.bench_database("crashreg_bench_alerts", args.hosts, args.events) as (url, role):
            folded = add_rollout(url)
            figures = {"events": args.events, "hosts": args.hosts, "runs": args.runs,
                       **folded, **measure(url, role, args.runs)}
    width = max(len(r["rule"]) for r in figures["rules"])
    print(f"{'rule':<{width}}  p50 ms  p95 ms  p95/scan   (scan: {figures['scan_ms']} ms)")
    for row in figures["rules"]:
        print(
            f"{row['rule']:<{width}}  {row['p50_ms']:6.1f}  {row['p95_ms']:6.1f}  {row['p95_to_scan']:8.3f}"
        )
    total = sum(row["p50_ms"] for row in figures["rules"])
    print(
        f"one evaluation of the group (sum of p50s): {total:.1f} ms = {total / figures['scan_ms']:.2f} x scan"
    )
    before, after = figures["breakdown_ms"]["0011"], figures["breakdown_ms"]["0017"]
    print(f"rpt_daily_breakdown's old defining query: {before} ms with 0011's 5 dimensions, {after} ms "
          "with 0017's 7")
    if "fold_changes" in figures:  # the generated registry's rollout (a kept one adds none)
        print(f"the rollout folded into the rollups: {figures['fold_changes']} changes in "
              f"{figures['fold_s']} s ({figures['fold_changes_per_s']}/s)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0 if all(r["p95_ms"] < panels_bench.GOAL_MS for r in figures["rules"]) else 1


if __name__ == "__main__":
    sys.exit(main())
