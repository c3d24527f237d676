"""agents/kdump/crashreg-kdump.sh for real: dash and busybox ash, curl, a live registry."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from registry.core.events import Report
from registry.db import Database
from registry.fingerprint.console import line_frames
from registry.fingerprint.frames import canonical_function
from registry.fingerprint.patterns import TRIGGERS
from registry.ingest import schemas
from tests.support import golden
from tests.support.agents import (
    BUSYBOX,
    CREATED,
    FIXTURES,
    KDUMP_SH,
    SHELLS,
    SYSTEM_PYTHON,
    FlakyFront,
    Registry,
    ScriptedServer,
    busybox_path,
    closed_port_url,
    control_character_console,
    run_reporter,
)

EXIT_SKIP = 10
# A console log cut short before any crash: the engine finds none in it.
NO_CRASH_LOG = FIXTURES / "no_crash" / "truncated.log"
HOOK = KDUMP_SH.with_name("kdump-tools-hook.sh")


def test_online_answers_become_makedumpfile_arguments(registry: Registry, make_site, run_sh) -> None:
    # K=3 by default: the first three crashes of a new bug are dumped in full, then skipped.
    sites = [make_site() for _ in range(4)]
    runs = [run_sh(site) for site in sites]
    assert [(r.returncode, r.args) for r in runs] == [(0, "-c -d 0")] * 3 + [(EXIT_SKIP, "")], runs[-1].stderr
    assert sites[3].decision()["CRASHREG_ACTION"] == "skip"

    site = make_site()
    first_event = registry.get(f"/api/v1/events/{sites[0].decision()['CRASHREG_EVENT_ID']}")
    filtered_17 = {"capture_policy": {"mode": "filtered", "dump_level": 17}}
    registry.patch_signature(first_event["signature"]["id"], filtered_17)
    filtered = run_sh(site)
    assert (filtered.returncode, filtered.args) == (0, "-c -d 17"), filtered.stderr
    decision = site.decision()
    assert decision["CRASHREG_ACTION"] == "filtered" and decision["MAKEDUMP_ARGS"] == "-c -d 17"
    assert decision["CRASHREG_DECIDED_BY"] == "registry"
    assert decision["CRASHREG_REPORT_ID"] == f"kdump-{site.boot_id}"
    assert site.spooled() == []
    # A rerun in the same crash kernel replays the kept body: same event, same answer.
    rerun = run_sh(site)
    assert (rerun.returncode, rerun.args) == (0, "-c -d 17"), rerun.stderr
    assert site.decision()["CRASHREG_EVENT_ID"] == decision["CRASHREG_EVENT_ID"]

    event = registry.get(f"/api/v1/events/{decision['CRASHREG_EVENT_ID']}")
    assert event["sources"] == ["crash_kernel"]
    assert (event["hostname"], event["boot_id"], event["uptime_s"]) == ("gpu-a017", site.boot_id, 86311)
    assert event["host"]["kernel_version"] == "6.1.0-13-amd64"
    assert event["signature"]["id"] == first_event["signature"]["id"]


def test_a_proxy_variable_left_in_the_environment_is_not_used(registry: Registry, make_site, run_sh) -> None:
    """The Python reporters read no proxy variable; curl did, so a stray one sent the crash
    kernel's report to a proxy that is not there (a fallback decision) and only for sh."""
    site = make_site()
    nowhere = closed_port_url()
    run = run_sh(site, environ={"http_proxy": nowhere, "HTTP_PROXY": nowhere, "https_proxy": nowhere})
    assert run.returncode == 0 and site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr


def test_a_config_line_that_does_not_parse_is_left_out_not_the_config(
        registry: Registry, make_site, run_sh) -> None:
    """An unbalanced quote on one line: that line is said and left out, as the Python reporter
    does; the rest (the registry, the spool, the decision file) holds. Before, every setting
    went back to its default: nothing sent, the host's real /var/spool and /run written."""
    site = make_site()
    with site.conf.open("a") as conf:
        conf.write('CRASHREG_MAX_TIME="5\n')
    run = run_sh(site)
    assert run.returncode == 0, run.stderr
    assert "config line 'CRASHREG_MAX_TIME=\"5' ignored" in run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr
    assert site.decision()["CRASHREG_REPORT_ID"] == f"kdump-{site.boot_id}"


