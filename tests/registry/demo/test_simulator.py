"""The simulated fleet's kernel logs are real logs (registry/demo/kernel_logs) with the bug's
function and call chain put in, and the engine reads one signature per bug from them."""

from __future__ import annotations

import random
import re

from registry.demo.simulator import (
    CONFOUNDED_POPULATIONS,
    DEFAULT_POPULATIONS,
    KERNEL_LOGS,
    MARK,
    NOISE,
    REGISTER_DUMP,
    Bug,
    console_log,
    kernel_log_template,
)
from registry.fingerprint import analyse_console_log

HOST = {"hostname": "vm-1", "kernel_version": "6.1.90-fleet.1", "bios_version": "2.1.4",
        "microcode": "0xa0011d1"}
KERNEL_BUGS: list[Bug] = [
    bug for population in DEFAULT_POPULATIONS + CONFOUNDED_POPULATIONS
    for bug in (population.bug, *population.spray) if not bug.executable
]
FRAME = r" (\? )?[\w.]+\+0x[0-9a-f]+/0x[0-9a-f]+( \[\w+\])?"
NOISE_LINE = re.compile("|".join(re.sub(r"\\\{\w+(:\w+)?\\\}", ".*", re.escape(n)) for n in NOISE))


def _pattern(line: str) -> re.Pattern[str]:
    """A template line as a regex: its marks and (in the register dump) its values vary."""
    text = re.escape(line)
    if REGISTER_DUMP.match(line):
        text = re.sub(r"\b[0-9a-f]{16}\b", "[0-9a-f]{16}", text)
    return re.compile(MARK.sub(".+?", text) + "$")


def test_each_log_is_noise_then_its_kinds_real_log_line_for_line() -> None:
    for bug in KERNEL_BUGS:
        log = console_log(bug, HOST, 86_400, random.Random(5))
        lines = [line.split("] ", 1)[1] for line in log.splitlines()]
        frames = [line for line in lines if re.fullmatch(FRAME, line)]
        template = [line for line in kernel_log_template(bug.kind) if line != "@trace@"]
        rest = [line for line in lines if line not in frames]
        noise, rest = rest[: len(rest) - len(template)], rest[len(rest) - len(template) :]
        assert 2 <= len(noise) <= 6 and all(NOISE_LINE.fullmatch(line) for line in noise), noise
        for line, expected in zip(rest, template, strict=True):
            assert _pattern(expected).match(line), (bug.kind, expected, line)
        assert any(bug.function in line for line in lines) or bug.kind == "mce"  # a machine check has none
        named = [frame.split("+")[0].strip(" ?") for frame in frames]
        assert named[len(named) - len(bug.callers) :] == list(bug.callers)


def test_one_signature_per_bug_whatever_varies_between_its_crashes() -> None:
    fingerprints: dict[str, set[str]] = {}
    for bug in KERNEL_BUGS:
        logs = [console_log(bug, HOST, 3_600 * (1 + seed), random.Random(seed)) for seed in range(3)]
        seen = {analyse_console_log(log).fingerprint for log in logs}
        assert len(seen) == 1, bug
        fingerprints.setdefault(seen.pop(), set()).add(bug.function)
    # the engine names none but a syscall for the two WARNINGs whose function it skips
    assert [sorted(f) for f in fingerprints.values() if len(f) > 1] == [["rb_insert_color", "xas_load"]]


def test_every_template_names_its_source_and_the_licence_travels_with_it() -> None:
    for path in sorted(KERNEL_LOGS.glob("*.log")):
        assert path.read_text().startswith("# SOURCE: "), path
    assert "Apache License" in (KERNEL_LOGS / "LICENSE-syzkaller.txt").read_text()
    assert {p.stem for p in KERNEL_LOGS.glob("*.log")} >= {bug.kind for bug in KERNEL_BUGS}
