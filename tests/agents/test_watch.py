"""The kernel log watcher (`crashreg-report.pyz watch`) as a real process on a file of real kmsg
records (the lab's logs, tests/support/kmsg.py; never this host's /dev/kmsg), against a live
registry on SQLite and PostgreSQL: cut, reported once each, repeats counted, a SIGKILL in the
middle of a report and a registry outage neither lose nor double anything."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from agents.kernellog.kmsg import Cutter, parse_record, records
from agents.kernellog.watch import Watcher
from agents.reporter.config import Config
from registry.fingerprint import analyse_report
from tests.support.agents import SYSTEM_PYTHON, Registry, Site, closed_port_url, run_reporter
from tests.support.golden import golden
from tests.support.kmsg import Line, between, lab_lines, shifted
from tests.support.kmsg import records as kmsg_records

BOOT_ID = "2b4f8d1e-6c3a-4f5e-9d7b-0a1c2e3f4a5b"
WARN = lab_lines("warn_1")
OOPS = lab_lines("null_deref_1")
WARNING = between(WARN, "------------[ cut here", "</TASK>")
NULL_DEREF = between(OOPS, "BUG: kernel NULL pointer dereference", "CR2: 0000000000000000")
REPEATS = 4  # the warning is printed 1 + REPEATS times


def stream() -> list[Line]:
    """A boot, the warning printed five times a second apart, a NULL dereference, quiet lines,
    and a line 70 s after the first warning: the repeats' report is due (interval 60 s)."""
    lines = WARN[:40]
    for n in range(1 + REPEATS):
        lines += shifted(WARNING, (20 + n) * 1_000_000)
    lines += shifted(NULL_DEREF, 30_000_000)
    lines += shifted(WARN[40:45], 31_000_000)
    return lines + shifted(WARN[45:46], 90_000_000)


def watch_site(make_site, tmp_path: Path, **extra: str) -> Site:  # type: ignore[no-untyped-def]
    (tmp_path / "boot_id").write_text(BOOT_ID + "\n")
    values = {
        "CRASHREG_KMSG": str(tmp_path / "kmsg"),
        "CRASHREG_WATCH_STATE": str(tmp_path / "watch-state.json"),
        "CRASHREG_BOOT_ID_FILE": str(tmp_path / "boot_id"),
        "CRASHREG_BOOT_LOG": str(tmp_path / "boots"),
        "CRASHREG_PSTORE_DIR": str(tmp_path / "pstore"),
        "CRASHREG_WATCH_QUIET": "3600",  # the test ends reports by what follows them, not by time
        "CRASHREG_RETRIES": "0",
    }
    return make_site(extra=values | extra)


def live_events(registry: Registry) -> list[dict]:
    found = []
    for signature in registry.get("/api/v1/signatures")["signatures"]:
        found += registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    return [registry.get(f"/api/v1/events/{e['id']}") for e in found]


def test_the_cutter_cuts_the_labs_reports_and_they_fingerprint_as_the_crash_kernels() -> None:
    cutter, cuts = Cutter(), []
    for record in records([kmsg_records(stream()).encode()]):
        cuts += cutter.feed(record)
    assert cutter.open is None
    headers = [cut.header.message for cut in cuts]
    assert [h.split(" at ")[0] for h in headers] == ["WARNING: CPU: 0 PID: 100"] * 5 + [
        "BUG: kernel NULL pointer dereference, address: 0000000000000000"]
    # Each ends with its stack's </TASK> and what belongs to it, not with the next line.
    assert cuts[0].records[-1].message.strip() == "</TASK>"
    assert cuts[-1].records[-1].message.startswith("CR2: ")
    def fingerprint(log: str) -> str:
        return analyse_report(log, None).fingerprint

    assert fingerprint(cuts[0].console_log()) == fingerprint(golden("lab/warn_1"))
    assert fingerprint(cuts[-1].console_log()) == fingerprint(golden("lab/null_deref_1"))


