"""The post-boot agent's pstore step (`crashreg-report.pyz post-boot`) as a real process on
pstore records made from the lab's real panic log, against a live registry on SQLite and
PostgreSQL: parts put back in order (plain, zlib and raw deflate), the crashed boot found in
the boot log, the crash kernel's event joined, a failed dump counted, records removed only
after the registry acknowledged them."""

from __future__ import annotations

import json
import os
import re
import zlib
from datetime import UTC, datetime
from pathlib import Path

from registry.fingerprint import analyse_report
from tests.support.agents import FlakyFront, Registry, Site, closed_port_url, run_reporter
from tests.support.golden import golden

CRASHED_BOOT, THIS_BOOT = "5d1f0c2a-8e3b-4a6c-9f7d-1b2c3d4e5f60", "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
PANIC_AT = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC).timestamp()
PANIC_LOG = "".join(line + "\n" for line in golden("lab/null_deref_1").splitlines() if line.startswith("["))
LIVE_OOPS_LOG = "".join(line + "\n" for line in golden("lab/gpf_1").splitlines() if line.startswith("["))
UNKNOWN_LOG = "".join(line + "\n" for line in golden("lab/bug_on_1").splitlines() if line.startswith("["))
PARTS = 3


def write_dump(  # type: ignore[no-untyped-def]
    directory: Path, name: str, reason: str = "Panic", compress=None, log: str = PANIC_LOG,
    slots: tuple[int, ...] = (2, 0, 1), count: int = 1, at: float = PANIC_AT,
) -> None:
    """A log as fs/pstore/platform.c writes it: syslog prefixes, Part1 the newest piece, file
    names not in part order."""
    directory.mkdir(exist_ok=True)
    lines = ["<4>" + line for line in log.splitlines(keepends=True)]
    size = len(lines) // PARTS + 1
    pieces = [lines[i : i + size] for i in range(0, len(lines), size)]
    for slot, part in zip(slots, range(len(pieces), 0, -1), strict=True):
        body = f"{reason}#{count} Part{part}\n{''.join(pieces[len(pieces) - part])}".encode()
        path = directory / f"{name}-{slot}"
        if compress is not None:
            body, path = compress(body), path.with_name(path.name + ".enc.z")
        path.write_bytes(body)
        os.utime(path, (at, at))


def deflate(data: bytes) -> bytes:
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return raw.compress(data) + raw.flush()


def pstore_site(  # type: ignore[no-untyped-def]
    make_site, tmp_path: Path, boot_log: bool = True, **extra: str
) -> Site:
    (tmp_path / "boot_id").write_text(THIS_BOOT + "\n")
    if boot_log:  # the crashed boot, as its own post-boot run appended it
        (tmp_path / "boots").write_text(f"{CRASHED_BOOT} {PANIC_AT - 86400:.0f}\n")
    values = {
        "CRASHREG_PSTORE_DIR": str(tmp_path / "pstore"),
        "CRASHREG_BOOT_ID_FILE": str(tmp_path / "boot_id"),
        "CRASHREG_BOOT_LOG": str(tmp_path / "boots"),
        "CRASHREG_RETRIES": "0",
        "CRASHREG_HOSTNAME": "gpu-a017",
    }
    return make_site(boot_id=CRASHED_BOOT, extra=values | extra)


def crash_kernel_body(boot_id: str | None, crashed_at: str, report_id: str | None = None) -> dict:
    return {"report_id": report_id or f"kdump-{boot_id}", "source": "crash_kernel", "crashed_at": crashed_at,
            "host": {"hostname": "gpu-a017"}, "boot_id": boot_id, "console_log": PANIC_LOG}


def crash_kernel_report(registry: Registry, boot_id: str | None, crashed_at: str) -> dict:
    response = registry.post_report(json.dumps(crash_kernel_body(boot_id, crashed_at)).encode())
    assert response.status_code == 201, response.text
    return response.json()