def test_a_token_file_with_a_byte_order_mark_and_crlf_is_read_as_its_token(
        registry: Registry, make_site, run_sh, tmp_path: Path) -> None:
    """One rule for every token file (the Python reporter's): a UTF-8 byte-order mark and blanks
    around the token are left out. The sh reporter removed spaces, CR and LF only: the BOM went
    into the header, the registry answered 401, and the report fell back to the bundle."""
    token_file = tmp_path / "bom-token"
    token_file.write_bytes(b"\xef\xbb\xbf" + registry.report_token.encode() + b"\t\r\n")
    site = make_site(token_file=token_file)
    run = run_sh(site)
    assert run.returncode == 0, run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr


def test_help_is_an_answer_not_an_error(make_site) -> None:
    site = make_site()
    done = subprocess.run(["dash", str(KDUMP_SH), "--help"], capture_output=True, text=True, timeout=60,
                          env={"CRASHREG_CONF": str(site.conf), "PATH": os.environ["PATH"]}, check=False)
    assert done.returncode == 0 and done.stdout.startswith("usage: "), done


def test_a_full_spool_leaves_no_half_written_file(make_site, tmp_path: Path) -> None:
    """The spool on a full disk (a 16 KiB tmpfs, in a mount namespace of the test's own): the
    report cannot be kept, which is said, and its half-written copy is removed rather than
    left to fill what the decision file or a later report needs."""
    dmesg = tmp_path / "long.log"
    dmesg.write_bytes(control_character_console((FIXTURES / "mlx5_null_deref.log").read_bytes(), 64 << 10))
    site = make_site(url=closed_port_url(), dmesg=dmesg)
    site.spool.mkdir()
    script = (f'mount -t tmpfs -o size=16k tmpfs "{site.spool}" || exit 99\n'
              f'dash "{KDUMP_SH}" report >/dev/null\n'
              f'ls -A "{site.spool}" >&2\n')
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                          env={"CRASHREG_CONF": str(site.conf), "PATH": os.environ["PATH"]}, check=False)
    assert done.returncode != 99, done.stderr
    assert "could not spool the report" in done.stderr, done.stderr
    assert ".tmp" not in done.stderr.rsplit("crashreg-kdump: ", 1)[-1], done.stderr
    assert site.decision()["CRASHREG_ACTION"] == "filtered"  # decided all the same
    assert site.decision()["CRASHREG_DUMP_LEVEL"] == "31"  # the level it dumps at, not ''


def test_console_log_is_escaped_into_valid_json(registry: Registry, make_site, run_sh, database: Database,
                                                tmp_path: Path) -> None:
    nasty = (FIXTURES / "mlx5_null_deref.log").read_bytes() + (
        b'[86312.000001] comm="x\\y" tab\there cr\r\n'
        b"[86312.000002] utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 bad \xff cut \xc3 esc \x1b[0m nul\x00!\n"
    )
    dmesg = tmp_path / "nasty.log"
    dmesg.write_bytes(nasty)
    site = make_site(dmesg=dmesg)
    run = run_sh(site)
    assert run.returncode == 0, run.stderr
    with database.session() as session:
        stored = session.scalar(select(Report.console_log).where(Report.report_id == f"kdump-{site.boot_id}"))
    assert stored == nasty.replace(b"\0", b"").decode("utf-8", "replace")


def test_a_log_limit_past_the_contracts_sends_the_contracts(registry: Registry, make_site, run_sh,
                                                             database: Database, tmp_path: Path) -> None:
    """CRASHREG_MAX_LOG_BYTES set past the contract's 1 MiB bound on console_log (a 400, the
    report refused and the crash decided offline) sends the last 1 MiB, the crash at its end."""
    crash = (FIXTURES / "mlx5_null_deref.log").read_bytes()
    dmesg = tmp_path / "long.log"
    dmesg.write_bytes(b"[    1.000000] a line of a long boot's log\n" * 30_000 + crash)
    site = make_site(dmesg=dmesg, extra={"CRASHREG_MAX_LOG_BYTES": str(4 << 20)})
    run = run_sh(site)
    assert run.returncode == 0, run.stderr
    with database.session() as session:
        stored = session.scalar(select(Report.console_log).where(Report.report_id == f"kdump-{site.boot_id}"))
    assert stored is not None and stored.endswith(crash.decode())
    assert len(stored.encode()) <= schemas.MAX_CONSOLE_LOG_BYTES < dmesg.stat().st_size


