"""Fuzzing the parsers: reporters are machines mid-crash, and their logs are often garbage."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from registry.fingerprint import CrashSignature, analyse_console_log, analyse_stack
from registry.fingerprint.console import (
    _ARM_FRAME,
    _FRAME,
    _LOCK_AT,
    _PC_BARE,
    _RIP,
    _STACK_START,
    _TRACE_START,
    _parse_line,
)
from registry.fingerprint.patterns import OOPSES, TRIGGERS

# Pieces of real reports, so generated logs reach deep into the parser.
TOKENS = [
    *sorted({o.needle for o in OOPSES} | set(TRIGGERS)),
    "[  12.345678] ", "[  12.345678][ T123] ", "[ 1.0][  C1] ", "<4>", "kernel: ", "RIP: 0010:",
    "Call Trace:", "<IRQ>", "</IRQ>", " ? ", "func+0x1a/0x20", " [mlx5_core]", "\n", " ",
    "at: ", "-> #0 ", "is trying to acquire lock:", "Bank 4: be00000000800400", "0x", "ffff",
    "(First)", "[18] MalfTLP", "PCIe Bus Error: severity=Uncorrected (Fatal), type=x,",
    "device [15b3:101d]", ".isra.0", ".cold", "apic_timer_interrupt+0x1/0x2", ") from [",
    "[<c0123456>] (f) from ", "page last allocated", "\x00", "\r", "\t", "é", "\ud7ff",
]
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def check(signature: CrashSignature | None) -> None:
    if signature is not None:
        assert re.fullmatch(r"[0-9a-f]{32}", signature.fingerprint)
        assert signature.title and signature.kind
        assert isinstance(signature.frames, list) and isinstance(signature.labels, list)


@SETTINGS
@given(st.text(max_size=4000))
def test_any_text_parses_without_error(text: str) -> None:
    check(analyse_console_log(text))


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=20), max_size=300))
def test_crash_shaped_garbage_parses_and_is_deterministic(pieces: list[str]) -> None:
    text = "".join(pieces)
    first = analyse_console_log(text)
    check(first)
    again = analyse_console_log(text)
    assert (first and first.fingerprint) == (again and again.fingerprint)


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=20), max_size=200),
       st.floats(min_value=0, max_value=1e6))
@example(["BUG: ", "[ 1.0][  C1] "], 0.0)  # a short timestamp mid-header was "interleaved" only when long
@example(["BUG: " + "x" * 88, "[ 1.0] "], 0.0)  # a long one was cut by the title's length limit, kept
def test_timestamps_never_change_the_fingerprint(pieces: list[str], shift: float) -> None:
    text = "".join(pieces)
    shifted = re.sub(r"\[ *(\d+\.\d+)\]", lambda m: f"[{float(m.group(1)) + shift:12.6f}]", text)
    one, two = analyse_console_log(text), analyse_console_log(shifted)
    assert (one and one.fingerprint) == (two and two.fingerprint)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=6),
    max_leaves=40,
)
STACK_KEYS = st.sampled_from(["frames", "registers", "mappings", "signal", "executable", "evidence"])


@SETTINGS
@given(st.dictionaries(STACK_KEYS, JSON, max_size=5))
def test_any_stack_object_parses_without_error(stack: dict) -> None:
    check(analyse_stack(stack))


def test_regression_inputs_found_by_fuzzing() -> None:
    """Inputs that once broke the parser (kept so they never break it again)."""
    for text in [
        "BUG:",  # header with nothing after it
        "[<c0123456>] (f) from ",  # arm frame without a crash
        "Call Trace:\n ? ",  # unreliable marker without a frame
        "WARNING: \n" * 3,
        "\x00BUG: KASAN: \r\n",
    ]:
        check(analyse_console_log(text))


def test_hostile_inputs_complete_with_bounded_output() -> None:
    """Bounded work: 1 MiB of one line, of repeated headers, of frames; timings live in bench/."""
    size = 1 << 20
    for text in ["A" * size, "general protection fault: 0000 [#1]\n" * (size // 37),
                 "WARNING: CPU: 0 PID: 1 at a.c:1 f+0x1/0x2\nCall Trace:\n"
                 + " f+0x1/0x2\n" * (size // 11), "BUG: KASAN: " * (size // 12)]:
        signature = analyse_console_log(text)
        check(signature)
        if signature is not None:
            assert len(signature.title) < 400 and len(signature.frames) <= 3


# _parse_line reads a line only after a cheap gate (a first character, a literal): every line a
# regex matches must pass the gate in front of it, or a new line format added to the regex alone
# would be lost silently. Lines are generated from the regexes themselves (many are set aside:
# generated text often also reads as another kind of line, which is then what it is).
GATES = settings(max_examples=120, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def _plain(line: str) -> str:
    assume("\n" not in line and "\r" not in line and line == line.strip())
    assume(not line.startswith("? ") and not line.endswith("[inline]"))
    return line


@GATES
@given(st.from_regex(_RIP, fullmatch=True) | st.from_regex(_PC_BARE, fullmatch=True))
def test_every_pc_line_passes_its_gate(line: str) -> None:
    assert _parse_line(_plain(line)).register


@GATES
@given(st.from_regex(_TRACE_START) | st.from_regex(_STACK_START))
def test_every_stack_marker_passes_its_gate(line: str) -> None:
    line = _plain(line.strip())
    assume(_TRACE_START.search(line) or _STACK_START.search(line))
    assert _parse_line(line).boundary


def _not_a_pc_or_marker(line: str) -> str:
    line = _plain(line)
    assume(not (_RIP.match(line) or _PC_BARE.match(line)))
    assume(not (_TRACE_START.search(line) or _STACK_START.search(line)))
    return line


@GATES
@given(st.from_regex(_FRAME, fullmatch=True))
def test_every_reliable_frame_passes_its_gate(line: str) -> None:
    line = _not_a_pc_or_marker(line)
    match = _FRAME.fullmatch(line)
    assume(match and not (match.group("q") or match.group("q2") or match.group("unreliable")))
    assume("at: " not in line or not _LOCK_AT.search(line))
    assert _parse_line(line).frame is not None


@GATES
@given(st.from_regex(_LOCK_AT) | st.from_regex(_ARM_FRAME))
def test_every_lock_site_and_arm_frame_passes_its_gate(line: str) -> None:
    line = _not_a_pc_or_marker(line.strip())
    parsed = _parse_line(line)
    if _LOCK_AT.search(line):
        assume(not _FRAME.match(line) or "at: " in line)
        assert parsed.at is not None
    else:
        assume(not _FRAME.match(line) and _ARM_FRAME.search(line))
        assert parsed.frame is not None
