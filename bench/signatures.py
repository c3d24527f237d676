"""Measure the signature engine on real crash logs: detection, guilty function, grouping,
invariance, speed and hostile input, on three parts scored apart.

    .venv/bin/python bench/signatures.py [--json OUT] [--verbose]

Parts:
- "tuned" and "held-out": the syzkaller Linux report corpus in tests/corpus/syzkaller-linux,
  split by a fixed seed (sha256 of SPLIT_SEED and the file name, so the split is stable as
  files are added): two thirds tuned, one third held out. Rules are developed against the
  tuned part only; `--verbose` lists tuned failures (expected vs got) and never held-out
  ones, which are reported as aggregate figures only. A figure much better on tuned than on
  held-out means the rules fit the corpus rather than the kernel.
- "crash lab": real oopses from the crash lab, tests/support/data/golden/lab/*.log (format in
  docs/signatures.md: TITLE/KIND/FUNCTION/GROUP headers), when present.
- "golden": every golden file (the engine's test cases, lab files included).

Prefix invariance: each log re-rendered in every style of STYLES (the journal's output modes,
syslog RFC 3164/5424, dmesg's time formats, caller ids with other tasks interleaved, cut lines
replayed, dropped-message notices, another CPU's messages) must read as the clean log.

Corpus files have `TITLE:` (absent when the log holds no crash) and other header lines, a
blank line, then the raw console log. Titles are the reference: a title's `in <function>` is
the guilty function, and two logs with one title are one bug. Titles "... in corrupted" name
no function and no bug, so they are left out of the function and grouping figures (they
still count for detection and invariance).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from registry.fingerprint import analyse_console_log
from registry.fingerprint.console import _find_header, _match_header
from registry.fingerprint.patterns import REPLAY_MARKER

ROOT = Path(__file__).resolve().parent.parent

CORPUS = ROOT / "tests/corpus/syzkaller-linux"
GOLDEN = ROOT / "tests/support/data/golden"
LAB = GOLDEN / "lab"
NOT_LOGS = ("README", "LICENSE", "NOTICE", ".")
# Never change: the held-out third must stay unseen by whoever tunes the rules.
SPLIT_SEED = "crashreg held-out split 2026-12-01"
HELD_OUT_SHARE = 3  # one file in three
# The goals, on the held-out part; the tuned part may be at most MAX_GAP better.
GOALS = {"detection": 0.99, "function": 0.93, "precision": 0.99, "recall": 0.93,
         "invariance": 1.0, "prefix_invariance": 1.0}
MAX_GAP = 0.03
SPEED_GOAL_MS = 2.0
HOSTILE_GOAL_MS = 50.0
SPEED_LOG_BYTES = 64 * 1024
HOSTILE_BYTES = 1 << 20
_IDENT = re.compile(r"[A-Za-z_][\w.]*$")


@dataclass
class Sample:
    """One log and what the reference says of it."""

    name: str
    title: str | None
    log: str
    corrupted: bool = False
    function: str | None = None  # the guilty function the reference names
    group: str | None = None  # logs with one group are one bug; None: left out of grouping
    loose_group: str | None = None  # the same, garbled reports included


def title_function(title: str | None) -> str | None:
    """The function a syzkaller title names after its last " in "."""
    if not title or "corrupted" in title or " in " not in title:
        return None
    words = title.rsplit(" in ", 1)[1].split()
    token = words[0].split("/")[0] if words else ""
    return token if _IDENT.match(token) else None


def _headers(text: str) -> tuple[dict[str, str], str]:
    header, _, log = text.partition("\n\n")
    fields: dict[str, str] = {}
    for line in header.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.isupper() and key not in fields:
            fields[key] = value.strip()
    return fields, log


def is_held_out(name: str) -> bool:
    """The fixed split: stable per file name, whatever else is in the folder."""
    digest = hashlib.sha256(f"{SPLIT_SEED}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % HELD_OUT_SHARE == 0


def _log_files(directory: Path) -> list[Path]:
    return [path for path in sorted(directory.iterdir())
            if path.is_file() and not path.name.startswith(NOT_LOGS)]


def load_corpus(directory: Path = CORPUS) -> list[Sample]:
    samples = []
    for path in _log_files(directory):
        fields, log = _headers(path.read_text(encoding="utf-8", errors="replace"))
        title = fields.get("TITLE") or None
        log = re.split(r"\n\nREPORT:\n", log, maxsplit=1)[0]
        corrupted = fields.get("CORRUPTED") == "Y"
        usable = bool(title) and "corrupted" not in title
        samples.append(Sample(path.name, title, log, corrupted, title_function(title),
                              title if usable and not corrupted else None,
                              title if usable else None))
    return samples


def load_lab(directory: Path = LAB) -> list[Sample]:
    """Crash-lab golden files: expected title, function and fingerprint group per log."""
    if not directory.is_dir():
        return []
    samples = []
    for path in sorted(directory.rglob("*.log")):
        fields, log = _headers(path.read_text(encoding="utf-8", errors="replace"))
        group = fields.get("GROUP") or None
        samples.append(Sample(path.relative_to(directory).as_posix(), fields.get("TITLE") or None, log,
                              "corrupted" in fields.get("FLAGS", ""),
                              fields.get("FUNCTION") or None, group, group))
    return samples


def split(samples: list[Sample]) -> dict[str, list[Sample]]:
    return {"tuned": [s for s in samples if not is_held_out(s.name)],
            "held-out": [s for s in samples if is_held_out(s.name)]}


# --- mutation: what differs between two hits of one bug -----------------------------------

_TIMESTAMP = re.compile(r"\[ *(\d+)\.(\d+)\]")
_HEX = re.compile(r"\b(0x)?([0-9a-f]{8,16})\b")
_OFFSET = re.compile(r"\+0x([0-9a-f]+)/0x([0-9a-f]+)")
_NUMBERED = re.compile(r"(PID: |pid |CPU: |cpu |CPU#|[CT](?=\d+\])|syz-executor\.?|kworker/u?|"
                       r"Comm: \S*?|task \S*?:)(\d+)")


def mutate(log: str, rng: random.Random) -> str:
    """The same crash on another boot: timestamps, addresses, offsets, pids, cpus changed."""
    shift = rng.uniform(10, 5000)
    log = _TIMESTAMP.sub(lambda m: f"[{float(m.group(1) + '.' + m.group(2)) + shift:12.6f}]",
                         log)
    hex_map: dict[str, str] = {}

    def new_hex(match: re.Match[str]) -> str:
        old = match.group(2)
        if old not in hex_map:
            hex_map[old] = "".join(rng.choice("0123456789abcdef") for _ in old)
        return (match.group(1) or "") + hex_map[old]

    log = _OFFSET.sub(lambda m: f"+0x{rng.randrange(1, 0x800):x}/0x{int(m.group(2), 16) + 0x40:x}",
                      log)
    log = _HEX.sub(new_hex, log)
    number_map: dict[str, str] = {}

    def new_number(match: re.Match[str]) -> str:
        old = match.group(2)
        if old not in number_map:
            number_map[old] = str(rng.randrange(0, 64 if len(old) < 3 else 99999))
        return match.group(1) + number_map[old]

    return _NUMBERED.sub(new_number, log)


# --- prefix styles: one log as each way of reading a kernel log delivers it ---------------

# A clean log's line: the kernel's prefix (a log already read through the journal keeps only
# the journal's, which is taken off too), after what the console glued before it (a dropped-
# message count, a login prompt).
_CONSOLE_LINE = re.compile(r"(?:\*\* \d+ printk messages dropped \*\* )?(?:\S+ login: )?"
                           r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: )?(?:<\d{1,2}>)?"
                           r"(?:\[ *(?P<sec>\d+\.\d+)\])?(?:\[ *(?P<ctx>[CT]\d+)\])? ?")
BOOTED = datetime(2026, 12, 1, 9, 58, 3, tzinfo=UTC)
HOST = "gpu-a017"
OTHER_TASK = ("usb 1-1: reset high-speed USB device number 2 using xhci_hcd",
              " mlx5e_napi_poll+0x93/0x7c0 [mlx5_core]", "RIP: 0010:native_safe_halt+0x7/0x10",
              "Call Trace:", " other_task_function+0x1a/0x40")


@dataclass
class ConsoleLine:
    """One line of a clean console log: the kernel's timestamp and caller id, and its text."""

    seconds: float
    ctx: str | None
    body: str
    kernel: bool  # False: another program on the same serial console (no printk timestamp)