# A serial line's noise: 100 bytes that are not UTF-8 (each U+FFFD, three bytes) in 181.
INVALID_UTF8_LINE = b"[    1.000000] " + b"\xff" * 100 + b"x" * 65 + b"\n"


@pytest.mark.parametrize("noise, refusal", [("control", "HTTP 413"), ("not-utf8", "HTTP 400")])
def test_a_noisy_console_past_the_registrys_bounds_arrives_with_its_tail(
        registry: Registry, make_site, run_sh, database: Database, tmp_path: Path, noise: str,
        refusal: str) -> None:
    """A kernel log's 512 KiB tail that passes the registry's bounds once sent is refused: as
    JSON past the 2 MiB body, a control character being six bytes there (413), or as text past
    the contract's 1 MiB, each byte that is not UTF-8 being three (400 naming console_log).
    Sent again with the newer half of its log, the crash at its end is registered (decided
    offline and spooled, then rejected at the post-boot resend, before)."""
    crash = (FIXTURES / "mlx5_null_deref.log").read_bytes()
    dmesg = tmp_path / "noisy.log"
    if noise == "control":
        dmesg.write_bytes(control_character_console(crash, 1 << 20))
    else:
        dmesg.write_bytes(INVALID_UTF8_LINE * 6_000 + crash)
    site = make_site(dmesg=dmesg)
    run = run_sh(site)
    assert run.returncode == 0, run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr
    assert refusal in run.stderr and "without the older half of its console log" in run.stderr
    with database.session() as session:
        stored = session.scalar(select(Report.console_log).where(Report.report_id == f"kdump-{site.boot_id}"))
    assert stored is not None and stored.endswith(crash.decode())
    assert site.spooled() == []


def test_a_spooled_noisy_console_is_resent_with_its_tail(
        registry: Registry, make_site, run_sh, database: Database, tmp_path: Path) -> None:
    """With the registry down, crashreg-kdump.sh spools a report whose log passes the
    contract's 1 MiB once each byte that is not UTF-8 is U+FFFD: the post-boot agent, refused
    with a 400 naming console_log, sends it with the newer half of its log (it set the report
    aside before, the crash never registered)."""
    crash = (FIXTURES / "mlx5_null_deref.log").read_bytes()
    dmesg = tmp_path / "noisy.log"
    dmesg.write_bytes(INVALID_UTF8_LINE * 6_000 + crash)
    site = make_site(url=closed_port_url(), dmesg=dmesg)
    assert run_sh(site).returncode == 0
    assert len(site.spooled()) == 1
    site.url = registry.url
    site.write()
    resent = run_reporter(site, "post-boot")
    assert resent.returncode == 0, resent.stderr
    assert "without the older half of its console log" in resent.stderr
    assert site.spooled() == [] and not (site.spool / "rejected").exists()
    with database.session() as session:
        stored = session.scalar(select(Report.console_log).where(Report.report_id == f"kdump-{site.boot_id}"))
    assert stored is not None and stored.endswith(crash.decode())


