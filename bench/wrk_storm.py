"""The crash storm under an independent load generator: wrk, with bench/storm.lua.

    .venv/bin/python bench/wrk_storm.py [--hosts 1500] [--concurrency 64] [--clients both] [--json OUT]

The same storm as bench/storm.py (its reports: one real syzkaller log varied per host, 10% of the
requests resends; its gunicorn, database and floor route), sent by wrk (Debian package `wrk`)
instead of storm.py's own client: one wrk thread keeps `--concurrency` connections busy, each
report sent once in order, with a "Connection: close" header per report (one-shot, as crash
kernels send) or on kept connections (keep-alive); first to the floor route, then to the
registry, each client pattern on a fresh database and gunicorn. wrk's latency runs from a
request's first byte written to its answer (not the connect). The CPU of gunicorn's workers and
PostgreSQL's backends a request is read from /proc as storm.py does; wrk's own is not counted.
Checked from the database afterwards: every report stored once (none lost), one event per host
(none doubled), exactly K full captures. Prints PASS or MISS per goal; exit status 1 when one
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import storm  # noqa: E402

SCRIPT = ROOT / "bench/storm.lua"


def run_wrk(port: int, path: str, bodies: Path, token: str, pattern: str, concurrency: int) -> dict[str, Any]:
    """wrk's figures (the JSON line storm.lua's done() writes) for one pass over the bodies."""
    command = [
        "wrk", "-t1", f"-c{concurrency}", "-d300s", "--timeout", "30s", "-s", str(SCRIPT),
        f"http://127.0.0.1:{port}{path}", "--", str(bodies), token, pattern,
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as wrk:
        assert wrk.stdout is not None
        lines = []
        for line in wrk.stdout:
            lines.append(line)
            if line.startswith("storm answered"):
                wrk.send_signal(signal.SIGINT)  # wrk stops and reports the time it ran, not its -d
    if wrk.returncode != 0:
        raise SystemExit(f"wrk failed: {''.join(lines)}")
    return json.loads(next(line for line in lines if line.startswith('{"requests"')))


def run_pattern(
    args: Any, bodies: Path, report_ids: set[str], pattern: str
) -> tuple[dict[str, Any], dict[str, bool]]:
    """One pass of wrk to the floor route, one to the registry, on a fresh database and gunicorn."""
    load_at_start = os.getloadavg()[0]
    requests = len(report_ids) + args.resends
    with storm.fresh_database() as (url, token), storm.serving(
        url, args.gunicorn["workers"], token, args.concurrency, pattern
    ) as (server, port):
        settings = storm.Settings(database_url=url)
        phases = {}
        for name, path in (("floor", "/floor/"), ("storm", "/api/v1/reports")):
            figures, cpu = storm.measured(
                server, url, lambda path=path: run_wrk(port, path, bodies, token, pattern, args.concurrency)
            )
            figures["rps"] = round(figures["requests"] / (figures["duration_us"] / 1e6), 1)
            cpu_a_request = (cpu.workers + cpu.postgres) / figures["requests"]
            figures["cpu_ms_per_request"] = round(cpu_a_request * 1000, 2)
            phases[name] = figures
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        stored = storm.stored_storm(url)
    floor, registry = phases["floor"], phases["storm"]
    figures = {
        "clients": pattern,
        "load_average_at_start": round(load_at_start, 2),
        "requests": requests,
        "floor": floor,
        "registry": registry,
        "rps_x_floor": round(registry["rps"] / floor["rps"], 3),
        "cpu_x_floor": round(registry["cpu_ms_per_request"] / floor["cpu_ms_per_request"], 3),
        "lost": len(report_ids - stored.reports.keys()),
        "duplicates": stored.events - stored.hosts,
        "full_captures": stored.full,
        "k": settings.full_captures_per_window,
    }
    goals = {
        "p99 < 250 ms": registry["p99_ms"] < storm.GOALS["p99_ms"],
        "throughput >= 2/3 x the floor route's": figures["rps_x_floor"] >= storm.GOALS["rps_x_floor"],
        "CPU a report (workers + PostgreSQL) <= 1.5 x the floor route's": (
            figures["cpu_x_floor"] <= storm.GOALS["cpu_x_floor"]
        ),
        "no error": not any(registry["errors"].values()) and not any(floor["errors"].values()),
        "no lost report": figures["lost"] == 0,
        "no duplicate": figures["duplicates"] == 0 and stored.hosts == len(report_ids),
        "exactly K full captures": figures["full_captures"] == figures["k"],
    }
    return figures, goals


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--log", type=Path, default=storm.DEFAULT_LOG, help="console log of the storm's bug")
    parser.add_argument("--workers", type=int, help="gunicorn workers (default: cores + 1)")
    parser.add_argument("--clients", default="both", choices=(*storm.CLIENT_PATTERNS, "both"))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install -y wrk)")
    args.gunicorn = storm.gunicorn_settings(args.workers, None)
    template = args.log.read_text(errors="replace").partition("\n\n")[2] or args.log.read_text()
    bodies = storm.storm_requests(template, args.hosts)
    args.resends = len(bodies) - args.hosts
    with tempfile.TemporaryDirectory(prefix="crashreg-wrk-") as folder:
        path = Path(folder) / "bodies.jsonl"
        path.write_text("".join(json.dumps(body) + "\n" for body in bodies))
        report_ids = {body["report_id"] for body in bodies}
        patterns = storm.CLIENT_PATTERNS if args.clients == "both" else (args.clients,)
        results = {pattern: run_pattern(args, path, report_ids, pattern) for pattern in patterns}
    print(json.dumps({pattern: figures for pattern, (figures, _) in results.items()}, indent=2))
    headlines = {}
    for pattern, (figures, _) in results.items():
        registry = figures["registry"]
        headlines[pattern] = (
            f"{pattern}: p50 {registry['p50_ms']:.0f} ms, p99 {registry['p99_ms']:.0f} ms, "
            f"{registry['rps']:.0f} req/s ({figures['rps_x_floor']:.2f} x the floor route's), CPU a report "
            f"{figures['cpu_x_floor']:.2f} x the floor route's, load average at its start "
            f"{figures['load_average_at_start']}"
        )
    return storm.verdict(results, headlines, args.json)


if __name__ == "__main__":
    sys.exit(main())