def console_lines(log: str) -> list[ConsoleLine]:
    """The log's lines with the kernel's own prefix taken apart (untimed lines of a timed log are
    another program's; a log without timestamps is all kernel, on a clock of its own)."""
    matches = [(_CONSOLE_LINE.match(line), line) for line in log.rstrip("\n").split("\n")]
    timed = any(match.group("sec") for match, _ in matches)
    lines = []
    for index, (match, line) in enumerate(matches):
        seconds = float(match.group("sec")) if match.group("sec") else index / 1000
        kernel = bool(match.group("sec")) or not timed
        lines.append(ConsoleLine(seconds, match.group("ctx"), line[match.end():] if kernel else line,
                                 kernel))
    return lines


def _at(line: ConsoleLine) -> datetime:
    return BOOTED + timedelta(seconds=line.seconds)


def _kernel_prefix(line: ConsoleLine, space: str = "") -> str:
    """The kernel's own prefix as consoles print it (dmesg puts a space before the caller id)."""
    caller = f"{space}[{line.ctx:>6}]" if line.ctx else ""
    return f"[{line.seconds:12.6f}]{caller} "


def _journal(stamp: Callable[[ConsoleLine], str]) -> Callable[[list[ConsoleLine]], str]:
    """journalctl -k: the kernel's records only, the journal's own timestamp, no caller id."""
    return lambda lines: "".join(f"{stamp(line)} {HOST} kernel: {line.body}\n"
                                 for line in lines if line.kernel)