def test_network_down_decides_from_the_offline_bundle_and_spools(
    registry: Registry, make_site, run_sh
) -> None:
    known = make_site()
    assert run_sh(known).returncode == 0
    event = registry.get(f"/api/v1/events/{known.decision()['CRASHREG_EVENT_ID']}")
    registry.patch_signature(event["signature"]["id"], {"capture_policy": {"mode": "skip"}})

    # On the booted host: fetch the text bundle; a second fetch is a 304 and keeps the file.
    fetched = run_sh(known, "fetch-bundle")
    assert fetched.returncode == 0, fetched.stderr
    bundle_text = known.bundle.read_text()
    assert bundle_text.startswith("#crashreg-policy-bundle\t1\t")
    assert f"{event['fingerprint']}\tskip\t-\t" in bundle_text
    again = run_sh(known, "fetch-bundle")
    assert "unchanged" in again.stderr and known.bundle.read_text() == bundle_text

    # Crash kernels with the network down: the same bug is skipped, a new one dumped in full.
    down = closed_port_url()
    same_bug = make_site(url=down)
    shutil.copy(known.bundle, same_bug.bundle)
    offline = run_sh(same_bug)
    assert (offline.returncode, offline.args) == (EXIT_SKIP, ""), offline.stderr
    assert offline.stderr.count("curl exit 7") == 4  # one try and three retries
    assert same_bug.decision()["CRASHREG_DECIDED_BY"] == "bundle"
    [spooled] = same_bug.spooled()
    report = json.loads(spooled.read_bytes())
    assert (report["report_id"], report["source"], report["boot_id"]) == (
        f"kdump-{same_bug.boot_id}", "crash_kernel", same_bug.boot_id)
    assert "mlx5e_poll_rx_cq" in report["console_log"]

    new_bug = make_site(url=down, dmesg=FIXTURES / "ext4_bug_on.log")
    shutil.copy(known.bundle, new_bug.bundle)
    offline_new = run_sh(new_bug)
    assert (offline_new.returncode, offline_new.args) == (0, "-c -d 0"), offline_new.stderr
    assert "new bug" in new_bug.decision()["CRASHREG_REASON"]

    no_bundle = make_site(url=down)
    fallback = run_sh(no_bundle)
    assert (fallback.returncode, fallback.args) == (0, "-c -d 31")
    assert no_bundle.decision()["CRASHREG_DECIDED_BY"] == "fallback"


def test_post_boot_resend_joins_the_registry_never_duplicates(registry: Registry, make_site, run_sh) -> None:
    site = make_site(url=closed_port_url())
    assert run_sh(site).returncode == 0
    [spooled] = site.spooled()
    body = spooled.read_bytes()

    # The crash kernel's POST got through but its answer was lost: the registry has it already.
    first = registry.post_report(body)
    assert first.status_code == 201, first.text

    site.url = registry.url
    site.write()
    resent = run_reporter(site, "post-boot")
    assert resent.returncode == 0, resent.stderr
    assert "already registered" in resent.stderr
    assert site.spooled() == []

    event_id = first.json()["event_id"]
    event = registry.get(f"/api/v1/events/{event_id}")
    assert event["sources"] == ["crash_kernel"]
    assert [r["report_id"] for r in event["reports"]] == [f"kdump-{site.boot_id}"]
    events = registry.get(f"/api/v1/signatures/{event['signature']['id']}/events")
    assert len(events["events"]) == 1


def fake_makedumpfile(path: Path, exit_code: int = 0) -> Path:
    """Stands in for makedumpfile (no vmcore here): records its arguments, writes a 4 KiB dump
    to its last argument, exits with `exit_code`."""
    path.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$*" > "$0.args"\n'
        'for last; do :; done\nhead -c 4096 /dev/zero > "$last"\n'
        f"exit {exit_code}\n"
    )
    path.chmod(0o755)
    return path


def test_collect_runs_makedumpfile_and_records_the_capture(
    registry: Registry, make_site, run_sh, tmp_path: Path
) -> None:
    recorder = fake_makedumpfile(tmp_path / "makedumpfile")
    site = make_site(extra={"CRASHREG_MAKEDUMPFILE": str(recorder)})
    assert run_sh(site).returncode == 0
    target = str(tmp_path / "vmcore-incomplete")
    collected = run_sh(site, "collect", "-l", "--message-level", "7", "/proc/vmcore", target)
    assert collected.returncode == 0, collected.stderr
    recorded = Path(f"{recorder}.args").read_text().strip()
    assert recorded == f"-c -d 0 -l --message-level 7 /proc/vmcore {target}"
    event = registry.get(f"/api/v1/events/{site.decision()['CRASHREG_EVENT_ID']}")
    [capture] = event["captures"]
    assert (capture["method"], capture["status"], capture["dump_level"]) == ("makedumpfile", "completed", 0)
    assert (capture["bytes"], capture["target"]) == (4096, target)
    assert capture["downtime_s"] >= 0

    failing = fake_makedumpfile(tmp_path / "makedumpfile-fails", exit_code=1)
    broken = make_site(extra={"CRASHREG_MAKEDUMPFILE": str(failing)})
    assert run_sh(broken).returncode == 0
    assert run_sh(broken, "collect", "/proc/vmcore", target).returncode == 1
    event = registry.get(f"/api/v1/events/{broken.decision()['CRASHREG_EVENT_ID']}")
    assert [c["status"] for c in event["captures"]] == ["failed"]


