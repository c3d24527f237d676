"""Userspace cores through the kernel's own core_pattern pipe, in the python3 guest.

One boot of tests/lab/python_guest.py: the guest sets kernel.core_pattern to the reporter's
pipe mode (agents/coredump/pipe.CORE_PATTERN) and core_pipe_limit, then crashes a test program
(tests/support/data/cores/crashy.c, built here with its own library) each of MODES ways, twice,
and a process with 1 GiB of touched memory (tests/support/data/pipe/touch.c). The kernel
starts the handler for every crash; the handler reports to the lab's registry (its capture
budget one full core per signature: the first crash of each bug is `full`, the rest `skip`) and
acts on the answer. Asserted on what the registry
stored: the labels, the guilty function (the program's own), one signature per bug (the
thread mode is the null mode's bug, reached from a worker thread) and two events a mode; and
on what the handler logged: the 1 GiB core decided `skip` after reading its
head only, with the time from the kernel starting the handler to the answer, the bytes read
and the handler's peak memory (written to $CRASHREG_LAB_OUT/userspace/figures.json for
bench/README.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from agents.coredump.pipe import CORE_PATTERN
from tests.lab import lab, python_guest
from tests.support import DATA
from tests.support.cores import compile_programs

MEMORY_MB = int(os.environ.get("CRASHREG_LAB_USERSPACE_MEMORY_MB", "1600"))  # 1 GiB touched, and the rest
RUNS = 2
LARGE_MIB = 1024
# mode -> (labels, the guilty function): what crashy.c does in each (tests/agents/test_coredump.py
# reads the same program's cores from files).
MODES = {
    "null": (["segfault"], "parse_record"),
    "thread": (["segfault"], "parse_record"),
    "abort": (["abort"], "check_invariant"),
    "return-to-null": (["return-to-null", "segfault"], "smash_return"),
    "misaligned-return": (["bad-return", "segfault"], "unbalanced"),
    "sse": (["misaligned-stack", "segfault"], "mix_vectors"),
}
# mode -> the mode whose bug it is: parse_record's NULL from a worker thread is null's (one
# guilty function, signal and labels: one signature, docs/signatures.md).
SAME_BUG = {"thread": "null"}
BUGS = [mode for mode in MODES if mode not in SAME_BUG]
SUMMARY = re.compile(
    r"crashreg-report: core of pid \d+ \((?P<name>[^)]*)\) (?P<signal>\S+) (?P<report_id>core-\w+): "
    r"(?P<action>\w+) by (?P<decided_by>\w+) .*?read (?P<core_bytes>\d+) bytes of the core and "
    r"(?P<memory_bytes>\d+) of its memory before the answer, (?P<answer_ms>\d+) ms after the kernel started "
    r"the handler \(start-up (?P<startup_ms>\d+) ms, reading (?P<reading_ms>\d+) ms, round trip "
    r"(?P<trip_ms>\d+) ms; CPU (?P<cpu_ms>\d+) ms, \d+ of them start-up\); .*peak memory (?P<peak_kb>\d+) kB"
)


def guest_script() -> str:
    crashes = [(f"{mode}-{run}", f"/lab/bin/crashy {mode}") for run in range(1, RUNS + 1) for mode in MODES]
    crashes += [("touch-1", "/lab/bin/touch 1")]  # the signature's one full core
    crashes += [("touch-1g", f"/lab/bin/touch {LARGE_MIB}")]
    return (
        "\n".join(
            [
                "mkdir -p /var/lib/crashreg/cores /var/spool/crashreg /tmp/run && cd /tmp/run",
                "echo 16 > /proc/sys/kernel/core_pipe_limit",
                f"echo '{CORE_PATTERN}' > /proc/sys/kernel/core_pattern",
                'echo "LAB: core_pattern $(cat /proc/sys/kernel/core_pattern)"',
                "crash() {",
                '    echo "LAB: crash $1 $(cut -d " " -f 1 /proc/uptime)"',
                '    shift; "$@"',
                # The handler records its captures after letting the kernel go: wait for it (the
                # pattern does not match grep's own command line).
                "    while grep -qs 'crashreg-report[.]pyz' /proc/[0-9]*/cmdline; do sleep 0.1; done",
                "}",
                *(f"crash {label} {command}" for label, command in crashes),
                'echo "LAB: crashes done"',
                "ls -l /var/lib/crashreg/cores | sed 's/^/LAB: kept /'",
            ]
        )
        + "\n"
    )


@dataclass(frozen=True)
class Handled:
    """One crash as the guest's console shows it: the label, and the handler's summary line."""

    label: str
    summary: dict[str, str]


def handled_crashes(console: str) -> dict[str, Handled]:
    """label -> the handler summary logged (to /dev/kmsg, so on the console) after `LAB: crash label`."""
    out: dict[str, Handled] = {}
    label = None
    for line in console.splitlines():
        if line.startswith("LAB: crash "):
            label = line.split()[2]
        elif (found := SUMMARY.search(line)) and label is not None:
            out[label] = Handled(label, found.groupdict())
    return out


@pytest.fixture(scope="module")
def userspace(make_lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The boot, what each crash's handler logged, and the event the registry stored for it."""
    lab_ = make_lab("userspace", CRASHREG_CAPTURE_FULL_PER_WINDOW="1")
    build = tmp_path_factory.mktemp("userspace-programs")
    programs = compile_programs(build)
    subprocess.run(
        ["gcc", "-g", "-fno-omit-frame-pointer", "-o", str(build / "touch"), str(DATA / "pipe" / "touch.c")],
        check=True,
        timeout=120,
    )
    # The guest's / is its RAM: keep 64 MiB of it free, not the default 1 GiB. The kept cores
    # stay in the guest: their way to the dump store is tests/agents/test_core_pipe.py's.
    conf = lab.reporter_conf(lab_.registry.guest_url) + 'CRASHREG_CORE_KEEP_FREE="67108864"\n'
    conf += 'CRASHREG_UPLOAD_DUMPS="0"\n'
    image = python_guest.python_initramfs(
        lab_.kit,
        lab_.out / "userspace.img",
        guest_script(),
        {
            "lab/bin/crashy": programs["crashy"],
            "lab/bin/libcrashy.so": programs["library"],
            "lab/bin/touch": build / "touch",
            "etc/crashreg/reporter.conf": conf.encode(),
            "etc/crashreg/token": lab_.registry.tokens["report"].encode(),
        },
    )
    booted = python_guest.run_guest(
        lab_.kit,
        image,
        hostname="lab-userspace",
        memory_mb=MEMORY_MB,
        log=lab_.out / "userspace.console.log",
        timeout_s=4 * lab.BOOT_TIMEOUT_S,  # fourteen handlers under TCG: 15-20 s each on a loaded host
    )
    crashes = handled_crashes(booted.console)
    events = {label: lab_.event_of(handled.summary["report_id"]) for label, handled in crashes.items()}
    figures = {label: handled.summary for label, handled in crashes.items()} | {"boot_s": booted.seconds}
    (lab_.out / "figures.json").write_text(json.dumps(figures, indent=1))
    return {"boot": booted, "crashes": crashes, "events": events, "lab": lab_}


