"""A test's own processes: what they say on stderr until a line, and how they end."""

from __future__ import annotations

import subprocess

STOP_S = 300  # a signalled gunicorn or scheduler ends well within it, even on a loaded machine


def until(process: subprocess.Popen[str], text: str) -> str:
    """The process's stderr up to the line holding `text` (its end: a failure, with what it said)."""
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if text in line:
            return "".join(lines)
    process.wait(timeout=60)
    raise AssertionError(f"{text!r} never came, exit {process.returncode}:\n{''.join(lines)}")


def stopped(process: subprocess.Popen[str]) -> str:
    """The rest of a process's stderr once it has ended (signalled); killed if it does not end
    in STOP_S, its stderr then in the failure."""
    try:
        return process.communicate(timeout=STOP_S)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"still running {STOP_S} s after SIGTERM:\n{process.communicate()[1]}") from None