def test_offline_capture_is_recorded_after_the_reboot(
    registry: Registry, make_site, run_sh, tmp_path: Path
) -> None:
    recorder = fake_makedumpfile(tmp_path / "makedumpfile")
    site = make_site(url=closed_port_url(), extra={"CRASHREG_MAKEDUMPFILE": str(recorder)})
    assert run_sh(site).returncode == 0
    target = str(tmp_path / "dump")
    assert run_sh(site, "collect", "/proc/vmcore", target).returncode == 0
    assert (site.spool / f"kdump-{site.boot_id}.capture").exists()
    # A second run that fails (the collector run again, its makedumpfile failing) does not undo
    # the dump the first took: the completed capture stays spooled (a failed one replaced it).
    failing = tmp_path / "failing-makedumpfile"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    site.extra = {"CRASHREG_MAKEDUMPFILE": str(failing)}
    site.write()
    again = run_sh(site, "collect", "/proc/vmcore", str(tmp_path / "dump-again"))
    assert again.returncode != 0 and "a completed capture of this crash waits" in again.stderr, again.stderr

    site.url = registry.url
    site.write()
    resent = run_reporter(site, "post-boot")
    assert resent.returncode == 0, resent.stderr
    assert list(site.spool.glob("*.capture")) == [] and site.spooled() == []
    [signature] = registry.get("/api/v1/signatures?limit=5")["signatures"]
    [event] = registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    captures = registry.get(f"/api/v1/events/{event['id']}")["captures"]
    assert [(c["status"], c["bytes"], c["target"]) for c in captures] == [("completed", 4096, target)]


def test_overloaded_registry_is_retried_with_backoff(registry: Registry, make_site, run_sh) -> None:
    with FlakyFront(registry.url, failures=2) as front:
        site = make_site(url=front.url)
        run = run_sh(site)
    assert (run.returncode, run.args) == (0, "-c -d 0"), run.stderr
    assert front.seen == 3 and run.stderr.count("HTTP 503") == 2
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry" and site.spooled() == []


def test_numeric_settings_the_shell_cannot_count_with_never_fail_closed(
        registry: Registry, make_site, run_sh) -> None:
    """CRASHREG_RETRY_DELAY=0.5 is valid for the Python reporters: the first retry's
    $((delay * 2)) ended dash ("Illegal number") and busybox ash, exit 2, no decision, nothing
    spooled. A fraction of seconds is rounded up now; garbage is said once and the default taken."""
    with FlakyFront(registry.url, failures=1) as front:
        odd = {"CRASHREG_RETRY_DELAY": "0.5", "CRASHREG_CONNECT_TIMEOUT": "2.5", "CRASHREG_MAX_TIME": "lots",
               "CRASHREG_RETRIES": " 2 "}
        site = make_site(url=front.url, extra=odd)
        run = run_sh(site)
    assert (run.returncode, run.args) == (0, "-c -d 0"), run.stderr
    assert front.seen == 2 and site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr
    assert run.stderr.count("is not a") == 1, run.stderr
    assert "CRASHREG_MAX_TIME='lots' is not a number of seconds: 20 taken" in run.stderr


def test_a_retry_after_past_the_deadline_ends_the_delivery_at_once(make_site, run_sh) -> None:
    """The registry says come back in an hour (Retry-After on a 503): the crash kernel does not
    retry regardless (four attempts), nor wait the hour: it decides offline and spools now."""
    busy = (503, {"Retry-After": "3600"}, b'{"error": "busy"}')
    with ScriptedServer([busy]) as server:
        site = make_site(url=server.url, extra={"CRASHREG_DEADLINE": "60"})
        run = run_sh(site)
    assert (run.returncode, run.args) == (0, "-c -d 31"), run.stderr
    assert len(server.seen) == 1 and site.decision()["CRASHREG_DECIDED_BY"] == "fallback"
    assert "no attempt after a wait of 36" in run.stderr and "(CRASHREG_DEADLINE, 60 s)" in run.stderr
    assert len(site.spooled()) == 1