def _syslog_imklog(lines: list[ConsoleLine]) -> str:
    """rsyslog's RFC 3164 file: imklog reads /proc/kmsg, which keeps the kernel's prefix; other
    programs' lines are theirs."""
    return "".join(f"{_at(line):%b} {_at(line).day:2d} {_at(line):%H:%M:%S} {HOST} "
                   + (f"kernel: {_kernel_prefix(line)}{line.body}\n" if line.kernel
                      else f"syz-executor[412]: {line.body}\n") for line in lines)


def _dmesg(stamp: Callable[[ConsoleLine], str]) -> Callable[[list[ConsoleLine]], str]:
    """util-linux dmesg: the kernel's records, a caller id after the time when there is one."""
    def render(lines: list[ConsoleLine]) -> str:
        return "".join(stamp(line) + (f"[{line.ctx:>6}] " if line.ctx else "")
                       + line.body + "\n" for line in lines if line.kernel)
    return render


def _console(line: ConsoleLine) -> str:
    return (_kernel_prefix(line) if line.kernel else "") + line.body + "\n"


def _interleaved_tasks(lines: list[ConsoleLine]) -> str:
    """CONFIG_PRINTK_CALLER consoles with another task's lines between every two of ours."""
    out = []
    for index, line in enumerate(lines):
        if line.kernel and not line.ctx:
            line = ConsoleLine(line.seconds, "T1", line.body, True)
        out.append(_console(line))
        if line.kernel:
            other = ConsoleLine(line.seconds, "T99999", OTHER_TASK[index % len(OTHER_TASK)], True)
            out.append(_console(other))
    return "".join(out)


