"""`make lab-debian`: Debian 12 with kdump-tools, configured as agents/README.md says, crashed.

Not collected by `make test` (the file name is not test_*.py): debootstrap and two systemd
boots under TCG take longer than the lab's CI budget (figures in docs/crash-lab.md).
"""

from __future__ import annotations

import json

import psycopg

from tests.lab import debian
from tests.lab.conftest import Lab
from tests.lab.lab import Disk


def test_kdump_tools_savecore_reports_and_dumps_as_the_registry_answers(make_lab) -> None:
    lab: Lab = make_lab("debian")
    root = debian.configure(
        debian.base_rootfs(), lab.out, lab.registry.guest_url, lab.registry.tokens["report"]
    )
    disk = Disk(debian.make_disk(root, lab.out / "debian.disk"))
    console = debian.boot(root, disk.path, lab.out / "debian.console.log")
    assert "sysrq: Trigger a crash" in console, console[-3000:]
    disk.recover()  # kdump-tools reboots with the root filesystem still mounted

    with psycopg.connect(lab.registry.database_url) as conn:
        [(report_id, source, console_log)] = conn.execute(
            "SELECT report_id, source, console_log FROM reports"
        ).fetchall()
    assert source == "crash_kernel" and report_id.startswith("kdump-")
    assert "sysrq: Trigger a crash" in console_log
    event = lab.event_of(report_id)
    assert (event["hostname"], event["capture"]["action"]) == (debian.HOSTNAME, "full")
    assert "decision: full by registry" in console

    # kdump-tools' own savecore wrote the dump with the registry's MAKEDUMP_ARGS (-l -d 0, -F).
    [stamp] = [name for name in disk.listing("/var/crash") if name[:2] == "20"]
    files = disk.listing(f"/var/crash/{stamp}")
    assert f"dump.{stamp}" in files and files[f"dump.{stamp}"] > 50 << 20, files
    assert "running makedumpfile -l -d 0 -F /proc/vmcore" in console
    sent = json.loads(disk.read(f"/var/spool/crashreg/sent/{report_id}.json"))
    assert sent["console_log"] == console_log
