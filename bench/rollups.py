"""What the rollups cost ingest and how fast they are folded (PostgreSQL).

    .venv/bin/python bench/rollups.py [--events 100000] [--hosts 20000] [--batch 20000] [--rounds 3]
        [--json OUT]

bench/epidemiology.py's fleet (`--events`, `--hosts`), then per round: `--batch` events copied
into `events` in one INSERT ... SELECT with the rollups' insert trigger on, and again with it
disabled, each copy deleted after (its deletes queue too, and are folded away). The difference
over the batch is what the trigger adds to each stored event (the queue row, the signature's
kind looked up), beside what an INSERT of the event costs without it. The queued inserts of
the triggered copy are folded (`registry/rollups/fold.py`, as the scheduler's rollups job
does), timed as changes per second. Medians over the rounds; the figures are per event, so
they compare with the storm's PostgreSQL CPU per report (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import epidemiology as fleet_bench  # noqa: E402 - bench/epidemiology.py builds the fleet

from registry.db import Database  # noqa: E402
from registry.rollups.fold import fold  # noqa: E402

# Every column a stored event has but its id; the copy's boot_key gets a suffix (unique per host).
COLUMNS = (
    "host_id, hostname, boot_id, signature_id, fingerprint, algorithm_version, title, crashed_at, "
    "received_at, uptime_s, repeats, first_source, sources, capture_action, capture_reason, physical_host, "
    "region, cluster, sku, cpu_model, microcode, bios_version, bmc_version, kernel_version, os_image, "
    "memory_gb, hypervisor, gpu_driver, labels"
)
COPY = (
    f"INSERT INTO events (boot_key, {COLUMNS}) "
    f"SELECT boot_key || :suffix, {COLUMNS} FROM events WHERE id <= :batch"
)
TRIGGER = "events_rollup_insert"


def copy_seconds(database: Database, batch: int, suffix: str, triggered: bool) -> float:
    with database.engine.begin() as connection:
        if not triggered:
            connection.execute(text(f"ALTER TABLE events DISABLE TRIGGER {TRIGGER}"))
        started = time.perf_counter()
        connection.execute(text(COPY), {"suffix": suffix, "batch": batch})
        elapsed = time.perf_counter() - started
        if not triggered:
            connection.execute(text(f"ALTER TABLE events ENABLE TRIGGER {TRIGGER}"))
    return elapsed


def remove_copies(database: Database) -> None:
    with database.engine.begin() as connection:
        connection.execute(text("DELETE FROM events WHERE boot_key LIKE '%-copy-%'"))
    fold(database)
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE events"))


def measure(database: Database, batch: int, rounds: int) -> dict[str, Any]:
    on, off, fold_rates = [], [], []
    for round_number in range(rounds):
        on.append(copy_seconds(database, batch, f"-copy-on-{round_number}", triggered=True))
        started = time.perf_counter()
        outcome = fold(database)
        fold_rates.append(outcome.changes / (time.perf_counter() - started))
        off.append(copy_seconds(database, batch, f"-copy-off-{round_number}", triggered=False))
        remove_copies(database)
        print(f"round {round_number + 1}/{rounds}: with the trigger {on[-1]:.2f} s, without "
              f"{off[-1]:.2f} s, fold {fold_rates[-1]:.0f} changes/s", file=sys.stderr)
    with_us, without_us = (statistics.median(s) / batch * 1e6 for s in (on, off))
    return {
        "insert_us_per_event_with_trigger": round(with_us, 1),
        "insert_us_per_event_without_trigger": round(without_us, 1),
        "trigger_us_per_event": round(with_us - without_us, 1),
        "fold_changes_per_s": round(statistics.median(fold_rates)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with fleet_bench.built_database("crashreg_bench_rollups", args.hosts, args.events) as url:
        database = Database(url)
        figures = {"events": args.events, "batch": args.batch, "rounds": args.rounds,
                   **measure(database, min(args.batch, args.events), args.rounds)}
        database.dispose()
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
