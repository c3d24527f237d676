"""Real crash kinds: the crashlab module crashes the kernel in a named function, twice per kind.

Each kind crashes on two boots (different addresses, timestamps, PIDs): the registry must give
both one signature, every kind its own, and a title naming the module's function. The lab's
registry has no full-capture budget (CRASHREG_CAPTURE_FULL_PER_WINDOW=0), so every answer is
skip and no dump is written: these boots are about the logs. Every log the registry stored is
kept as a fixture candidate under $CRASHREG_LAB_OUT/kinds/fixtures (GOLDEN.md format);
`make lab-fixtures` copies them into tests/support/data/golden/lab/.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from tests.lab.conftest import Host, Lab
from tests.support import DATA


@dataclass(frozen=True)
class Kind:
    """A crash kind as the kernel reports it: the engine's kind, title and guilty function."""

    trigger: str
    function: str
    engine_kind: str
    title: str
    how: str  # what the module does, for the fixture's SOURCE line


KINDS = (
    Kind(
        "null-deref",
        "crashlab_null_deref",
        "null-deref",
        "BUG: kernel NULL pointer dereference in crashlab_null_deref [crashlab]",
        "NULL write through a volatile pointer, panic_on_oops",
    ),
    Kind(
        "bug-on",
        "crashlab_bug_on",
        "kernel-bug",
        "kernel BUG in crashlab_bug_on [crashlab]",
        "BUG_ON(value != 0), panic_on_oops",
    ),
    Kind(
        "warn",
        "crashlab_warn",
        "warning",
        "WARNING in crashlab_warn [crashlab]",
        "WARN(value != 0), panic_on_warn",
    ),
    Kind(
        "list-corruption",
        "crashlab_list_corruption",
        "list-corruption",
        "BUG: corrupted list in crashlab_list_corruption [crashlab]",
        "list_add after a stray write to an entry's prev (CONFIG_DEBUG_LIST), panic_on_oops",
    ),
    Kind(
        "gpf",
        "crashlab_gpf",
        "gpf",
        "general protection fault in crashlab_gpf [crashlab]",
        "write to a non-canonical address, panic_on_oops",
    ),
    # A stall is named after the code its dispatch point called (docs/signatures.md): the RIP
    # is in crashlab_soft_lockup, but loops span functions, so the name is the init function
    # do_one_initcall dispatched to.
    Kind(
        "soft-lockup",
        "crashlab_init",
        "soft-lockup",
        "BUG: soft lockup in crashlab_init [crashlab]",
        "spin with preemption off, watchdog_thresh=1, softlockup_panic",
    ),
    Kind(
        "hung-task",
        "crashlab_hung_task",
        "hung-task",
        "INFO: task hung in crashlab_hung_task [crashlab]",
        "kthread sleeping uninterruptibly forever, hung_task_timeout_secs=2, hung_task_panic",
    ),
)
CRASHES_PER_KIND = 2
# Two guests at once: TCG runs a guest on one host thread, and most of a boot is waiting.
PARALLEL = int(os.environ.get("CRASHREG_LAB_PARALLEL", "2"))


def golden_text(kind: Kind, release: str, crash: int, log: str) -> str:
    """A fixture in tests/support/data/golden's format (GOLDEN.md)."""
    headers = [
        f"TITLE: {kind.title}",
        f"KIND: {kind.engine_kind}",
        f"FUNCTION: {kind.function}",
        f"GROUP: lab-{kind.trigger}",
        f"SOURCE: crash lab (tests/lab): Debian kernel {release} under QEMU TCG, module crashlab "
        f"(tests/lab/module), trigger {kind.trigger}: {kind.how}; crash {crash} of {CRASHES_PER_KIND}, "
        "log as makedumpfile --dump-dmesg read it from /proc/vmcore in the crash kernel",
    ]
    return "\n".join(headers) + "\n\n" + log


@pytest.fixture(scope="module")
def kinds_lab(make_lab) -> Lab:
    return make_lab("kinds", CRASHREG_CAPTURE_FULL_PER_WINDOW="0")


@pytest.fixture(scope="module")
def crashed(kinds_lab: Lab) -> dict[str, list[dict[str, Any]]]:
    """Every kind crashed CRASHES_PER_KIND times, each on its own boot; what the registry stored."""
    kinds_lab.image("online")  # built once, before the guests start in parallel
    jobs = [(kind, n) for n in range(1, CRASHES_PER_KIND + 1) for kind in KINDS]

    def crash(job: tuple[Kind, int]) -> tuple[Kind, int, Host]:
        kind, n = job
        host = kinds_lab.host(f"lab-{kind.trigger}-{n}")
        kinds_lab.crash(host, kind.trigger)
        return kind, n, host

    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(crash, jobs))
    fixtures = kinds_lab.out / "fixtures"
    fixtures.mkdir(exist_ok=True)
    stored: dict[str, list[dict[str, Any]]] = {kind.trigger: [] for kind in KINDS}
    for kind, n, host in results:
        [booted] = host.boots
        report_id = f"kdump-{booted.boot_id}"
        report = kinds_lab.stored_report(report_id)
        event = kinds_lab.event_of(report_id)
        name = f"{kind.trigger.replace('-', '_')}_{n}.log"
        (fixtures / name).write_text(golden_text(kind, kinds_lab.kit.release, n, report["console_log"]))
        stored[kind.trigger].append({"event": event, "report": report, "boot": booted})
    return stored


@pytest.mark.parametrize("kind", KINDS, ids=[k.trigger for k in KINDS])
def test_each_kind_crashed_twice_is_one_signature(crashed, kind: Kind) -> None:
    runs = crashed[kind.trigger]
    assert len({run["boot"].boot_id for run in runs}) == CRASHES_PER_KIND
    for run in runs:
        assert run["event"]["capture"]["action"] == "skip"
        assert "LAB: collected" not in run["boot"].console
        assert kind.function in run["report"]["console_log"]
    fingerprints = {run["event"]["fingerprint"] for run in runs}
    signatures = {run["event"]["signature"]["id"] for run in runs}
    assert len(fingerprints) == len(signatures) == 1, [run["event"]["title"] for run in runs]


@pytest.mark.parametrize(
    "kind",
    KINDS,
    ids=[k.trigger for k in KINDS],
)
def test_each_kinds_title_names_the_modules_guilty_function(crashed, kind: Kind) -> None:
    titles = {run["event"]["title"] for run in crashed[kind.trigger]}
    assert all(f" in {kind.function}" in title for title in titles), titles


def test_distinct_kinds_have_distinct_fingerprints(crashed) -> None:
    by_kind = {trigger: runs[0]["event"]["fingerprint"] for trigger, runs in crashed.items()}
    assert len(set(by_kind.values())) == len(KINDS), by_kind


def test_fixtures_in_the_repository_are_lab_logs_of_every_kind() -> None:
    """tests/support/data/golden/lab holds CRASHES_PER_KIND real logs of every kind (make lab-fixtures)."""
    golden = DATA / "golden" / "lab"
    for kind in KINDS:
        for n in range(1, CRASHES_PER_KIND + 1):
            text = (golden / f"{kind.trigger.replace('-', '_')}_{n}.log").read_text()
            assert text.startswith(f"TITLE: {kind.title}\n"), text[:200]
            assert f"GROUP: lab-{kind.trigger}\n" in text and kind.function in text
