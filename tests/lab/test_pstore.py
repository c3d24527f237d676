"""A panic whose kdump failed, reported from pstore after the reboot (issue 26).

One QEMU run of the python3 guest (tests/lab/python_guest.py) with a ramoops region
(`memmap=1M$0x9000000`, ramoops.ko and its reed_solomon.ko from the cloud kernel's modules)
and no crash kernel: kdump cannot happen. The first boot runs the post-boot agent (it logs its
boot_id in the boot log on the disk), then panics on a NULL dereference (panic_on_oops 1);
`panic=1` resets the guest and QEMU, run without -no-reboot, boots again keeping its RAM, so
ramoops holds the panic. The second boot's post-boot agent reads it, reports it under
`source: pstore` with the first boot's boot_id, records the failed capture and clears the
records once the registry acknowledged them."""

from __future__ import annotations

import pytest

from registry.fingerprint import analyse_report
from tests.lab import lab, python_guest
from tests.lab.conftest import Lab

PYZ = f"/{python_guest.PYZ}"
RAMOOPS = "mem_address=0x9000000 mem_size=0x100000 record_size=0x20000"
CONF = {"CRASHREG_BOOT_LOG": "/var/lib/crashreg/boots", "CRASHREG_HOSTNAME": "lab-pstore"}
SCRIPT = f"""
insmod /lib/modules/reed_solomon.ko
insmod /lib/modules/ramoops.ko {RAMOOPS} || echo "LAB: ramoops failed"
mkdir -p /var/lib/crashreg /sys/fs/pstore && mount -t pstore pstore /sys/fs/pstore
echo "LAB: pstore records $(ls /sys/fs/pstore | grep -c dmesg)"
python3 -I {PYZ} post-boot
echo "LAB: post-boot rc=$? pstore left $(ls /sys/fs/pstore | grep -c dmesg)"
if [ ! -e /var/lib/crashreg/panicked ]; then
    touch /var/lib/crashreg/panicked; sync
    echo 1 > /proc/sys/kernel/panic_on_oops
    echo "LAB: panicking"
    insmod /lib/crashlab.ko kind=null-deref
fi
sync; umount /var
echo "LAB: done"
poweroff -f
"""


@pytest.fixture(scope="module")
def pstore_lab(make_lab) -> Lab:
    return make_lab("pstore")


@pytest.fixture(scope="module")
def booted(pstore_lab: Lab) -> lab.Boot:
    conf = lab.reporter_conf(pstore_lab.registry.guest_url)
    conf += "".join(f'{key}="{value}"\\n' for key, value in CONF.items())
    modules = pstore_lab.kit.modules
    image = python_guest.python_initramfs(
        pstore_lab.kit,
        pstore_lab.out / "pstore.img",
        SCRIPT,
        {
            "lib/crashlab.ko": pstore_lab.module,
            "lib/modules/ramoops.ko": modules / "fs" / "pstore" / "ramoops.ko",
            "lib/modules/reed_solomon.ko": modules / "lib" / "reed_solomon" / "reed_solomon.ko",
            "etc/crashreg/reporter.conf": conf.encode(),
            "etc/crashreg/token": pstore_lab.registry.tokens["report"].encode(),
        },
    )
    disk = lab.Disk.create(pstore_lab.out / "pstore-var.img", 256)
    parameters = f"{lab.KERNEL_PARAMETERS} lab.hostname=lab-pstore lab.disk=1 memmap=1M$0x9000000"
    command = lab.qemu_command(pstore_lab.kit.vmlinuz, image, parameters, disk.path, lab.MEMORY_MB)
    command.remove("-no-reboot")  # the panic's reset boots the guest again, its RAM kept
    return lab.run_qemu(command, python_guest.MARKERS, pstore_lab.out / "pstore.console.log")


def test_the_guest_panicked_without_kdump_and_booted_again(booted: lab.Boot) -> None:
    boots = [line.split()[2] for line in booted.console.splitlines() if line.startswith("LAB: boot_id ")]
    assert len(boots) == 2 and boots[0] != boots[1]
    assert "Kernel panic - not syncing" in booted.console and "LAB: ramoops failed" not in booted.console
    records = [line for line in booted.console.splitlines() if line.startswith("LAB: pstore records ")]
    assert records[0] == "LAB: pstore records 0" and records[1] != "LAB: pstore records 0"
    assert booted.console.count("LAB: done") == 1


def test_the_panic_is_reported_from_pstore_with_the_crashed_boot_and_a_failed_capture(
    booted: lab.Boot, pstore_lab: Lab
) -> None:
    crashed = booted.marker_line("boot_id ").split()[2]  # the first boot's
    report = pstore_lab.stored_report(f"pstore-{crashed}")
    event = pstore_lab.event_of(f"pstore-{crashed}")
    assert event["sources"] == ["pstore"] and event["boot_id"] == crashed
    assert event["capture"]["action"] == "none"
    assert [(c["status"], c["capture_key"]) for c in event["captures"]] == [
        ("failed", f"kdump-{crashed}-makedumpfile")]
    assert "crashlab_null_deref" in event["title"] and event["signature"]["event_count"] == 1
    assert "Kernel panic - not syncing" in report["console_log"]
    assert analyse_report(report["console_log"], None).fingerprint == event["fingerprint"]
    # acknowledged, so cleared: the second boot's post-boot left no record behind
    assert "LAB: post-boot rc=0 pstore left 0" in booted.console
