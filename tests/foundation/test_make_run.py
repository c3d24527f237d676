"""`make run`, the README's first command: gunicorn with gunicorn.conf.py (not Flask's development
server), the token line, and the README's report answered full, then duplicate, then known."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import requests

from tests.support.http import closed_port
from tests.support.readme import readme_report

ROOT = Path(__file__).resolve().parents[2]


def test_make_run_serves_with_gunicorn_and_answers_the_readme_s_report(db_url: str) -> None:
    port, bin_dir = closed_port(), Path(sys.executable).parent
    make = subprocess.Popen(
        # -o: serve from the venv the tests run in, as it is (not remade)
        ["make", "-o", f"{bin_dir}/crashreg", "run", f"BIN={bin_dir}", f"PORT={port}"],
        cwd=ROOT, env={name: value for name, value in os.environ.items() if name != "CRASHREG_PUBLIC_URL"}
        | {"CRASHREG_DATABASE_URL": db_url, "CRASHREG_WORKERS": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    assert make.stdout is not None
    output = []
    try:
        while not any(f"Listening at: http://127.0.0.1:{port}" in line for line in output[-1:]):
            line = make.stdout.readline()
            assert line, "make run stopped:\n" + "".join(output)
            output.append(line)
        token = re.search(r"^    export TOKEN=(crs_\S+)$", "".join(output), re.MULTILINE)
        assert token, "no token line:\n" + "".join(output)
        public = re.search(r"^    export CRASHREG_PUBLIC_URL=(\S+)$", "".join(output), re.MULTILINE)
        assert public and public.group(1) == f"http://127.0.0.1:{port}", "".join(output)
        url = f"{public.group(1)}/api/v1/reports"
        headers = {"Authorization": f"Bearer {token.group(1)}"}
        report = readme_report()
        first = requests.post(url, json=report, headers=headers, timeout=60)
        again = requests.post(url, json=report, headers=headers, timeout=60)
        other = requests.post(url, json=report | {"report_id": "demo-2"}, headers=headers, timeout=60)
    finally:
        os.killpg(make.pid, signal.SIGINT)  # Ctrl-C, as in the shell that ran it
        rest, _ = make.communicate(timeout=60)
    output.append(rest)
    assert (first.status_code, first.json()["capture"]["action"]) == (201, "full")
    assert (again.status_code, again.json()["duplicate"], again.json()["event_id"]) == (
        200, True, first.json()["event_id"])
    known = (other.status_code, other.json()["known"], other.json()["signature"]["event_count"])
    assert known == (201, True, 2)
    log = "".join(output)
    assert "Starting gunicorn" in log and "development server" not in log
    assert "Shutting down: Master" in log