def test_a_failed_dump_is_reported_from_pstore_once_online(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    site = pstore_site(make_site, tmp_path, CRASHREG_URL=closed_port_url())
    write_dump(tmp_path / "pstore", "dmesg-ramoops")
    offline = run_reporter(site, "post-boot")
    assert offline.returncode == 3, offline.stderr
    assert len(list((tmp_path / "pstore").iterdir())) == PARTS  # not acknowledged: kept
    assert [p.name for p in site.spool.glob("*.json")] == [f"pstore-{CRASHED_BOOT}.json"]

    site.extra = (site.extra or {}) | {"CRASHREG_URL": registry.url}
    site.write()
    online = run_reporter(site, "post-boot")
    assert online.returncode == 0, online.stderr
    assert list((tmp_path / "pstore").iterdir()) == []
    sent = json.loads((site.spool / "sent" / f"pstore-{CRASHED_BOOT}.json").read_text())
    assert sent["console_log"] == PANIC_LOG  # the parts in order, prefixes gone
    assert sent["boot_id"] == CRASHED_BOOT and sent["uptime_s"] == 14
    assert sent["crashed_at"] == "2026-11-30T10:00:00Z"
    [signature] = registry.get("/api/v1/signatures")["signatures"]
    [summary] = registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    event = registry.get(f"/api/v1/events/{summary['id']}")
    assert event["sources"] == ["pstore"] and event["capture"]["action"] == "none"
    assert signature["event_count"] == 1  # the crash counts though its dump failed
    assert signature["fingerprint"] == analyse_report(golden("lab/null_deref_1"), None).fingerprint
    assert [(c["status"], c["capture_key"]) for c in event["captures"]] == [
        ("failed", f"kdump-{CRASHED_BOOT}-makedumpfile")]
    # This boot is in the boot log now: after the next crash it is the crashed one.
    assert (tmp_path / "boots").read_text().splitlines()[-1].startswith(THIS_BOOT)


def test_pstore_joins_the_crash_kernels_event_by_the_crashed_boot(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    kernel = crash_kernel_report(registry, CRASHED_BOOT, "2026-11-30T10:00:20Z")
    site = pstore_site(make_site, tmp_path, CRASHREG_PSTORE_CLEAR="0")
    write_dump(tmp_path / "pstore", "dmesg-efi", compress=zlib.compress)
    done = run_reporter(site, "post-boot")
    assert done.returncode == 0 and "pstore: Panic" in done.stderr, done.stderr
    event = registry.get(f"/api/v1/events/{kernel['event_id']}")
    assert event["sources"] == ["crash_kernel", "pstore"]
    assert event["signature"]["event_count"] == 1
    assert len(list((tmp_path / "pstore").iterdir())) == PARTS  # CRASHREG_PSTORE_CLEAR=0


def test_without_a_boot_log_pstore_joins_by_fingerprint_and_time(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    kernel = crash_kernel_report(registry, "some-boot", "2026-11-30T10:01:00Z")
    site = pstore_site(make_site, tmp_path, boot_log=False)
    write_dump(tmp_path / "pstore", "dmesg-erst", compress=deflate)
    write_dump(tmp_path / "pstore", "dmesg-ramoops", reason="Oops")  # an oops it lived through
    done = run_reporter(site, "post-boot")
    assert done.returncode == 0, done.stderr
    assert len(re.findall(r"pstore: Panic of boot unknown reported", done.stderr)) == 1
    event = registry.get(f"/api/v1/events/{kernel['event_id']}")
    assert event["sources"] == ["crash_kernel", "pstore"]
    assert [r["report_id"] for r in event["reports"]][1] == f"pstore-gpu-a017-{PANIC_AT:.0f}"


def test_a_spooled_crash_report_goes_before_the_pstore_record_so_they_are_one_event(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    """The crash kernel could not reach the registry and spooled its report, and the first
    post-boot run cannot deliver it either (a 503): pstore's record waits in pstore, since the
    registry joins it to the crash kernel's event only when that report is there first. The next
    run sends the crash report, then the record: one event."""
    site = pstore_site(make_site, tmp_path)
    write_dump(tmp_path / "pstore", "dmesg-ramoops")
    site.spool.mkdir(parents=True, exist_ok=True)
    spooled = crash_kernel_body(CRASHED_BOOT, "2026-11-30T10:00:20Z")
    (site.spool / f"kdump-{CRASHED_BOOT}.json").write_text(json.dumps(spooled))
    with FlakyFront(registry.url, failures=1) as front:
        site.extra = (site.extra or {}) | {"CRASHREG_URL": front.url}
        site.write()
        first = run_reporter(site, "post-boot")
        assert first.returncode == 3, first.stderr
        assert front.seen == 1 and "pstore: left for the next run" in first.stderr  # nothing of pstore sent
        assert len(list((tmp_path / "pstore").iterdir())) == PARTS
        second = run_reporter(site, "post-boot")
    assert second.returncode == 0, second.stderr
    [signature] = registry.get("/api/v1/signatures")["signatures"]
    [summary] = registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    event = registry.get(f"/api/v1/events/{summary['id']}")
    assert event["sources"] == ["crash_kernel", "pstore"]
    assert [r["report_id"] for r in event["reports"]] == [f"kdump-{CRASHED_BOOT}", f"pstore-{CRASHED_BOOT}"]
    assert list((tmp_path / "pstore").iterdir()) == []


def test_a_spooled_pstore_report_waits_for_a_crash_report_kept_before_it(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    """Both reports spooled (the registry was down for a whole post-boot run): the resend sends
    the crash report first, and keeps the pstore report while the crash report is kept."""
    site = pstore_site(make_site, tmp_path)
    site.spool.mkdir(parents=True, exist_ok=True)
    # A crash report named after pstore's: plain name order would send the pstore report first.
    crash = crash_kernel_body(CRASHED_BOOT, "2026-11-30T10:00:20Z", report_id=f"z-kdump-{CRASHED_BOOT}")
    record = crash | {"report_id": f"pstore-{CRASHED_BOOT}", "source": "pstore",
                      "crashed_at": "2026-11-30T10:00:00Z"}
    for body in (crash, record):
        (site.spool / f"{body['report_id']}.json").write_text(json.dumps(body))
    with FlakyFront(registry.url, failures=1) as front:
        site.extra = (site.extra or {}) | {"CRASHREG_URL": front.url}
        site.write()
        first = run_reporter(site, "post-boot")
        assert first.returncode == 3 and front.seen == 1, first.stderr
        assert sorted(p.name for p in site.spool.glob("*.json")) == [
            f"pstore-{CRASHED_BOOT}.json", f"z-kdump-{CRASHED_BOOT}.json"]
        assert run_reporter(site, "post-boot").returncode == 0
    [signature] = registry.get("/api/v1/signatures")["signatures"]
    [summary] = registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    assert registry.get(f"/api/v1/events/{summary['id']}")["sources"] == ["crash_kernel", "pstore"]


def a_boot_of_oopses(pstore: Path) -> None:
    """What a boot with panic_on_oops=0 leaves: a general protection fault it lived through (Oops
    #1), an hour later a NULL dereference in interrupt context dumped as Oops #2 and then as the
    panic it caused (Panic #3: pstore counts every dump), and a record whose reason this reader
    does not know."""
    write_dump(pstore, "dmesg-ramoops", "Oops", log=LIVE_OOPS_LOG, slots=(9, 10, 11), at=PANIC_AT - 3600)
    write_dump(pstore, "dmesg-ramoops", "Oops", slots=(3, 4, 5), count=2, at=PANIC_AT - 1)
    write_dump(pstore, "dmesg-ramoops", "Panic", count=3)
    write_dump(pstore, "dmesg-efi", "Unknown", log=UNKNOWN_LOG, slots=(6, 7, 8), count=2, at=PANIC_AT - 60)
    (pstore / "console-ramoops-0").write_text("not a kmsg dump\n")


def all_events(registry: Registry) -> list[dict]:
    found = []
    for signature in registry.get("/api/v1/signatures")["signatures"]:
        found += registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    return [registry.get(f"/api/v1/events/{e['id']}") for e in found]


def test_every_record_is_reported_once_and_removed_only_after_its_acknowledgement(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    """Registry down, then answering 401 (a wrong token), then up: no record file goes before the
    report made from it is acknowledged; each dump is reported once, under an id that does not
    change between runs; the oops a panic followed is part of the panic's report."""
    pstore = tmp_path / "pstore"
    a_boot_of_oopses(pstore)
    files = sorted(p.name for p in pstore.iterdir())
    site = pstore_site(make_site, tmp_path, CRASHREG_URL=closed_port_url())
    down = run_reporter(site, "post-boot")
    assert down.returncode == 3, down.stderr
    assert sorted(p.name for p in pstore.iterdir()) == files
    ids = [f"pstore-{CRASHED_BOOT}", f"pstore-{CRASHED_BOOT}-oops-1", f"pstore-{CRASHED_BOOT}-unknown-2"]
    assert sorted(p.stem for p in site.spool.glob("*.json")) == ids

    (tmp_path / "wrong-token").write_text("not-a-token\n")
    site.extra = (site.extra or {}) | {"CRASHREG_URL": registry.url,
                                       "CRASHREG_TOKEN_FILE": str(tmp_path / "wrong-token")}
    site.write()
    for _ in range(2):  # the spooled reports are kept, and so are the records
        refused = run_reporter(site, "post-boot")
        assert refused.returncode == 3 and "HTTP 401" in refused.stderr, refused.stderr
        assert sorted(p.name for p in pstore.iterdir()) == files
    assert all_events(registry) == []

    site.extra = (site.extra or {}) | {"CRASHREG_TOKEN_FILE": str(site.token_file)}
    site.write()
    up = run_reporter(site, "post-boot")
    assert up.returncode == 0, up.stderr
    assert [p.name for p in pstore.iterdir()] == ["console-ramoops-0"]  # not a dump: never removed
    assert run_reporter(site, "post-boot").returncode == 0

    events = {e["reports"][0]["report_id"]: e for e in all_events(registry)}
    assert sorted(events) == ids
    assert sum(len(e["reports"]) for e in events.values()) == 3  # each once
    panic, live_oops, unknown = (events[report_id] for report_id in ids)
    assert panic["sources"] == ["pstore"] and panic["boot_id"] == CRASHED_BOOT
    assert panic["fingerprint"] == analyse_report(PANIC_LOG, None).fingerprint
    assert [c["status"] for c in panic["captures"]] == ["failed"]
    assert live_oops["sources"] == ["live_kernel"]  # the host lived through it: not a panic
    assert live_oops["fingerprint"] == analyse_report(LIVE_OOPS_LOG, None).fingerprint
    assert live_oops["crashed_at"].startswith("2026-11-30T09:00:00")
    assert unknown["sources"] == ["live_kernel"]
    assert unknown["fingerprint"] == analyse_report(UNKNOWN_LOG, None).fingerprint


def test_an_oops_the_watcher_reported_is_not_reported_again(
    make_site, registry: Registry, tmp_path: Path
) -> None:
    """The watcher sent the oops live; its pstore record adds nothing and goes once that report is
    known acknowledged (in sent/); while the watcher's report waits in the spool, the record stays."""
    pstore = tmp_path / "pstore"
    write_dump(pstore, "dmesg-ramoops", "Oops", log=LIVE_OOPS_LOG, at=PANIC_AT - 3600)
    site = pstore_site(make_site, tmp_path, CRASHREG_URL=closed_port_url())
    live = {"report_id": f"live-{CRASHED_BOOT}-0000000120", "source": "live_kernel",
            "crashed_at": "2026-11-30T09:00:00Z", "host": {"hostname": "gpu-a017"}, "boot_id": CRASHED_BOOT,
            "console_log": LIVE_OOPS_LOG, "fingerprint": analyse_report(LIVE_OOPS_LOG, None).fingerprint}
    site.spool.mkdir(parents=True, exist_ok=True)
    (site.spool / f"{live['report_id']}.json").write_text(json.dumps(live))
    waiting = run_reporter(site, "post-boot")
    assert waiting.returncode == 3, waiting.stderr
    assert len(list(pstore.iterdir())) == PARTS

    site.extra = (site.extra or {}) | {"CRASHREG_URL": registry.url}
    site.write()
    done = run_reporter(site, "post-boot")
    assert done.returncode == 0, done.stderr
    assert list(pstore.iterdir()) == []
    [event] = all_events(registry)
    assert [r["report_id"] for r in event["reports"]] == [live["report_id"]]
