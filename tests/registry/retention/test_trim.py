"""Trimmed console logs keep the crash report: the same fingerprint, the header, its lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.fingerprint import analyse_report
from registry.fingerprint.console import MAX_REPORT_LINES, parse_console_log
from registry.retention.trim import LINES_BEFORE, TAIL_LINES, trim_log

GOLDEN = Path(__file__).resolve().parents[2] / "support" / "data" / "golden"
BOOT = "".join(
    f"[    {i / 1000:.6f}] pci 0000:{i % 256:02x}:00.0: reg 0x10: [mem 0x{i:08x}]\n" for i in range(3000)
)
AFTER = "".join(f"[ 9999.{i:06d}] kdump: saving vmcore, {i} pages\n" for i in range(1200))


def golden(name: str) -> str:
    """A golden log without its header block (TITLE:, KIND:, ...)."""
    return (GOLDEN / name).read_text().split("\n\n", 1)[1]


@pytest.mark.parametrize(
    "name",
    [
        "production/mlx5-null-deref-interleaved.log",
        "production/oom-panic.log",
        "production/mce-memory-uncorrected.log",
        "kinds/hung-task.log",
        "kinds/lockdep.log",
        "lab/soft_lockup_1.log",
    ],
)
def test_a_trimmed_log_fingerprints_as_the_whole_one_and_keeps_the_header(name: str) -> None:
    report = golden(name)
    log = BOOT + report + AFTER
    whole = analyse_report(log, None)
    trimmed = trim_log(log)
    assert whole is not None and trimmed is not None
    assert analyse_report(trimmed.text, None).fingerprint == whole.fingerprint  # type: ignore[union-attr]
    assert len(trimmed.text) < len(log) / 4
    lines = log.splitlines(keepends=True)
    assert trimmed.total_lines == len(lines) and trimmed.whole_chars == len(log)
    # the kept text is the whole log's lines from first_line on, unchanged
    assert trimmed.text == "".join(
        lines[trimmed.first_line - 1 : trimmed.first_line - 1 + trimmed.text.count("\n")]
    )
    crash = parse_console_log(log)
    assert crash is not None
    header = next(i for i, line in enumerate(lines) if crash.header in line)
    assert trimmed.first_line == header + 1 - LINES_BEFORE  # the header and the excerpt's lines above
    assert trimmed.text.count("\n") <= LINES_BEFORE + MAX_REPORT_LINES


def test_the_lines_before_the_header_are_the_pages_excerpt() -> None:
    log = BOOT + golden("kinds/null-deref.log")
    lines = log.splitlines()
    trimmed = trim_log(log)
    assert trimmed is not None
    header = next(i for i, line in enumerate(lines) if "BUG: kernel NULL pointer dereference" in line)
    assert trimmed.first_line == header + 1 - LINES_BEFORE
    assert trimmed.text.endswith(log.splitlines(keepends=True)[-1])  # the short report is whole


def test_a_log_without_a_crash_keeps_its_tail_and_its_stack_fingerprint() -> None:
    stack = {
        "executable": "/usr/bin/trainer",
        "signal": "SIGSEGV",
        "frames": [{"function": "step", "module": "libtrain.so"}],
    }
    log = BOOT
    trimmed = trim_log(log, stack)
    assert trimmed is not None
    assert trimmed.text == "".join(log.splitlines(keepends=True)[-TAIL_LINES:])
    assert analyse_report(trimmed.text, stack).fingerprint == analyse_report(log, stack).fingerprint  # type: ignore[union-attr]


def test_nothing_to_trim_in_a_short_log() -> None:
    assert trim_log(golden("kinds/null-deref.log")) is None
    assert trim_log("") is None


def test_a_log_the_trim_would_misread_stays_whole() -> None:
    """The header's text inside an earlier line the engine does not read (past its line
    length limit): the span found there would lose the crash, so the guard keeps the log."""
    report = golden("kinds/null-deref.log")
    header = next(line for line in report.splitlines() if "BUG: kernel NULL pointer dereference" in line)
    decoy = "x" * 600 + header.split("] ", 1)[1] + "\n"
    log = decoy + AFTER + report
    assert analyse_report(log, None) is not None
    assert trim_log(log) is None
