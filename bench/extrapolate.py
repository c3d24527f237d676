"""The history benches' figures at several sizes, each quantity's growth, and where it lands at 100 M.

    .venv/bin/python bench/extrapolate.py DIR [--to 100000000]

Reads the JSON the history benches wrote into DIR as `<bench>-<N>.json` (bench/README.md,
"History at 10 M events", has the commands), fits each quantity to a power of the registry's
size, t = a * N^k, by least squares over log t and log N (k = 1: grows with history, k = 0:
flat), and prints a Markdown table: the figure at each size, k, and the figure at `--to`
events (t at the largest size measured times (to / largest)^k).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Figure = Callable[[dict[str, dict[str, Any]]], float | None]


def slowest(rows: str, key: str = "p95_ms") -> Callable[[dict[str, Any]], float]:
    return lambda figures: max(row[key] for row in figures[rows]) / 1000


def run_of(command: str, key: str) -> Callable[[dict[str, Any]], float | None]:
    def value(figures: dict[str, Any]) -> float | None:
        found = [run[key] for run in figures["runs"] if run["command"] == command]
        return found[-1] if found else None
    return value


# (quantity, bench, figure from its JSON, goal as text)
QUANTITIES: list[tuple[str, str, Callable[[dict[str, Any]], float | None], str]] = [
    ("epidemiology as served, largest signature (s)", "epidemiology",
     lambda f: f["spread_signature"]["median_s"], "< 1 s"),
    ("epidemiology as served, BIOS-linked signature (s)", "epidemiology",
     lambda f: f["bios_signature"]["median_s"], "< 1 s"),
    ("epidemiology, all-crashes view live (s)", "epidemiology",
     lambda f: f["spread_signature"]["with_live_crash_view_s"], ""),
    ("SELECT count(*) FROM events (s)", "epidemiology", lambda f: f["scan_s"], ""),
    ("page /signatures (s)", "pages", lambda f: f["list_s"], "< 0.5 s"),
    ("page /signatures/2, the largest (s)", "pages",
     lambda f: f["spread_signature_page"]["page_s"], "< 0.5 s"),
    ("page /signatures/1 (s)", "pages", lambda f: f["bios_signature_page"]["page_s"], "< 0.5 s"),
    ("page /events/{id} (s)", "pages", lambda f: f["event_page_s"], "< 0.5 s"),
    ("page /unfingerprinted (s)", "pages", lambda f: f["unfingerprinted_s"], "< 0.5 s"),
    ("slowest Grafana panel, p95 (s)", "grafana", slowest("queries"), "< 0.5 s"),
    ("Grafana rollups refresh (s)", "grafana", lambda f: f["rollup_refresh_ms"] / 1000, ""),
    ("slowest alert rule, p95 (s)", "alerts", slowest("rules"), "< 0.5 s"),
    ("storage gc, real run (s)", "gc", run_of("crashreg storage gc", "seconds"), ""),
    ("storage gc, peak RSS (MB)", "gc", run_of("crashreg storage gc", "peak_rss_mb"), "flat"),
    ("signatures rebuild, events fingerprinted a second", "rebuild",
     lambda f: f["runs"][-1]["events_per_s"], ""),
    ("signatures rebuild, peak RSS (MB)", "rebuild",
     lambda f: max(run["peak_rss_mb"] for run in f["runs"]), "flat"),
    ("storm one-shot, throughput x empty registry", "storm",
     lambda f: f["one-shot"]["rps_x_empty"], ">= 0.9"),
    ("storm keep-alive, throughput x empty registry", "storm",
     lambda f: f["keep-alive"]["rps_x_empty"], ">= 0.9"),
    ("storm one-shot, p99 (s)", "storm", lambda f: f["one-shot"]["p99_ms"] / 1000, "< 0.25 s"),
    ("storm keep-alive, p99 (s)", "storm", lambda f: f["keep-alive"]["p99_ms"] / 1000, "< 0.25 s"),
]


# Ratios of two runs of the same sitting: fitted (k says whether they drift with size), not
# carried to 100 M (a ratio above 1 is the machine's drift, not a property of history).
NOT_CARRIED = ("throughput x empty registry",)


def exponent(points: list[tuple[int, float]]) -> float:
    """k of t = a * N^k, least squares over (log N, log t)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(t, 1e-6)) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--to", type=int, default=100_000_000)
    args = parser.parse_args()
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(args.dir.glob("*-*.json")):
        match = re.fullmatch(r"(\w+)-(\d+)\.json", path.name)
        if match:
            found.setdefault(match[1], {})[int(match[2])] = json.loads(path.read_text())
    sizes = sorted({n for runs in found.values() for n in runs})
    print("| quantity | " + " | ".join(f"{n / 1e6:g} M" for n in sizes)
          + f" | k | {args.to / 1e6:g} M (extrapolated) | goal |")
    print("|---" * (len(sizes) + 4) + "|")
    for name, bench, figure, goal in QUANTITIES:
        points = []
        for n in sizes:
            figures = found.get(bench, {}).get(n)
            value = figure(figures) if figures else None
            if value is not None:
                points.append((n, float(value)))
        if not points:
            continue
        cells = {n: f"{t:.3g}" for n, t in points}
        k = exponent(points) if len(points) > 1 else float("nan")
        largest, at_largest = points[-1]
        projected = at_largest * (args.to / largest) ** k if len(points) > 1 else float("nan")
        carried = "" if any(part in name for part in NOT_CARRIED) else f"{projected:.3g}"
        print(f"| {name} | " + " | ".join(cells.get(n, "") for n in sizes)
              + f" | {k:.2f} | {carried} | {goal} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
