"""The reporter (crashreg-report.pyz, built from agents/crashreg_report.py and the engine package):
same behaviour as the sh hook, plus the registry's own fingerprints."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from agents import build_reporter
from agents.reporter.config import Config, parse_conf
from agents.reporter.decide import Decision, makedumpfile_args
from agents.reporter.report import MAX_CONSOLE_LOG_BYTES, tail_text
from registry.config import Settings
from registry.ingest import schemas
from registry.signatures.identify import identify
from tests.support import DATA
from tests.support.agents import (
    FIXTURES,
    REPO,
    SYSTEM_PYTHON,
    FlakyFront,
    Registry,
    closed_port_url,
    control_character_console,
    run_reporter,
)
from tests.support.gunicorn import serving

EXIT_SKIP = 10
# A console log cut short before any crash: the engine finds none in it.
NO_CRASH_LOG = FIXTURES / "no_crash" / "truncated.log"
VECTORS = DATA / "vectors.json"
ENGINE = REPO / "registry" / "fingerprint"
FIXTURE_LOGS = sorted(FIXTURES.glob("*.log"))


def shared_vectors() -> list[dict]:
    """The signature engine's shared test vectors: console logs / stacks with their fingerprints."""
    if not VECTORS.exists():
        return []
    data = json.loads(VECTORS.read_text())
    return data["vectors"] if isinstance(data, dict) else data