def test_kmsg_records_unescape_and_skip_dictionary_lines() -> None:
    record = parse_record(b"6,339,5140900,-,caller=T1;tab\\x09and\\x5cslash\n SUBSYSTEM=pci\n")
    assert record is not None and (record.level, record.seq, record.usec) == (6, 339, 5140900)
    assert record.message == "tab\tand\\slash"
    assert record.console_lines() == ["[    5.140900] tab\tand\\slash"]
    assert list(records([b" DEVICE=+pci:0000:00:01.0\n", b"garbage\n"])) == []


def test_a_watcher_killed_mid_report_resumes_without_loss_or_double(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    site = watch_site(make_site, tmp_path)
    lines = stream()
    cut_at = len(lines) - len(NULL_DEREF) - 6 + 12  # twelve lines into the NULL dereference
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(kmsg_records(lines[:cut_at]))
    env = {"CRASHREG_CONF": str(site.conf), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    first = subprocess.Popen([SYSTEM_PYTHON, "-I", str(site.reporter), "watch"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    warning_seq = 40 + 1  # the WARNING line follows "cut here" and the module's message
    sent = site.spool / "sent" / f"live-{BOOT_ID}-{warning_seq + 1:010d}.json"
    deadline = time.monotonic() + 60
    while not sent.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # no chance to save anything more
    _, first_err = first.communicate(timeout=30)
    assert sent.exists(), first_err
    [only] = live_events(registry)
    assert only["repeats"] == 0 and only["capture"]["action"] == "none"

    with kmsg.open("a") as out:
        out.write(kmsg_records(lines[cut_at:], first_seq=cut_at))
    second = run_reporter(site, "watch", "--once")
    assert second.returncode == 0, second.stderr
    oops_seq = len(lines) - len(NULL_DEREF) - 6
    resumed = int(re.search(r"from kmsg record (\d+) ", second.stderr)[1])
    assert warning_seq < resumed <= oops_seq  # past what was reported, never past the open report
    assert f"sent live-{BOOT_ID}-{warning_seq + 1:010d}:" not in second.stderr

    events = {e["title"].split(" in ")[0]: e for e in live_events(registry)}
    assert set(events) == {"WARNING", "BUG: kernel NULL pointer dereference"}
    warning, oops = events["WARNING"], events["BUG: kernel NULL pointer dereference"]
    assert warning["repeats"] == REPEATS  # five printed: one report, then the count of four
    assert [r["source"] for r in warning["reports"]] == ["live_kernel", "live_kernel"]
    assert len(oops["reports"]) == 1 and oops["repeats"] == 0
    assert oops["boot_id"] == BOOT_ID and oops["uptime_s"] == 30
    assert oops["fingerprint"] == analyse_report(golden("lab/null_deref_1"), None).fingerprint
    assert warning["signature"]["event_count"] == 1 and oops["signature"]["event_count"] == 1


def test_a_registry_outage_spools_and_nothing_is_sent_twice(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    site = watch_site(make_site, tmp_path, CRASHREG_URL=closed_port_url())
    (tmp_path / "kmsg").write_text(kmsg_records(stream()))
    offline = run_reporter(site, "watch", "--once")
    assert offline.returncode == 3, offline.stderr  # something waits in the spool
    spooled = sorted(p.name for p in site.spool.glob("live-*.json"))
    # in the order they are sent: the first report of the warning, its repeats, the oops
    assert len(spooled) == 3 and spooled[1].startswith(spooled[0].removesuffix(".json") + ".r")

    site.extra = (site.extra or {}) | {"CRASHREG_URL": registry.url}
    site.write()
    resent = run_reporter(site, "post-boot")
    assert resent.returncode == 0, resent.stderr
    again = run_reporter(site, "watch", "--once")  # the state says all of it was handled
    assert again.returncode == 0 and "sent live-" not in again.stderr, again.stderr
    events = live_events(registry)
    assert sorted(e["repeats"] for e in events) == [0, REPEATS]
    assert sum(len(e["reports"]) for e in events) == 3


# --- stopped every way: the registry's repeat count is the repeats printed ------------------


def repeated_warnings() -> list[Line]:
    """A boot, the warning printed 1 + REPEATS times a second apart, then ordinary lines that
    close the last one: the count is pending (the log never reaches the first report + 60 s)."""
    lines = WARN[:40]
    for n in range(1 + REPEATS):
        lines += shifted(WARNING, (20 + n) * 1_000_000)
    return lines + shifted(WARN[40:45], 31_000_000)


def start_watcher(site: Site, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    env = {"CRASHREG_CONF": str(site.conf), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    stderr = tmp_path / f"watch-{time.monotonic_ns()}.err"
    process = subprocess.Popen([SYSTEM_PYTHON, "-I", str(site.reporter), "watch"], env=env,
                               stdout=subprocess.DEVNULL, stderr=stderr.open("w"))
    return process, stderr


def wait_for(condition, process: subprocess.Popen, what: str) -> None:  # type: ignore[no-untyped-def]
    """Until `condition()` holds (the watcher's own files say it is there), or the watcher ended."""
    deadline = time.monotonic() + 60
    while not condition():
        assert process.poll() is None, f"the watcher ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within a minute"
        time.sleep(0.05)


def saved_state(tmp_path: Path) -> dict:
    try:
        return json.loads((tmp_path / "watch-state.json").read_text())
    except (OSError, ValueError):
        return {}


def counted(tmp_path: Path, lines: list[Line]) -> bool:
    """The state file holds every record handled and the repeats counted, not yet reported."""
    state = saved_state(tmp_path)
    pending = [r["pending"] for r in state.get("repeats", {}).values()]
    return state.get("seq") == len(lines) - 1 and pending == [REPEATS]


def stopped_with_a_count_pending(site: Site, tmp_path: Path, stop: signal.Signals) -> tuple[int, Path]:
    """The watcher fed repeated_warnings(), stopped by `stop` once it has counted the repeats:
    its exit status and its stderr's file."""
    lines = repeated_warnings()
    (tmp_path / "kmsg").write_text(kmsg_records(lines))
    process, stderr = start_watcher(site, tmp_path)
    wait_for(lambda: counted(tmp_path, lines), process, "the repeats counted")
    process.send_signal(stop)
    return process.wait(timeout=60), stderr


def warning_repeats(registry: Registry) -> int:
    [event] = live_events(registry)
    assert event["title"].startswith("WARNING") and event["boot_id"] == BOOT_ID
    return event["repeats"]


def test_sigterm_sends_the_pending_count(make_site, registry: Registry, tmp_path: Path) -> None:
    site = watch_site(make_site, tmp_path)
    status, stderr = stopped_with_a_count_pending(site, tmp_path, signal.SIGTERM)
    assert status == 0, stderr.read_text()
    assert warning_repeats(registry) == REPEATS
    assert not list(site.spool.glob("live-*.json"))


def test_sigkill_leaves_the_count_in_the_state_for_the_next_start(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    site = watch_site(make_site, tmp_path)
    stopped_with_a_count_pending(site, tmp_path, signal.SIGKILL)
    assert warning_repeats(registry) == 0
    restarted = run_reporter(site, "watch", "--once")
    assert restarted.returncode == 0, restarted.stderr
    assert warning_repeats(registry) == REPEATS
    again = run_reporter(site, "watch", "--once")  # nothing counted twice
    assert again.returncode == 0 and warning_repeats(registry) == REPEATS, again.stderr


def test_a_quiet_log_sends_the_count_once_its_interval_has_passed(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    """No record after the repeats: the poll timeout runs the log's clock on, and the count goes
    when it is the interval past the first report; the SIGKILL after it could not have sent it.
    The log's last record is 11 s after the first report: 1 s short of the interval."""
    site = watch_site(make_site, tmp_path, CRASHREG_WATCH_REPEAT_INTERVAL="12")
    lines = repeated_warnings()
    (tmp_path / "kmsg").write_text(kmsg_records(lines))
    process, stderr = start_watcher(site, tmp_path)
    repeats = site.spool / "sent"
    wait_for(lambda: any(repeats.glob("live-*.r*.json")), process, "the repeats' report sent")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert warning_repeats(registry) == REPEATS, stderr.read_text()


def test_a_reboot_sends_the_last_boots_pending_count(make_site, registry: Registry, tmp_path: Path) -> None:
    """The host goes down with a count pending (no chance to send it): the next boot's watcher
    sends it under the crashed boot's id, then follows its own boot."""
    site = watch_site(make_site, tmp_path)
    stopped_with_a_count_pending(site, tmp_path, signal.SIGKILL)
    (tmp_path / "boot_id").write_text("9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f\n")
    (tmp_path / "kmsg").write_text(kmsg_records(WARN[:40]))  # the new boot: nothing to report
    rebooted = run_reporter(site, "watch", "--once")
    assert rebooted.returncode == 0, rebooted.stderr
    assert warning_repeats(registry) == REPEATS
    state = saved_state(tmp_path)
    assert state["boot_id"].startswith("9c0d1e2f") and state["repeats"] == {}


def test_a_failing_read_is_retried_and_logged_not_fatal(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    """The source cannot be read (a directory: EISDIR on every read): the watcher logs it and
    retries with doubling delays, then reads the records once the source is readable."""
    site = watch_site(make_site, tmp_path)
    kmsg = tmp_path / "kmsg"
    kmsg.mkdir()
    process, stderr = start_watcher(site, tmp_path)
    wait_for(lambda: "retrying in 2s" in stderr.read_text(), process, "a second retry")
    assert "IsADirectoryError" in stderr.read_text()
    kmsg.rmdir()
    lines = repeated_warnings()
    kmsg.write_text(kmsg_records(lines))
    wait_for(lambda: counted(tmp_path, lines), process, "the records read")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, stderr.read_text()
    assert warning_repeats(registry) == REPEATS


def test_the_logs_clock_runs_on_while_it_is_quiet(tmp_path: Path) -> None:
    """The timer alone, on an injected clock: no report of the count before the interval has
    passed on the log's clock (its last record's time, run on by the clock), one after it, with
    the count and the time of the last occurrence counted (its body depends on the log alone)."""
    (tmp_path / "boot_id").write_text(BOOT_ID + "\n")
    config = Config(spool_dir=str(tmp_path / "spool"), boot_id_file=str(tmp_path / "boot_id"),
                    hostname="gpu-a017")
    now = [1000.0]
    watcher = Watcher(config, tmp_path / "state.json", 12.0, clock=lambda: now[0])
    for record in records([kmsg_records(repeated_warnings()).encode()]):
        watcher.take(record)
    first = sorted(p.name for p in (tmp_path / "spool").glob("live-*.json"))
    assert len(first) == 1  # the first report; the four repeats are counted

    now[0] += 0.9  # the log's clock: 31.0 + 0.9 s, short of the first report (20 s) + 12 s
    watcher.tick()
    assert sorted(p.name for p in (tmp_path / "spool").glob("live-*.json")) == first
    now[0] += 0.2
    watcher.tick()
    [repeat] = [p for p in (tmp_path / "spool").glob("live-*.r*.json")]
    body = json.loads(repeat.read_text())
    assert (body["repeat_count"], body["uptime_s"]) == (REPEATS, 20 + REPEATS)
    watcher.tick()  # sent once: nothing pending
    assert len(list((tmp_path / "spool").glob("live-*.json"))) == 2