def _replayed(lines: list[ConsoleLine]) -> str:
    """nbcon consoles taken over mid-line: every third line is cut, the replay marker printed,
    then the whole line again."""
    out = []
    for index, line in enumerate(lines):
        whole = _console(line)
        if line.kernel and index % 3 == 1:
            out.append(whole[:len(whole) // 2] + "\n" + REPLAY_MARKER + "\n")
        out.append(whole)
    return "".join(out)


def _dropped(lines: list[ConsoleLine]) -> str:
    """Consoles that fell behind: "** N printk messages dropped **" on a line of its own (5.10+)
    and glued before the next line's prefix (earlier kernels)."""
    out = []
    for index, line in enumerate(lines):
        glued = "** 3 printk messages dropped ** " if line.kernel and index % 7 == 3 else ""
        out.append(glued + _console(line))
        if index % 5 == 2:
            out.append("** 12 printk messages dropped **\n")
    return "".join(out)


def _other_cpu(lines: list[ConsoleLine]) -> str:
    """Another CPU's whole message after every eighth of ours, on a console without caller ids
    (nothing tells its lines apart, so only text that is no report line is invariant)."""
    out = []
    for index, line in enumerate(lines):
        out.append(_console(ConsoleLine(line.seconds, None, line.body, line.kernel)))
        if line.kernel and index % 8 == 7:
            out.append(_console(ConsoleLine(line.seconds, None, OTHER_TASK[0], True)))
    return "".join(out)


# Every way a kernel log reaches crashreg that the engine reads as the crash kernel's clean
# log: style -> renderer of the clean log's lines.
STYLES: dict[str, Callable[[list[ConsoleLine]], str]] = {
    "journalctl -o short": _journal(lambda line: f"{_at(line):%b %d %H:%M:%S}"),
    "journalctl -o short-precise": _journal(lambda line: f"{_at(line):%b %d %H:%M:%S.%f}"),
    "journalctl -o short-iso": _journal(lambda line: f"{_at(line):%Y-%m-%dT%H:%M:%S%z}"),
    "journalctl -o short-iso-precise": _journal(
        lambda line: _at(line).isoformat(timespec="microseconds")),
    "journalctl -o short-full": _journal(lambda line: f"{_at(line):%a %Y-%m-%d %H:%M:%S} UTC"),
    "journalctl -o short-unix": _journal(lambda line: f"{_at(line).timestamp():.6f}"),
    "journalctl -o short-monotonic": _journal(lambda line: f"[{line.seconds:12.6f}]"),
    "syslog RFC 3164 file (imklog)": _syslog_imklog,
    "syslog RFC 3164 wire": _journal(
        lambda line: f"<4>{_at(line):%b} {_at(line).day:2d} {_at(line):%H:%M:%S}"),
    "syslog RFC 5424": lambda lines: "".join(
        f"<4>1 {_at(line).isoformat(timespec='microseconds')} {HOST} kernel - - - {line.body}\n"
        for line in lines if line.kernel),
    "dmesg": _dmesg(lambda line: f"[{line.seconds:12.6f}] "),
    "dmesg -T": _dmesg(lambda line: f"[{_at(line):%a %b} {_at(line).day:2d} "
                                    f"{_at(line):%H:%M:%S %Y}] "),
    "dmesg --time-format iso": _dmesg(
        lambda line: f"{_at(line):%Y-%m-%dT%H:%M:%S},{_at(line).microsecond:06d}+00:00 "),
    "dmesg -x": _dmesg(lambda line: f"kern  :warn  : [{line.seconds:12.6f}] "),
    "dmesg -r": _dmesg(lambda line: f"<4>[{line.seconds:12.6f}] "),
    "caller ids, other tasks interleaved": _interleaved_tasks,
    "cut lines replayed (nbcon)": _replayed,
    "printk messages dropped": _dropped,
    "other CPU's messages, no caller ids": _other_cpu,
}


def render(log: str, style: str) -> str:
    return STYLES[style](console_lines(log))


def same_crash(one, two) -> bool:
    """One fingerprint, title and guilty function (or no crash in both)."""
    def key(signature):
        return signature and (signature.fingerprint, signature.title, signature.function)
    return key(one) == key(two)


def prefix_invariance(samples, signatures) -> tuple[dict[str, float], int, list[str]]:
    """Per style, the share of logs whose re-rendered copy gets the same fingerprint, title and
    function as the clean log (every log counts: one without a crash must stay without)."""
    shares, wrong = {}, []
    for style in STYLES:
        misses = [s for s in samples
                  if not same_crash(analyse_console_log(render(s.log, style)), signatures[s.name])]
        shares[style] = 1 - len(misses) / len(samples) if samples else 1.0
        wrong += [f"{style}: {s.name}" for s in misses]
    return shares, len(samples), wrong


# --- figures ----------------------------------------------------------------------------

def detection(samples, signatures) -> tuple[float, list[str]]:
    wrong = [f"{s.name}: want {'a crash' if s.title else 'no crash'} got "
             f"{signatures[s.name].title if signatures[s.name] else None!r}"
             for s in samples if (signatures[s.name] is not None) != bool(s.title)]
    return 1 - len(wrong) / len(samples) if samples else 1.0, wrong


def function_agreement(samples, signatures) -> tuple[float, int, list[str]]:
    judged = [s for s in samples if s.function]
    wrong = []
    for sample in judged:
        signature = signatures[sample.name]
        if signature is None or signature.function != sample.function:
            got = signature.function if signature else None
            wrong.append(f"{sample.name}: want {sample.function} got {got}")
    return 1 - len(wrong) / len(judged) if judged else 1.0, len(judged), wrong


def grouping(samples, signatures, with_corrupted: bool = False
             ) -> tuple[float, float, int, list[str]]:
    """Pairwise agreement with the reference groups. Titles of garbled reports (CORRUPTED: Y)
    are the reference parser's best effort, not a bug identity, so they are left out unless
    asked."""
    judged = [(s, s.loose_group if with_corrupted else s.group) for s in samples]
    judged = [(s, group) for s, group in judged if group]
    tp = fp = fn = 0
    mistakes = []
    for (a, group_a), (b, group_b) in itertools.combinations(judged, 2):
        same_bug = group_a == group_b
        fa, fb = signatures[a.name], signatures[b.name]
        same_signature = fa is not None and fb is not None and fa.fingerprint == fb.fingerprint
        tp += same_bug and same_signature
        fp += same_signature and not same_bug
        fn += same_bug and not same_signature
        if same_bug != same_signature:
            mistakes.append(f"{'split' if same_bug else 'merged'}: {a.name} {b.name}: "
                            f"{group_a!r} / {group_b!r}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, len(judged), mistakes


def invariance(samples, signatures, rounds: int = 3) -> tuple[float, int, list[str]]:
    rng = random.Random(1234)
    judged = [s for s in samples if signatures[s.name] is not None]
    wrong = []
    for sample in judged:
        for _ in range(rounds):
            mutated = analyse_console_log(mutate(sample.log, rng))
            if mutated is None or mutated.fingerprint != signatures[sample.name].fingerprint:
                wrong.append(f"{sample.name}: {signatures[sample.name].title!r} -> "
                             f"{mutated.title if mutated else None!r}")
                break
    return 1 - len(wrong) / len(judged) if judged else 1.0, len(judged), wrong


def score(samples: list[Sample]) -> tuple[dict, list[str]]:
    """Every figure of one part, and its failures (expected vs got)."""
    signatures = {s.name: analyse_console_log(s.log) for s in samples}
    det, det_wrong = detection(samples, signatures)
    fun, fun_n, fun_wrong = function_agreement(samples, signatures)
    precision, recall, group_n, group_wrong = grouping(samples, signatures)
    loose_precision, loose_recall, loose_n, _ = grouping(samples, signatures, with_corrupted=True)
    inv, inv_n, inv_wrong = invariance(samples, signatures)
    styles, _, style_wrong = prefix_invariance(samples, signatures)
    figures = {"logs": len(samples), "detection": det, "function": fun, "function_judged": fun_n,
               "precision": precision, "recall": recall, "grouping_judged": group_n,
               "precision_with_corrupted": loose_precision,
               "recall_with_corrupted": loose_recall, "grouping_judged_with_corrupted": loose_n,
               "invariance": inv, "invariance_judged": inv_n,
               "prefix_invariance": min(styles.values(), default=1.0), "prefix_styles": styles}
    failures = ([f"detection {line}" for line in det_wrong]
                + [f"function {line}" for line in fun_wrong]
                + [f"grouping {line}" for line in group_wrong]
                + [f"invariance {line}" for line in inv_wrong]
                + [f"prefix invariance {line}" for line in style_wrong])
    return figures, failures


def _time(function, argument, repeat: int) -> float:
    """Best of `repeat` cold runs (the engine's header-line cache emptied each time), in CPU
    seconds of this process: the figure holds on a machine shared with other work."""
    best = []
    for _ in range(repeat):
        _match_header.cache_clear()
        start = time.process_time()
        function(argument)
        best.append(time.process_time() - start)
    return min(best)


def console_noise(samples) -> str:
    """Real console chatter: every log's lines before its crash, and the logs without one."""
    parts = []
    for sample in samples:
        found = _find_header(sample.log)
        parts.append(sample.log[:found[0]] if found else sample.log)
    return "".join(parts)


def speed(samples) -> dict:
    """Median time for 64 KiB logs: a window of real console noise, then a crash at the end
    (the worst place: the whole window is scanned), against str.splitlines on the same log."""
    noise = console_noise(samples)
    rng = random.Random(7)
    logs = []
    for sample in samples:
        if sample.title:
            pad = max(SPEED_LOG_BYTES - len(sample.log), 0)
            start = rng.randrange(max(len(noise) - pad, 1))
            filler = noise[start:start + pad]
            filler = filler[filler.find("\n") + 1:filler.rfind("\n") + 1]
            logs.append((filler + sample.log)[-SPEED_LOG_BYTES:])
    engine = [_time(analyse_console_log, log, 3) for log in logs]
    baseline = [_time(str.splitlines, log, 3) for log in logs]
    median = statistics.median(engine)
    return {"logs": len(logs), "noise_bytes": len(noise), "median_ms": median * 1e3,
            "p95_ms": sorted(engine)[int(len(engine) * 0.95)] * 1e3,
            "baseline_splitlines_median_ms": statistics.median(baseline) * 1e3,
            "ratio_to_splitlines": median / statistics.median(baseline)}


def hostile_inputs() -> dict[str, str]:
    rng = random.Random(99)
    size = HOSTILE_BYTES
    frame = " ? a_function_name+0x1/0x2\n"
    return {
        "one 1 MiB line": "A" * size,
        "binary noise": bytes(rng.randrange(256) for _ in range(size)).decode("latin-1"),
        "repeated header, one line": ("BUG: KASAN: use-after-free in " * (size // 30)),
        "repeated header lines": "general protection fault: 0000 [#1]\n" * (size // 37),
        "repeated prefix": ("[ 1.0][ T1] " * (size // 12)),
        "repeated kernel: prefix": ("host kernel: " * (size // 13)),
        "repeated hex": "0x" + "f" * (size - 2),
        "unterminated frame": "Call Trace:\n " + "a" * (size - 20) + "+0x",
        "questionable frames": "WARNING: CPU: 0 PID: 1 at a.c:1 f+0x1/0x2\nCall Trace:\n"
                               + frame * (size // len(frame)),
        "needles without headers": ("WARNING:" * 7 + "\n") * (size // 57),
        "deep lock report": "WARNING: possible circular locking dependency detected\n"
                            + "is trying to acquire lock:\n" * (size // 27),
    }


def hostile(repeat: int = 3) -> dict:
    """Milliseconds per hostile input, and the ratio to str.splitlines on the same input."""
    figures = {}
    for name, text in hostile_inputs().items():
        engine = _time(analyse_console_log, text, repeat)
        figures[name] = {"ms": engine * 1e3,
                         "ratio_to_splitlines": engine / _time(str.splitlines, text, repeat)}
    return figures


def _print_part(name: str, figures: dict) -> None:
    if not figures["logs"]:
        print(f"{name:>9}: no logs")
        return
    print(f"{name:>9}: {figures['logs']} logs: " + ", ".join(
        f"{key} {figures[key]:.3f}" for key in GOALS)
        + f" (function judged on {figures['function_judged']}, grouping on "
        f"{figures['grouping_judged']}; with garbled reports: precision "
        f"{figures['precision_with_corrupted']:.3f} recall {figures['recall_with_corrupted']:.3f})")


def print_prefix_styles(parts: dict[str, dict]) -> None:
    """Per style and part: the share of logs read exactly as their clean copy."""
    print("  prefix invariance (same fingerprint, title and function as the clean log):")
    print(f"    {'style':<38}" + "".join(f"{name:>10}" for name in parts))
    for style in STYLES:
        print(f"    {style:<38}" + "".join(
            f"{parts[name]['prefix_styles'][style]:>10.3f}" for name in parts))


def verdicts(parts: dict[str, dict]) -> list[str]:
    """What misses the issue's goals: held-out figures, and the tuned-over-held-out gap."""
    held, tuned = parts["held-out"], parts["tuned"]
    misses = [f"held-out {key} {held[key]:.3f} < {goal}" for key, goal in GOALS.items()
              if held[key] < goal]
    misses += [f"tuned {key} {tuned[key]:.3f} is more than {MAX_GAP} above held-out "
               f"{held[key]:.3f}" for key in GOALS if tuned[key] - held[key] > MAX_GAP]
    return misses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="syzkaller-format logs")
    parser.add_argument("--lab", type=Path, default=LAB, help="crash-lab golden files")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="list the tuned part's failures (never the held-out part's)")
    parser.add_argument("--tuning", action="store_true",
                        help="score the tuned part only (while rules change, held-out stays unseen)")
    args = parser.parse_args()

    corpus = load_corpus(args.corpus)
    parts = {name: samples for name, samples in split(corpus).items()}
    parts["crash lab"] = load_lab(args.lab)
    parts["golden"] = load_lab(GOLDEN)
    if args.tuning:
        parts = {"tuned": parts["tuned"]}
    scored = {name: score(samples) for name, samples in parts.items()}
    figures = {name: part for name, (part, _) in scored.items()}
    figures["split"] = {"seed": SPLIT_SEED, "held_out_share": f"1/{HELD_OUT_SHARE}"}
    figures["speed"] = speed(corpus) if not args.tuning else None
    figures["hostile_ms"] = hostile() if not args.tuning else None
    if args.verbose:
        for line in scored["tuned"][1]:
            print("  tuned miss:", line)
    for name in parts:
        _print_part(name, figures[name])
    print_prefix_styles({name: figures[name] for name in parts})
    if args.tuning:
        return 0
    sp = figures["speed"]
    print(f"    speed: median {sp['median_ms']:.3f} ms, p95 {sp['p95_ms']:.3f} ms for "
          f"{sp['logs']} x 64 KiB logs; {sp['ratio_to_splitlines']:.1f}x str.splitlines "
          f"({sp['baseline_splitlines_median_ms']:.3f} ms) (goal median < {SPEED_GOAL_MS} ms)")
    worst = max(entry["ms"] for entry in figures["hostile_ms"].values())
    for name, entry in figures["hostile_ms"].items():
        print(f"  hostile: {name:<28} {entry['ms']:7.2f} ms "
              f"({entry['ratio_to_splitlines']:5.1f}x str.splitlines)")
    print(f"  hostile: worst {worst:.2f} ms (goal < {HOSTILE_GOAL_MS} ms)")
    misses = verdicts(figures)
    if sp["median_ms"] >= SPEED_GOAL_MS:
        misses.append(f"median {sp['median_ms']:.3f} ms >= {SPEED_GOAL_MS} ms")
    if worst >= HOSTILE_GOAL_MS:
        misses.append(f"hostile worst {worst:.2f} ms >= {HOSTILE_GOAL_MS} ms")
    print("    goals: " + ("all met" if not misses else "; ".join(misses)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
