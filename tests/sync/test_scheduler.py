"""`crashreg scheduler` ends on SIGTERM whichever of its threads the kernel hands the signal to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.processes import stopped, until

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def blocked(status: str) -> int:
    """A thread's blocked-signal mask, from its /proc status."""
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)


def test_only_the_main_thread_takes_the_stop_signals(db_url: str) -> None:
    """A stop signal sent to a job thread only flags Python's handler, which runs in the main
    thread when its wait ends (an hour later): the scheduler's threads block the stop signals,
    so the kernel hands them to the main thread, which stops at once."""
    process = subprocess.Popen([sys.executable, "-m", "registry", "scheduler"], stderr=subprocess.PIPE,
                               text=True, env=os.environ | {"CRASHREG_DATABASE_URL": db_url})
    try:
        said = until(process, "scheduler started")
        tasks = Path(f"/proc/{process.pid}/task")
        masks = {int(task.name): blocked((task / "status").read_text()) for task in tasks.iterdir()}
    finally:
        process.send_signal(signal.SIGTERM)
        rest = stopped(process)
    stop_bits = sum(1 << (number - 1) for number in STOP_SIGNALS)
    threads = {tid: mask & stop_bits for tid, mask in masks.items()}
    del threads[process.pid]  # the main thread: it takes them (it stopped, below)
    assert threads and set(threads.values()) == {stop_bits}, said
    assert process.returncode == 0 and "scheduler stopped" in rest
