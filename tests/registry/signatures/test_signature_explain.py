"""`crashreg signature --explain`, as a real process: how each fingerprint was made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from registry.fingerprint import analyse_console_log
from tests.support import DATA

FIXTURES = DATA / "agents"
LOG = FIXTURES / "ext4_bug_on.log"  # guilty from RIP, used callers, ret_from_fork skipped
CONTRACT_FIELDS = ("file", "fingerprint", "title", "kind", "function", "frames", "labels")


def signature(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command needs no database; it gets an unused SQLite URL all the same."""
    env = os.environ | {"CRASHREG_DATABASE_URL": f"sqlite:///{tmp_path / 'unused.db'}"}
    return subprocess.run([sys.executable, "-m", "registry", "signature", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_explain_shows_kind_rule_section_each_frame_and_the_guilty_one(tmp_path: Path) -> None:
    expected = analyse_console_log(LOG.read_text())
    assert expected is not None
    explanation = expected.explanation
    decisions = {frame["decision"] for frame in explanation["frames"]}
    assert {"guilty", "skipped"} <= decisions, "the fixture must show both"
    done = signature(tmp_path, "--explain", str(LOG))
    assert done.returncode == 0, done.stderr
    head, *lines = done.stdout.splitlines()
    assert head == f"{LOG}: {expected.fingerprint} {expected.title}"
    assert f"  kind        {explanation['kind']} (rule: {explanation['kind_rule']})" in lines
    assert f"  headline    {explanation['headline']}" in lines
    assert f"  frames from {explanation['section']}" in lines
    frame_lines = [line for line in lines if " #" in line]
    assert len(frame_lines) == len(explanation["frames"])
    for index, (line, frame) in enumerate(zip(frame_lines, explanation["frames"], strict=True)):
        words = line.split()
        assert words[1:4] == [f"#{index}", frame["decision"], frame["function"]], line
        assert words[0] == {"guilty": "=>", "used": "+", "skipped": "-"}[frame["decision"]]
        assert (f"({frame['rule']})" in line) == bool(frame["rule"]), line
        assert (f"[{frame['module']}]" in line) == bool(frame["module"]), line
    [guilty] = [line for line in frame_lines if line.lstrip().startswith("=>")]
    assert expected.function in guilty and explanation["guilty"] == frame_lines.index(guilty)
    assert f"  flags       {', '.join(explanation['flags']) or 'none'}" in lines


def test_explain_json_adds_the_explanation_to_the_contract_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    plain = signature(tmp_path, "--json", str(LOG))
    explained = signature(tmp_path, "--json", "--explain", str(LOG), str(empty))
    assert plain.returncode == explained.returncode == 0, explained.stderr
    contract = json.loads(plain.stdout)
    assert "explanation" not in contract
    crash, nothing = (json.loads(line) for line in explained.stdout.splitlines())
    assert {k: crash[k] for k in contract} == contract and set(CONTRACT_FIELDS) <= set(crash)
    assert crash["explanation"] == analyse_console_log(LOG.read_text()).explanation
    assert (nothing["fingerprint"], nothing["explanation"]) == (None, None)
    assert set(CONTRACT_FIELDS) <= set(nothing)