def test_a_retry_after_within_the_deadline_is_waited_and_retried(make_site, run_sh) -> None:
    with ScriptedServer([(503, {"Retry-After": "0"}, b""), CREATED]) as server:
        site = make_site(url=server.url)
        run = run_sh(site)
    assert (run.returncode, run.args) == (0, "-c -d 0"), run.stderr
    assert len(server.seen) == 2 and site.decision()["CRASHREG_DECIDED_BY"] == "registry"


def test_offline_match_by_the_python_fingerprinter(registry: Registry, make_site, run_sh) -> None:
    known = make_site()
    assert run_sh(known).returncode == 0
    event = registry.get(f"/api/v1/events/{known.decision()['CRASHREG_EVENT_ID']}")
    filtered_7 = {"capture_policy": {"mode": "filtered", "dump_level": 7}}
    registry.patch_signature(event["signature"]["id"], filtered_7)
    assert run_sh(known, "fetch-bundle").returncode == 0

    fingerprinter = f"{SYSTEM_PYTHON} -I {known.reporter} fingerprint"
    site = make_site(url=closed_port_url(), extra={"CRASHREG_FINGERPRINTER": fingerprinter})
    shutil.copy(known.bundle, site.bundle)
    run = run_sh(site)
    assert (run.returncode, run.args) == (0, "-c -d 7"), run.stderr
    assert event["fingerprint"] in site.decision()["CRASHREG_REASON"]
    [spooled] = site.spooled()
    assert json.loads(spooled.read_bytes())["fingerprint"] == event["fingerprint"]


def test_kernel_log_comes_from_makedumpfile_else_vmcore_dmesg(
    registry: Registry, make_site, run_sh, tmp_path: Path
) -> None:
    # Stand-ins for the two extractors (no vmcore here): makedumpfile --dump-dmesg VMCORE OUT
    # writes OUT; vmcore-dmesg VMCORE prints the log. The first that yields a log wins.
    log = FIXTURES / "ext4_bug_on.log"
    writes = _tool(tmp_path / "makedumpfile-ok", f'[ "$1" = --dump-dmesg ] && cp "{log}" "$3"')
    fails = _tool(tmp_path / "makedumpfile-old", "exit 1")
    prints = _tool(tmp_path / "vmcore-dmesg", f'[ "$1" = /proc/vmcore ] && cat "{log}"')
    for makedumpfile in (writes, fails):
        extractors = {"CRASHREG_MAKEDUMPFILE": str(makedumpfile), "CRASHREG_VMCORE_DMESG": str(prints)}
        site = make_site(extra={"CRASHREG_DMESG_FILE": ""} | extractors)
        run = run_sh(site)
        assert run.returncode == 0, run.stderr
        event = registry.get(f"/api/v1/events/{site.decision()['CRASHREG_EVENT_ID']}")
        assert event["uptime_s"] == 5120  # the ext4 log's last timestamp
        # The Python reporter on the same crash replays the kept body: the same event.
        python = run_reporter(site, "report")
        assert python.returncode == 0, python.stderr
        assert site.decision()["CRASHREG_EVENT_ID"] == event["id"]


