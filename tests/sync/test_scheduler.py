"""`crashreg scheduler` ends on SIGTERM or SIGINT, taken by its main thread whatever its job
threads are doing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import stopped, until

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def blocked(status: str) -> int:
    """A thread's blocked-signal mask, from its /proc status."""
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)


@pytest.mark.parametrize("stop_signal", STOP_SIGNALS, ids=lambda number: signal.Signals(number).name)
def test_a_stop_signal_stays_pending_until_the_main_thread_takes_it(db_url: str, stop_signal: int) -> None:
    """Every thread but the main one blocks the stop signals, and the main one waits for them in
    sigtimedwait (which unblocks them while it waits): the kernel keeps one pending until the
    main thread takes it, so neither a job thread nor a Python handler waiting for the main
    thread's next bytecode can hold the stop back."""
    unconfigured = {name: value for name, value in os.environ.items()
                    if not name.startswith(("CRASHREG_JIRA", "CRASHREG_GRAFANA", "CRASHREG_ARCHIVE"))}
    process = subprocess.Popen([sys.executable, "-m", "registry", "scheduler"], stderr=subprocess.PIPE,
                               text=True, env=unconfigured | {"CRASHREG_DATABASE_URL": db_url})
    try:
        said = until(process, "scheduler started")
        tasks = Path(f"/proc/{process.pid}/task")
        masks = [blocked((task / "status").read_text()) for task in tasks.iterdir()
                 if task.name != str(process.pid)]
    finally:
        process.send_signal(stop_signal)
        rest = stopped(process)
    stop_bits = sum(1 << (number - 1) for number in STOP_SIGNALS)
    assert masks and {mask & stop_bits for mask in masks} == {stop_bits}, said
    assert process.returncode == 0, rest
    assert f'"stopping", "signal": "{signal.Signals(stop_signal).name}"' in rest, rest
    assert "scheduler stopped" in rest
    # Started without Jira or Grafana settings, it says which jobs wait for them.
    assert "off until configured: archive, grafana-sync, jira-reconcile, jira-sync" in said