def test_the_guest_pipes_every_core_to_the_handler(userspace) -> None:
    booted: lab.Boot = userspace["boot"]
    assert python_guest.script_status(booted) == 0
    assert booted.marker_line("core_pattern") == f"LAB: core_pattern {CORE_PATTERN}"
    expected = {f"{mode}-{run}" for mode in MODES for run in range(1, RUNS + 1)}
    expected |= {"touch-1", "touch-1g"}
    assert set(userspace["crashes"]) == expected, booted.console[-4000:]
    assert all(h.summary["decided_by"] == "registry" for h in userspace["crashes"].values())


@pytest.mark.parametrize("mode", MODES)
def test_each_way_to_crash_is_labelled_exactly_with_the_programs_own_function(userspace, mode: str) -> None:
    labels, function = MODES[mode]
    events = [userspace["events"][f"{mode}-{run}"] for run in range(1, RUNS + 1)]
    for event in events:
        assert event["signature"]["labels"] == labels, event["signature"]
        assert f" in {function} " in event["title"] or event["title"].endswith(f" in {function}"), event[
            "title"
        ]
    assert len({event["id"] for event in events}) == RUNS  # two crashes, two events
    assert len({event["signature"]["id"] for event in events}) == 1, [e["title"] for e in events]


def test_every_bug_is_a_signature_of_its_own(userspace) -> None:
    signatures = {mode: userspace["events"][f"{mode}-1"]["signature"]["id"] for mode in MODES}
    assert all(signatures.pop(mode) == signatures[bug] for mode, bug in SAME_BUG.items())
    assert len(set(signatures.values())) == len(BUGS), signatures
    modes_of = {bug: 1 + sum(other == bug for other in SAME_BUG.values()) for bug in BUGS}
    counts = {bug: userspace["events"][f"{bug}-2"]["signature"]["event_count"] for bug in BUGS}
    assert counts == {bug: RUNS * modes for bug, modes in modes_of.items()}  # null's: its runs and thread's


def test_the_first_crash_of_each_bug_is_kept_whole_the_others_skipped(userspace) -> None:
    crashes, events = userspace["crashes"], userspace["events"]
    for label in [f"{mode}-1" for mode in BUGS] + ["touch-1"]:
        assert crashes[label].summary["action"] == "full"
        [capture] = events[label]["captures"]
        assert (capture["method"], capture["status"]) == ("core", "completed"), capture
        assert capture["target"] == f"/var/lib/crashreg/cores/{crashes[label].summary['report_id']}.core.gz"
    for label in [f"{mode}-2" for mode in MODES] + [f"{mode}-1" for mode in SAME_BUG]:  # after null-1
        assert crashes[label].summary["action"] == "skip" and events[label]["captures"] == []
    kept = [line for line in userspace["boot"].console.splitlines() if line.startswith("LAB: kept ")]
    assert len([line for line in kept if ".core.gz" in line]) == len(BUGS) + 1, kept


def test_the_1_gib_core_is_skipped_after_reading_its_head_only(userspace) -> None:
    large, event = userspace["crashes"]["touch-1g"].summary, userspace["events"]["touch-1g"]
    assert large["action"] == "skip" and event["captures"] == []
    assert event["signature"]["id"] == userspace["events"]["touch-1"]["signature"]["id"]
    assert int(large["core_bytes"]) < 64 << 10 and int(large["memory_bytes"]) < 1 << 20, large