def _tool(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_nothing_that_breaks_stops_the_dump(registry: Registry, make_site, run_sh, tmp_path: Path) -> None:
    # No temp dir at all: no report, but still the fallback dump.
    site = make_site()
    broken = run_sh(site, tmpdir=tmp_path / "does-not-exist")
    assert (broken.returncode, broken.args) == (0, "-c -d 31"), broken.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "fallback"

    # Network down and a spool that cannot be written: the bundle still decides.
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    offline = make_site(url=closed_port_url(), dmesg=FIXTURES / "ext4_bug_on.log",
                        extra={"CRASHREG_SPOOL_DIR": str(blocked)})
    offline.bundle.write_text("#crashreg-policy-bundle\t1\tv\t2026-11-29T00:00:00+00:00\n")
    run = run_sh(offline)
    assert (run.returncode, run.args) == (0, "-c -d 0"), run.stderr
    assert "could not spool" in run.stderr


def test_kdump_tools_defaults_hook_sets_makedumpfile_args_or_skips(
    registry: Registry, make_site, tmp_path: Path
) -> None:
    """agents/kdump/kdump-tools-hook.sh as kdump-config (dash) sources it for `savecore`; the
    decision file is named in the reporter's config alone (the hook read the default path,
    and a skip there was not honoured)."""
    vmcore = tmp_path / "vmcore"
    vmcore.write_bytes(b"\x7fELF")
    kdump_config = tmp_path / "kdump-config"
    # The part of kdump-config's savecore that matters here: source the defaults, then dump.
    kdump_config.write_text(
        f'. "{HOOK}"\nMAKEDUMP_ARGS=${{MAKEDUMP_ARGS:="-c -d 31"}}\n'
        'echo "makedumpfile $MAKEDUMP_ARGS -F /proc/vmcore"\n'
    )
    answers = []
    for _ in range(4):  # K=3 full captures, then skip
        site = make_site()
        env = {"PATH": os.environ["PATH"], "CRASHREG_CONF": str(site.conf), "CRASHREG_VMCORE": str(vmcore),
               "CRASHREG_HOOK": str(KDUMP_SH)}
        done = subprocess.run(["dash", str(kdump_config), "savecore"], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        answers.append((done.returncode, done.stdout.strip()))
    assert answers == [(0, "makedumpfile -c -d 0 -F /proc/vmcore")] * 3 + [(0, "")]


def test_post_boot_reads_the_capture_kdump_tools_left(
    registry: Registry, make_site, run_sh, tmp_path: Path
) -> None:
    """Debian/Ubuntu: kdump-tools runs makedumpfile itself; after the reboot the post-boot agent
    records the capture from the dump directory it left in KDUMP_COREDIR."""
    coredir = tmp_path / "crash"
    coredir.mkdir()
    (coredir / "kdump_lock").write_text("")  # kdump-tools' own files are not dump directories
    site = make_site(extra={"CRASHREG_KDUMP_COREDIR": str(coredir)})
    assert run_sh(site).returncode == 0
    reported = (site.spool / "sent" / f"kdump-{site.boot_id}.json").stat().st_mtime

    # What kdump-config savecore leaves: dmesg first, then the dump, 30 s later.
    stamp = coredir / "202611291805"
    stamp.mkdir()
    dmesg, dump = stamp / "dmesg.202611291805", stamp / "dump.202611291805"
    dmesg.write_text("[86311.612230] Kernel panic - not syncing: Fatal exception in interrupt\n")
    dump.write_bytes(b"\0" * 8192)
    for path, at in ((dmesg, reported + 1), (dump, reported + 31), (stamp, reported + 31)):
        os.utime(path, (at, at))

    first, second = run_reporter(site, "post-boot"), run_reporter(site, "post-boot")
    assert first.returncode == second.returncode == 0, first.stderr
    assert "capture completed" in first.stderr
    assert "capture" not in second.stderr  # examined once, not posted again
    event = registry.get(f"/api/v1/events/{site.decision()['CRASHREG_EVENT_ID']}")
    [capture] = event["captures"]
    assert (capture["status"], capture["dump_level"], capture["bytes"]) == ("completed", 0, 8192)
    assert (capture["duration_s"], capture["target"]) == (30.0, str(dump))


def offline_names(shell: str, logs: list[str], tmp_path: Path) -> list[str]:
    """crashreg-kdump.sh guilty-function on each log, under dash, or busybox ash with only
    busybox's applets on PATH, as a crash kernel's initramfs runs it."""
    files = []
    for index, text in enumerate(logs):
        files.append(tmp_path / f"log-{index}")
        files[-1].write_text(text)
    command, path = (["dash"], "/usr/bin:/bin") if shell == "dash" else (
        [str(BUSYBOX), "ash"], busybox_path(tmp_path))
    done = subprocess.run([*command, str(KDUMP_SH), "guilty-function", *map(str, files)],
                          capture_output=True, text=True, check=True, timeout=60,
                          env={"CRASHREG_CONF": str(tmp_path / "none.conf"), "PATH": path})
    return done.stdout.split("\n")[:len(logs)]


RAW_SYMBOL = re.compile(r"([A-Za-z_][\w.$]*)\+0x[0-9a-f]+/0x")
AWKWARD = ["__x64_sys_ioctl", "__do_sys_bpf", "ksys_mount", "__se_sys_sendmsg", "SyS_write",
           "nvme_queue_rq.lto_priv.0", "xfrm_output_resume.isra.0.cold.83", "_Z8fakeNameiii",
           "_ZN6kernel4sync3arc3Arc4drop17h0123456789abcdefE", "_ZN4core3ptr5write17h01E",
           "sys_", "__x64_"]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_offline_matcher_names_functions_as_the_engine_does(shell: str, tmp_path: Path) -> None:
    """Every symbol of every golden log (and the awkward ones: wrappers, clone suffixes, mangled
    names) through the sh fallback's normaliser gives the engine's name, so a bundle row written
    from a signature's function matches the sh's reading of the same crash."""
    symbols = sorted({raw for case in golden.cases() for raw in RAW_SYMBOL.findall(case.log)}
                     | set(AWKWARD))
    logs = [f"[  1.000000] RIP: 0010:{symbol}+0x1a/0x90\n" for symbol in symbols]
    named = dict(zip(symbols, offline_names(shell, logs, tmp_path), strict=True))
    assert len(symbols) > 300
    assert {s: n for s, n in named.items() if n != canonical_function(s)} == {}


@pytest.mark.parametrize("shell", SHELLS)
def test_the_offline_matcher_reads_a_function_the_engine_reads_on_every_golden_log(
        shell: str, tmp_path: Path) -> None:
    cases = golden.cases()
    found = offline_names(shell, [case.log for case in cases], tmp_path)
    read_by_engine = [{name for line in case.log.splitlines() for name, _, _ in line_frames(line)}
                      for case in cases]
    strays = {case.name: name for case, name, names in zip(cases, found, read_by_engine, strict=True)
              if name and name not in names}
    assert strays == {}
    assert sum(bool(name) for name in found) > len(cases) // 2


def test_the_sh_reporters_crash_triggers_are_the_engines() -> None:
    """A log with none of them is one the engine finds no crash in: the sh decides such a log by
    the bundle's #no_signature line, so its list must be the engine's own."""
    listed = re.search(r"^CRASH_TRIGGERS='(.*?)'$", KDUMP_SH.read_text(), re.MULTILINE | re.DOTALL)
    assert listed is not None
    assert tuple(listed.group(1).split("\n")) == TRIGGERS


def test_a_log_without_a_crash_is_decided_by_the_no_signature_budget_online_and_offline(
    registry: Registry, make_site, run_sh
) -> None:
    """Online the registry answers from the budget; the bundle fetched for this host says its
    budget is spent, so offline the same host skips too (and a bundle for no host would not)."""
    online = make_site(dmesg=NO_CRASH_LOG)
    first = run_sh(online)
    assert (first.returncode, first.args) == (0, "-c -d 0"), first.stderr
    reason = online.decision()["CRASHREG_REASON"]
    assert reason.startswith("no recognisable crash in the report: full capture 1"), reason
    fetched = run_sh(online, "fetch-bundle")
    assert fetched.returncode == 0, fetched.stderr
    [line] = [line for line in online.bundle.read_text().splitlines() if line.startswith("#no_signature\t")]
    assert line.split("\t")[1:4] == ["skip", "-", "-"]
    assert "this host has had its 1 full capture(s)" in line

    offline = make_site(url=closed_port_url(), dmesg=NO_CRASH_LOG)
    shutil.copy(online.bundle, offline.bundle)
    skipped = run_sh(offline)
    assert (skipped.returncode, skipped.args) == (EXIT_SKIP, ""), skipped.stderr
    decision = offline.decision()
    assert decision["CRASHREG_DECIDED_BY"] == "bundle"
    assert decision["CRASHREG_REASON"].startswith("offline: no recognisable crash in the report: this host")

    # A crash the bundle does not know is still a new bug, whatever the no-signature line says.
    new_bug = make_site(url=closed_port_url(), dmesg=FIXTURES / "ext4_bug_on.log")
    shutil.copy(online.bundle, new_bug.bundle)
    assert run_sh(new_bug).args == "-c -d 0"
    assert "new bug" in new_bug.decision()["CRASHREG_REASON"]