def test_the_built_reporter_gives_the_servers_fingerprints_on_the_shared_vectors(
    installed: Path, tmp_path: Path
) -> None:
    """The pyz, run by the system python3 as a host runs it: stdlib only, the registry's engine."""
    vectors = shared_vectors()
    assert vectors, f"{VECTORS.relative_to(REPO)} holds no vectors"
    files = []
    for index, vector in enumerate(vectors):
        console_log, stack = vector.get("console_log"), vector.get("stack")
        path = tmp_path / f"vector-{index}"
        if stack:  # a contract report; a console log goes in as the file it would be on a host
            path.write_text(json.dumps({"console_log": console_log, "stack": stack}))
        else:
            path.write_text(console_log or "")
        files.append(str(path))
    pyz = installed / "crashreg-report.pyz"
    done = subprocess.run([SYSTEM_PYTHON, "-I", str(pyz), "fingerprint", *files], capture_output=True,
                          text=True, timeout=120, check=False, cwd=tmp_path,
                          env={"CRASHREG_CONF": str(tmp_path / "none.conf"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    server = [identify(v.get("console_log"), v.get("stack")) for v in vectors]
    expected = [(v.get("name"), s.fingerprint if s else "") for v, s in zip(vectors, server, strict=True)]
    assert list(zip([v.get("name") for v in vectors], done.stdout.splitlines(), strict=True)) == expected
    assert [fingerprint for _, fingerprint in expected] == [v.get("fingerprint") or "" for v in vectors]


def test_the_pyz_holds_the_reporter_and_the_engine_only_and_builds_reproducibly(
    installed: Path, tmp_path: Path
) -> None:
    again = build_reporter.build(tmp_path / "again.pyz")
    assert again.read_bytes() == (installed / "crashreg-report.pyz").read_bytes()
    assert again.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(again) as archive:
        names = set(archive.namelist())
    engine = {f"registry/fingerprint/{p.relative_to(ENGINE).as_posix()}" for p in ENGINE.rglob("*.py")
              if "__pycache__" not in p.parts}
    assert engine <= names
    agents = {f"agents/{name}/{p.relative_to(REPO / 'agents' / name).as_posix()}"
              for name in build_reporter.AGENT_PACKAGES for p in (REPO / "agents" / name).rglob("*.py")}
    assert agents and agents <= names
    sources = {n for n in names if not n.endswith((".pyc", "/"))}
    assert {n for n in sources if not n.startswith("registry/fingerprint/")} - agents == {
        "__main__.py", "agents/crashreg_report.py", "registry/__init__.py"}
    # Every module but __main__ has unchecked-hash bytecode beside it, for the Python that built it.
    assert {n for n in names if n.endswith(".pyc")} == {f"{n}c" for n in sources if n.endswith(".py")} - {
        "__main__.pyc"}
    with zipfile.ZipFile(again) as archive:
        header = archive.read("agents/crashreg_report.pyc")[:8]
    assert header == importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")  # hash-based, unchecked
    assert not any("__pycache__" in n for n in names)


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=lambda p: p.stem)
def test_local_fingerprint_equals_the_live_registrys(registry: Registry, make_site, log: Path) -> None:
    site = make_site(dmesg=log)
    run = run_reporter(site, "report")
    assert run.returncode == 0, run.stderr
    event = registry.get(f"/api/v1/events/{site.decision()['CRASHREG_EVENT_ID']}")
    local = run_reporter(site, "fingerprint", str(log)).stdout.strip()
    assert local and event["fingerprint"] == local


def test_online_report_prints_makedumpfile_arguments(registry: Registry, make_site) -> None:
    sites = [make_site() for _ in range(4)]
    runs = [run_reporter(site, "report") for site in sites]
    expected = [(0, "-c -d 0")] * 3 + [(EXIT_SKIP, "")]
    assert [(r.returncode, r.args) for r in runs] == expected, runs[-1].stderr
    decision = sites[0].decision()
    assert (decision["CRASHREG_ACTION"], decision["MAKEDUMP_ARGS"]) == ("full", "-c -d 0")
    event = registry.get(f"/api/v1/events/{decision['CRASHREG_EVENT_ID']}")
    assert event["sources"] == ["crash_kernel"]
    assert (event["boot_id"], event["uptime_s"]) == (sites[0].boot_id, 86311)
    assert all(site.spooled() == [] for site in sites)


def test_offline_decision_matches_the_bundle_by_local_fingerprint(registry: Registry, make_site) -> None:
    known = make_site()
    assert run_reporter(known, "report").returncode == 0
    event = registry.get(f"/api/v1/events/{known.decision()['CRASHREG_EVENT_ID']}")
    filtered_23 = {"capture_policy": {"mode": "filtered", "dump_level": 23}}
    registry.patch_signature(event["signature"]["id"], filtered_23)

    fetched = run_reporter(known, "fetch-bundle")
    assert fetched.returncode == 0 and "updated" in fetched.stderr, fetched.stderr
    bundle = json.loads(known.bundle_json.read_text())
    assert {(e["fingerprint"], e["action"], e["dump_level"]) for e in bundle["entries"]} == {
        (event["fingerprint"], "filtered", 23)
    }
    assert known.bundle.read_text().startswith("#crashreg-policy-bundle\t")
    assert "unchanged" in run_reporter(known, "fetch-bundle").stderr  # ETag: 304 for both forms

    down = closed_port_url()
    same_bug = make_site(url=down)
    new_bug = make_site(url=down, dmesg=FIXTURES / "ext4_bug_on.log")
    for site in (same_bug, new_bug):
        site.bundle_json.write_bytes(known.bundle_json.read_bytes())
    same = run_reporter(same_bug, "report")
    assert (same.returncode, same.args) == (0, "-c -d 23"), same.stderr
    assert same.stderr.count("crashreg-report: attempt ") == 4  # one try and three retries
    assert same_bug.decision()["CRASHREG_DECIDED_BY"] == "bundle"
    new = run_reporter(new_bug, "report")
    assert (new.returncode, new.args) == (0, "-c -d 0")
    assert "a new bug" in new_bug.decision()["CRASHREG_REASON"]
    [spooled] = same_bug.spooled()
    assert json.loads(spooled.read_bytes())["fingerprint"] == event["fingerprint"]


def test_post_boot_keeps_what_it_cannot_send_and_sends_it_later(registry: Registry, make_site) -> None:
    site = make_site(url=closed_port_url())
    assert run_reporter(site, "report").returncode == 0
    [spooled] = site.spooled()
    body = spooled.read_bytes()

    still_down = run_reporter(site, "post-boot")
    assert still_down.returncode == 3 and site.spooled() == [spooled]  # kept for the next try

    with FlakyFront(registry.url, failures=1) as front:
        site.url = front.url
        site.write()
        resent = run_reporter(site, "post-boot")
    assert resent.returncode == 0, resent.stderr
    assert front.seen == 2 and site.spooled() == []
    # The same body again (a second resend) is a replay: one report, one event.
    replay = registry.post_report(body)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    event = registry.get(f"/api/v1/events/{replay.json()['event_id']}")
    assert [r["report_id"] for r in event["reports"]] == [f"kdump-{site.boot_id}"]


def test_a_token_file_with_a_byte_order_mark_is_read_as_its_token(
        registry: Registry, make_site, tmp_path: Path) -> None:
    """An editor's UTF-8 byte-order mark before the token (a header no HTTP request can carry:
    the report was lost to the fallback decision, never spooled)."""
    token_file = tmp_path / "bom-token"
    token_file.write_bytes(b"\xef\xbb\xbf" + registry.report_token.encode() + b"\r\n")
    site = make_site(token_file=token_file)
    run = run_reporter(site, "report")
    assert run.returncode == 0, run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr


def test_a_token_no_header_can_carry_keeps_the_report_for_the_resend(
        registry: Registry, make_site, tmp_path: Path) -> None:
    """A token file holding what no token has (a character past Latin-1) is said, the report
    goes without a token and is kept on the 401, and the post-boot resend says the same, with
    no traceback; once the file is mended, the resend delivers it."""
    token_file = tmp_path / "bad-token"
    token_file.write_text("tok\u20ac" + registry.report_token + "\n")
    site = make_site(token_file=token_file)
    run = run_reporter(site, "report")
    assert run.returncode == 0, run.stderr
    assert "holds characters no token has" in run.stderr and "Traceback" not in run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "fallback", run.stderr  # no bundle here
    assert site.decision()["CRASHREG_DUMP_LEVEL"] == "31"  # the level it dumps at, not ''
    assert "HTTP 401" in run.stderr and "b'" not in run.stderr  # the registry's words, as text
    [spooled] = site.spooled()
    again = run_reporter(site, "post-boot")
    assert again.returncode == 3 and "Traceback" not in again.stderr, again.stderr
    assert site.spooled() == [spooled]
    token_file.write_text(registry.report_token + "\n")
    assert run_reporter(site, "post-boot").returncode == 0 and site.spooled() == []


def test_post_boot_sets_aside_reports_the_registry_refuses(registry: Registry, make_site) -> None:
    site = make_site()
    site.spool.mkdir()
    (site.spool / "kdump-broken.json").write_text('{"report_id": "kdump-broken", "source": "crash_kernel"}')
    run = run_reporter(site, "post-boot")
    assert run.returncode == 0 and site.spooled() == []
    assert (site.spool / "rejected" / "kdump-broken.json").exists()
    assert "HTTP 400" in run.stderr


def test_a_noisy_console_past_the_registrys_body_limit_arrives_with_its_tail(
        registry: Registry, make_site, tmp_path: Path) -> None:
    """A kernel log within the contract's 1 MiB whose JSON passes the registry's 2 MiB body
    (a control character is six bytes there) is refused with a 413: the reporter sends it again
    with the newer half of its log, and the crash at its end is registered, from the crash
    kernel or from the post-boot resend of a spooled report (spooled, then rejected, before)."""
    crash = (FIXTURES / "mlx5_null_deref.log").read_bytes()
    dmesg = tmp_path / "noisy.log"
    dmesg.write_bytes(control_character_console(crash, 1 << 20))
    offline = make_site(url=closed_port_url(), dmesg=dmesg)
    assert run_reporter(offline, "report").returncode == 0
    [spooled] = offline.spooled()
    assert len(spooled.read_bytes()) > Settings().max_body_bytes

    site = make_site(dmesg=dmesg)
    run = run_reporter(site, "report")
    assert run.returncode == 0, run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr
    assert "too large" in run.stderr and "without the older half of its console log" in run.stderr
    event = registry.get(f"/api/v1/events/{site.decision()['CRASHREG_EVENT_ID']}")
    crashed = identify(crash.decode(), None)
    assert crashed is not None and event["fingerprint"] == crashed.fingerprint
    [kept] = sorted((site.spool / "sent").glob("*.json"))
    assert json.loads(kept.read_bytes())["console_log"].endswith(crash.decode())

    offline.url = registry.url
    offline.write()
    resent = run_reporter(offline, "post-boot")
    assert resent.returncode == 0, resent.stderr
    assert offline.spooled() == [] and not (offline.spool / "rejected").exists()
    taken = (offline.spool / "sent" / spooled.name).read_bytes()
    assert len(taken) < Settings().max_body_bytes
    assert json.loads(taken)["console_log"].endswith(crash.decode())


def test_a_body_gunicorn_refuses_unread_arrives_slimmer(
        make_site, make_token, db_url: str, tmp_path: Path) -> None:
    """Served by gunicorn as in production: a report with a 1 MiB tail of control characters
    (6 MiB of JSON) is answered 413 before gunicorn reads it, and the connection closed under
    the reporter's send. It reads that answer after the failed send and sends the newer half of
    its log; before, a broken pipe, retried, spooled, and the same at every post-boot resend."""
    crash = (FIXTURES / "mlx5_null_deref.log").read_bytes()
    dmesg = tmp_path / "noisy.log"
    dmesg.write_bytes(control_character_console(crash, 1 << 20))
    token_file = tmp_path / "served-token"
    token_file.write_text(make_token("report", kind="agent") + "\n")
    folder = tmp_path / "gunicorn"
    folder.mkdir()
    with serving(db_url, folder) as port:
        site = make_site(url=f"http://127.0.0.1:{port}", token_file=token_file, dmesg=dmesg,
                         extra={"CRASHREG_MAX_LOG_BYTES": str(1 << 20)})
        run = run_reporter(site, "report")
    assert run.returncode == 0, run.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "registry", run.stderr
    assert "too large" in run.stderr and "Broken pipe" not in run.stderr
    assert site.spooled() == []
    [kept] = sorted((site.spool / "sent").glob("*.json"))
    assert json.loads(kept.read_bytes())["console_log"].endswith(crash.decode())


def test_config_file_is_read_like_a_shell_would() -> None:
    values = parse_conf(
        "# comment\nCRASHREG_URL='https://crashreg.example:8443'\nexport CRASHREG_RETRIES=5\n"
        'CRASHREG_COMPRESSION="-l --message-level 1"  # lzo\nnot a setting\nCRASHREG_HOSTNAME=\n'
        "CRASHREG_CA_FILE='unbalanced\n"
    )
    assert values == {
        "CRASHREG_URL": "https://crashreg.example:8443",
        "CRASHREG_RETRIES": "5",
        "CRASHREG_COMPRESSION": "-l --message-level 1",
        "CRASHREG_HOSTNAME": "",
    }
    config = Config.from_values(values)
    assert (config.retries, config.connect_timeout) == (5, 5.0)
    decision = Decision("filtered", "", None, "registry")
    assert makedumpfile_args(config, decision) == ["-l", "--message-level", "1", "-d", "31"]


def test_kernel_log_tail_starts_on_a_whole_line() -> None:
    raw = b"[ 1.0] first line\n[ 2.0] second\x00 line\n[ 3.0] third \xff line\n"
    whole = "[ 1.0] first line\n[ 2.0] second line\n[ 3.0] third \ufffd line\n"
    assert tail_text(raw, 1000) == whole
    assert tail_text(raw, 30) == "[ 3.0] third \ufffd line\n"


def test_kernel_log_tail_stays_within_its_bytes_and_the_contracts() -> None:
    """A console's bytes that are not UTF-8 (serial noise) read as U+FFFD, three bytes each: the
    tail is cut again to its bound, and never past the contract's (a 400 refused the whole
    report), whatever CRASHREG_MAX_LOG_BYTES says."""
    assert MAX_CONSOLE_LOG_BYTES == schemas.MAX_CONSOLE_LOG_BYTES
    noisy = tail_text(b"\xff" * 600_000 + b"\n[ 9.0] Kernel panic - not syncing: Fatal exception\n", 524_288)
    assert noisy == "[ 9.0] Kernel panic - not syncing: Fatal exception\n"
    for raw in (b"\xff" * 600_000, b"ab\xffcd\n" * 200_000):
        assert 0 < len(tail_text(raw, 524_288).encode()) <= 524_288
    long = tail_text(b"[ 1.0] a line\n" * 200_000, 4 << 20)
    assert len(long.encode()) <= schemas.MAX_CONSOLE_LOG_BYTES and long.startswith("[ 1.0]")


def test_nothing_that_breaks_stops_the_dump(make_site, tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    settings = {"CRASHREG_SPOOL_DIR": str(blocked), "CRASHREG_RETRIES": "x"}
    site = make_site(url=closed_port_url(), extra=settings)
    skip_unknown = {"action": "skip", "reason": "test"}
    site.bundle_json.write_text(
        json.dumps({"format": "crashreg-policy-bundle", "entries": [], "unknown": skip_unknown})
    )
    unspooled = run_reporter(site, "report")
    assert (unspooled.returncode, unspooled.args) == (EXIT_SKIP, ""), unspooled.stderr
    assert "could not spool" in unspooled.stderr
    assert "CRASHREG_RETRIES='x' is not a valid int" in unspooled.stderr

    site.bundle_json.write_text(json.dumps({"format": "crashreg-policy-bundle", "entries": [{"bogus": 1}]}))
    broken = run_reporter(site, "report")
    assert (broken.returncode, broken.args) == (0, "-c -d 31"), broken.stderr
    assert site.decision()["CRASHREG_DECIDED_BY"] == "fallback" and "reporter failed" in broken.stderr


def test_collect_records_the_capture_now_or_after_the_reboot(
    registry: Registry, make_site, tmp_path: Path
) -> None:
    dumper = tmp_path / "makedumpfile"
    dumper.write_text('#!/bin/sh\nfor last; do :; done\nhead -c 2048 /dev/zero > "$last"\n')
    dumper.chmod(0o755)
    online = make_site(extra={"CRASHREG_MAKEDUMPFILE": str(dumper)})
    offline = make_site(url=closed_port_url(), extra={"CRASHREG_MAKEDUMPFILE": str(dumper)})
    for site in (online, offline):
        assert run_reporter(site, "report").returncode == 0
        collected = run_reporter(site, "collect", "-l", "/proc/vmcore", str(site.root / "dump"))
        assert collected.returncode == 0, collected.stderr
    assert (offline.spool / f"kdump-{offline.boot_id}.capture").exists()

    # A second run that fails offline does not undo the dump the first took (it replaced the
    # completed capture spooled before with a failed one).
    offline.extra = {"CRASHREG_MAKEDUMPFILE": "/nonexistent/makedumpfile"}
    offline.write()
    again = run_reporter(offline, "collect", "-l", "/proc/vmcore", str(offline.root / "dump-again"))
    assert again.returncode == 127 and "a completed capture of this crash waits" in again.stderr, again.stderr

    offline.url = registry.url
    offline.write()
    assert run_reporter(offline, "post-boot").returncode == 0
    assert list(offline.spool.glob("*")) == [offline.spool / "sent"]

    [signature] = registry.get("/api/v1/signatures?limit=5")["signatures"]
    events = registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    captures = [c for e in events for c in registry.get(f"/api/v1/events/{e['id']}")["captures"]]
    # Online: the registry's `full`; offline with no bundle: the fallback `filtered`, level 31.
    assert sorted((c["status"], c["dump_level"], c["bytes"], c["target"]) for c in captures) == sorted(
        [
            ("completed", 0, 2048, str(online.root / "dump")),
            ("completed", 31, 2048, str(offline.root / "dump")),
        ]
    )


def test_collect_without_makedumpfile_records_a_failed_capture(registry: Registry, make_site) -> None:
    """makedumpfile missing from the crash kernel: said, exit 127 as a shell gives, and the
    capture recorded as failed (a traceback and nothing recorded, before); `collect --help`
    tells what collect does and runs nothing."""
    site_missing = Path("/nonexistent/makedumpfile")
    site = make_site(extra={"CRASHREG_MAKEDUMPFILE": str(site_missing)})
    assert run_reporter(site, "report").returncode == 0
    collected = run_reporter(site, "collect", "-l", "/proc/vmcore", str(site.root / "dump"))
    assert collected.returncode == 127 and "Traceback" not in collected.stderr, collected.stderr
    assert f"could not run {site_missing}" in collected.stderr
    event = registry.get(f"/api/v1/events/{site.decision()['CRASHREG_EVENT_ID']}")
    assert [(c["method"], c["status"]) for c in event["captures"]] == [("makedumpfile", "failed")]
    helped = run_reporter(site, "collect", "--help")
    assert helped.returncode == 0 and "makedumpfile" in helped.stdout and "could not run" not in helped.stderr


def test_a_spooled_capture_finds_its_event_from_a_report_sent_before_or_is_set_aside(
        registry: Registry, make_site) -> None:
    """Post-boot, a spooled capture whose report went in an earlier run (kept in sent/) gets
    its event from a replay of that report; one whose report is neither spooled nor sent (lost
    before it was kept) is set aside for a human. Before, both said "its report is not
    delivered yet" at every boot, and post-boot exited 3 for good."""
    site = make_site()
    assert run_reporter(site, "report").returncode == 0
    event_id, report_id = site.decision()["CRASHREG_EVENT_ID"], site.decision()["CRASHREG_REPORT_ID"]
    capture = {"method": "makedumpfile", "status": "failed", "bytes": None, "target": None,
               "capture_key": f"{report_id}-makedumpfile"}
    (site.spool / f"{report_id}.capture").write_text(json.dumps({"report_id": report_id, "capture": capture}))
    orphan = {"report_id": "kdump-never-kept", "capture": capture | {"capture_key": "kdump-never-kept-x"}}
    (site.spool / "kdump-never-kept.capture").write_text(json.dumps(orphan))
    run = run_reporter(site, "post-boot")
    assert run.returncode == 0, run.stderr
    assert list(site.spool.glob("*.capture")) == []
    assert (site.spool / "rejected" / "kdump-never-kept.capture").exists()
    assert [c["status"] for c in registry.get(f"/api/v1/events/{event_id}")["captures"]] == ["failed"]


def test_offline_a_log_without_a_crash_takes_the_bundles_no_signature_answer(
    registry: Registry, make_site
) -> None:
    """The pyz finds no crash in the log (the engine's own verdict): the bundle's `no_signature`
    answer, fetched for this host, decides; a crash it does not know stays a new bug."""
    online = make_site(dmesg=NO_CRASH_LOG)
    first = run_reporter(online, "report")
    assert (first.returncode, first.args) == (0, "-c -d 0"), first.stderr
    assert run_reporter(online, "fetch-bundle").returncode == 0
    bundle = json.loads(online.bundle_json.read_text())
    assert bundle["no_signature"]["action"] == "skip"  # this host's one capture is taken
    assert bundle["no_signature"]["reason"].startswith("no recognisable crash in the report: this host")
    assert registry.get("/api/v1/policy-bundle")["no_signature"]["action"] == "full"  # the fleet's: 1 of 3

    down = closed_port_url()
    offline = make_site(url=down, dmesg=NO_CRASH_LOG)
    new_bug = make_site(url=down, dmesg=FIXTURES / "ext4_bug_on.log")
    for site in (offline, new_bug):
        site.bundle_json.write_bytes(online.bundle_json.read_bytes())
    skipped = run_reporter(offline, "report")
    assert (skipped.returncode, skipped.args) == (EXIT_SKIP, ""), skipped.stderr
    assert offline.decision()["CRASHREG_REASON"].startswith("offline: no recognisable crash in the report")
    assert run_reporter(new_bug, "report").args == "-c -d 0"
    assert "a new bug" in new_bug.decision()["CRASHREG_REASON"]
