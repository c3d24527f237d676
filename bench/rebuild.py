"""`crashreg signatures rebuild` over a kept history: its memory, its progress, a stopped run continued.

    .venv/bin/python bench/rebuild.py --history 10000000 [--first 600] [--second 300] [--json OUT]

The real rebuild (not --dry-run) of bench/history.py's registry, in a child process as an operator
runs it, for `--first` seconds; then it is killed (SIGKILL: an OOM kill, a lost machine) and run
again for `--second` seconds and killed again. Sampled every second: the child's resident memory
(VmRSS, /proc) and the progress lines it prints (events fingerprinted so far). Reported per run:
events fingerprinted, their rate, the RSS at start-up, at each 10% of the run and its peak; for
the second run, where it started (the goal: where the first stopped, at most one chunk of events
read again) and whether memory stays flat over the events. Exit status 1 when the second run did not
continue the first or its memory grew by more than `GROWTH_MB` from its first progress line to
its last.

Fingerprinting every stored report is the rebuild's long first phase (hours at 10 M here); stopped
there, a rebuild has changed no signature: it has written its checkpoint rows
(`rebuild_fingerprints`) and the current engine's explanation of each event it read. Afterwards the
checkpoint rows are deleted, so the kept registry measures as before (its events keep their
explanations, and, with autovacuum off, the dead row versions those updates left).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from history import history_arguments, history_url  # noqa: E402

from registry.signatures.rebuild import CHUNK  # noqa: E402

GROWTH_MB = 50  # the RSS a run may gain between its first and last progress line
PROGRESS = re.compile(r"re-fingerprinting events: (\d+) of (\d+)")


@dataclass
class Run:
    seconds: float
    started_at_event: int = -1  # events done when its first progress line came (a continued run's)
    fingerprinted: int = 0  # events done at its last progress line
    events_per_s: float = 0.0
    rss_mb: list[float] = field(default_factory=list)  # one a second
    rss_at_progress_mb: list[tuple[int, float]] = field(default_factory=list)  # (events done, RSS)
    peak_rss_mb: float = 0.0
    lines: list[str] = field(default_factory=list)


def rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return None
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match[1]) / 1024 if match else None


def run_for(url: str, seconds: float) -> Run:
    """The rebuild in a child for `seconds` (killed then), its progress and memory sampled."""
    env = os.environ | {"CRASHREG_DATABASE_URL": url}
    child = subprocess.Popen([sys.executable, "-m", "registry", "signatures", "rebuild"], env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run = Run(seconds)
    lock = threading.Lock()

    def read_progress() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            line = line.rstrip()
            match = PROGRESS.search(line)
            with lock:
                run.lines.append(line)
                if match:
                    done, memory = int(match[1]), rss_mb(child.pid)
                    if run.started_at_event < 0:
                        run.started_at_event = done
                    run.fingerprinted = done
                    if memory is not None:
                        run.rss_at_progress_mb.append((done, round(memory, 1)))
            print(f"  {line[:150]}", file=sys.stderr, flush=True)

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    started = time.monotonic()
    while time.monotonic() - started < seconds and child.poll() is None:
        memory = rss_mb(child.pid)
        if memory is not None:
            run.rss_mb.append(round(memory, 1))
        time.sleep(1)
    if child.poll() is None:
        child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join(timeout=10)
    elapsed = time.monotonic() - started
    run.seconds = round(elapsed, 1)
    run.peak_rss_mb = max(run.rss_mb, default=0.0)
    if run.started_at_event >= 0:
        run.events_per_s = round((run.fingerprinted - run.started_at_event) / elapsed, 1)
    return run


def checkpoint_rows(url: str, delete: bool = False) -> int:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as connection:
        count = connection.execute("SELECT count(*) FROM rebuild_fingerprints").fetchone()[0]
        if delete:
            connection.execute("DELETE FROM rebuild_fingerprints")
        return int(count)


def deciles(values: list[float]) -> list[float]:
    return [values[min(len(values) - 1, len(values) * tenth // 10)] for tenth in range(11)] if values else []


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--first", type=float, default=600, help="seconds before the first run is killed")
    parser.add_argument("--second", type=float, default=300, help="seconds before the second run is killed")
    parser.add_argument("--json", type=Path)
    history_arguments(parser)
    args = parser.parse_args()
    url = history_url(args)
    if url is None:
        raise SystemExit("--history N or --database-url URL: the registry to rebuild")
    if checkpoint_rows(url):
        raise SystemExit("rebuild_fingerprints has rows: a rebuild is under way on this registry")
    try:
        first = run_for(url, args.first)
        kept = checkpoint_rows(url)
        second = run_for(url, args.second)
    finally:
        checkpoint_rows(url, delete=True)
    # The second run starts at the events whose checkpoint rows the first committed (a chunk a
    # transaction): what the first printed last is at most one chunk past them.
    continued = second.started_at_event == kept and first.fingerprinted - kept < CHUNK
    progress = second.rss_at_progress_mb
    growth = progress[-1][1] - progress[0][1] if len(progress) > 1 else 0.0
    figures = {
        "database": url.rsplit("/", 1)[1],
        "runs": [
            {key: value for key, value in asdict(run).items() if key not in ("rss_mb", "lines")}
            | {"rss_deciles_mb": deciles(run.rss_mb)}
            for run in (first, second)
        ],
        "checkpoint_rows_after_first": kept,
        "second_continued_the_first": continued,
        "second_rss_growth_mb": round(growth, 1),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    verdicts = {
        "the second run continued where the first was killed": continued,
        f"memory flat over the events (grew {growth:.0f} MB, at most {GROWTH_MB})": growth <= GROWTH_MB,
        "progress shown": first.fingerprinted > 0 and second.fingerprinted > second.started_at_event,
    }
    for verdict, passed in verdicts.items():
        print(f"{'PASS' if passed else 'MISS'}  {verdict}")
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
