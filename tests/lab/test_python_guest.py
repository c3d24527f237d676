"""The python3 guest (tests/lab/python_guest.py) boots, stays up and runs the reporter's pyz.

One boot: in the guest, the pyz built from this checkout computes the same fingerprint of a
real lab oops as the registry's engine does here, and reaches the lab's registry over QEMU's
user network to fetch the policy bundle; the kernel keeps running after its script
(panic_on_oops 0), and what the trimmed standard library left out is really out.
"""

from __future__ import annotations

import pytest

from agents.crashreg_report import local_fingerprint
from tests.lab import lab, python_guest
from tests.lab.conftest import Lab
from tests.support import DATA

OOPS = DATA / "golden" / "lab" / "null_deref_1.log"
LOG = OOPS.read_text().split("\n\n", 1)[1]  # the kernel's log, after the fixture's headers
PYZ = f"/{python_guest.PYZ}"
SCRIPT = f"""
echo "LAB: panic_on_oops $(cat /proc/sys/kernel/panic_on_oops)"
python3 -I {PYZ} --config /etc/crashreg/reporter.conf fetch-bundle
echo "LAB: fetch-bundle rc=$?"
python3 -I -c "import json; print(json.load(open('/etc/crashreg/policy-bundle.json'))['format'])" \
    | sed "s/^/LAB: bundle /"
echo "LAB: fingerprint $(python3 -I {PYZ} fingerprint /lab/oops.log)"
python3 -I -c 'import tkinter' 2>/dev/null || echo "LAB: no tkinter"
"""


@pytest.fixture(scope="module")
def guest_lab(make_lab) -> Lab:
    return make_lab("python-guest")


@pytest.fixture(scope="module")
def booted(guest_lab: Lab) -> lab.Boot:
    conf = lab.reporter_conf(guest_lab.registry.guest_url)
    image = python_guest.python_initramfs(
        guest_lab.kit,
        guest_lab.out / "guest.img",
        SCRIPT,
        {
            "lab/oops.log": LOG.encode(),
            "etc/crashreg/reporter.conf": conf.encode(),
            "etc/crashreg/token": guest_lab.registry.tokens["report"].encode(),
        },
    )
    return python_guest.run_guest(guest_lab.kit, image, log=guest_lab.out / "guest.console.log")


def test_the_guest_runs_its_script_and_powers_off_without_a_panic(booted: lab.Boot) -> None:
    assert python_guest.script_status(booted) == 0
    assert booted.marker_line("panic_on_oops") == "LAB: panic_on_oops 0"
    assert "Kernel panic" not in booted.console


def test_the_pyz_fingerprints_a_real_oops_in_the_guest_as_the_engine_does_here(booted: lab.Boot) -> None:
    expected = local_fingerprint(LOG)
    assert expected and booted.marker_line("fingerprint") == f"LAB: fingerprint {expected}"


def test_the_guest_reaches_the_registry_and_the_trimmed_stdlib_leaves_tkinter_out(booted: lab.Boot) -> None:
    assert booted.marker_line("fetch-bundle") == "LAB: fetch-bundle rc=0"
    assert booted.marker_line("bundle ") == "LAB: bundle crashreg-policy-bundle"
    assert booted.marker_line("no tkinter")
