"""A killed test run leaves no lab process behind: QEMU and the registry's gunicorn are started
so that they get SIGTERM when the test process that started them dies (lab.DIES_WITH_THE_TEST)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab.lab import DIES_WITH_THE_TEST
from tests.support.http import SERVER_POLL_S

# a stand-in for a pytest worker: starts the command, says its pid, waits
STARTER = "import subprocess, sys; c = subprocess.Popen(sys.argv[1:]); print(c.pid, flush=True); c.wait()"


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may never reap one)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not DIES_WITH_THE_TEST, reason="setpriv (util-linux) is not installed")
def test_a_lab_process_dies_with_the_process_that_started_it() -> None:
    test = subprocess.Popen([sys.executable, "-c", STARTER, *DIES_WITH_THE_TEST, "sleep", "600"],
                            stdout=subprocess.PIPE, text=True)
    assert test.stdout is not None
    child = int(test.stdout.readline())
    # setpriv sets the signal, then becomes the command: until then a parent's death goes unseen
    # (a lab process is killed long after it started; this test must not race its start).
    deadline = time.monotonic() + 30
    while command_of(child) != "sleep" and time.monotonic() < deadline:
        time.sleep(SERVER_POLL_S)
    assert running(child) and command_of(child) == "sleep"
    test.kill()  # as a killed pytest worker dies: no teardown runs
    test.wait()
    while running(child) and time.monotonic() < deadline:
        time.sleep(SERVER_POLL_S)
    assert not running(child)
