"""The kernel log watcher on a real running kernel (issue 26): one boot of the python3 guest
(tests/lab/python_guest.py, panic_on_oops 0) runs `crashreg-report.pyz watch` on its own
/dev/kmsg against the lab's registry while crashlab.ko warns once, warns 50 times in a row and
dereferences NULL; the watcher is stopped after the first warning and started again after the
rest were printed. Each reaches the registry once, the repeats as a count, nothing twice."""

from __future__ import annotations

import pytest

from registry.fingerprint import analyse_report
from tests.lab import lab, python_guest
from tests.lab.conftest import Lab

PYZ = f"/{python_guest.PYZ}"
REPEATS = 50
WATCH_CONF = {
    "CRASHREG_SPOOL_DIR": "/tmp/spool",
    "CRASHREG_WATCH_STATE": "/tmp/watch-state.json",
    "CRASHREG_WATCH_QUIET": "2",
    "CRASHREG_WATCH_REPEAT_INTERVAL": "1",  # log seconds: the tick below makes the count due
}
# The script: sh (busybox) in the guest. Writes to /dev/kmsg happen here only, in the guest.
SCRIPT = f"""
watch() {{ python3 -I {PYZ} watch >>/tmp/watch.log 2>&1 & echo $! > /tmp/watch.pid; }}
sent() {{ ls /tmp/spool/sent 2>/dev/null | grep -c '^live-'; }}
last_seq() {{ python3 -I -c "
import os
fd, last = os.open('/dev/kmsg', os.O_RDONLY | os.O_NONBLOCK), b''
while True:
    try:
        last = os.read(fd, 8192)
    except BlockingIOError:
        break
print(last.split(b',')[1].decode())"; }}
handled() {{ grep -o '"seq": [0-9]*' /tmp/watch-state.json 2>/dev/null | grep -o '[0-9]*$' || echo -1; }}
dmesg -n 1  # the serial console would take ~0.3 s per warning at 115200 baud
echo "LAB: panic_on_oops $(cat /proc/sys/kernel/panic_on_oops)"
watch
insmod /lib/crashlab.ko kind=warn
n=0; while [ "$(sent)" -lt 1 ] && [ $n -lt 1200 ]; do sleep 0.5; n=$((n + 1)); done
kill -TERM "$(cat /tmp/watch.pid)"; wait
echo "LAB: stopped with $(sent) sent"
rmmod crashlab
insmod /lib/crashlab.ko kind=warn-repeat repeats={REPEATS}
rmmod crashlab
insmod /lib/crashlab.ko kind=null-deref
echo "LAB: null-deref insmod rc=$?"
sleep 2; echo "crashlab: tick" > /dev/kmsg
last=$(last_seq)
watch
n=0; while {{ [ "$(handled)" -lt "$last" ] || ls /tmp/spool/*.json >/dev/null 2>&1; }} && [ $n -lt 1200 ]; do
    sleep 0.5; n=$((n + 1)); done
kill -TERM "$(cat /tmp/watch.pid)"; wait
echo "LAB: handled $(handled) of $last"
sed 's/^/LAB: watch /' /tmp/watch.log
"""


@pytest.fixture(scope="module")
def live_lab(make_lab) -> Lab:
    return make_lab("live-kernel")


@pytest.fixture(scope="module")
def booted(live_lab: Lab) -> lab.Boot:
    conf = lab.reporter_conf(live_lab.registry.guest_url)
    conf += "".join(f'{key}="{value}"\n' for key, value in WATCH_CONF.items())
    image = python_guest.python_initramfs(
        live_lab.kit,
        live_lab.out / "live.img",
        SCRIPT,
        {
            "lib/crashlab.ko": live_lab.module,
            "etc/crashreg/reporter.conf": conf.encode(),
            "etc/crashreg/token": live_lab.registry.tokens["report"].encode(),
        },
    )
    console = live_lab.out / "live.console.log"
    # A ring buffer big enough for what is printed while the watcher is stopped (the default
    # one of this 384 MB guest lost 700 records of the 50 warnings: the watcher says so).
    return python_guest.run_guest(live_lab.kit, image, hostname="lab-live", cmdline="log_buf_len=4M",
                                  log=console)


def events(live_lab: Lab) -> dict[str, dict]:
    """The registry's events by the guilty function of their title."""
    found = {}
    for signature in live_lab.registry.get("/api/v1/signatures")["signatures"]:
        for event in live_lab.registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]:
            detail = live_lab.registry.get(f"/api/v1/events/{event['id']}")
            found[detail["title"].split(" in ")[1].split()[0]] = detail
    return found


def test_the_guest_ran_with_oopses_that_do_not_panic(booted: lab.Boot) -> None:
    assert python_guest.script_status(booted) == 0
    assert booted.marker_line("panic_on_oops") == "LAB: panic_on_oops 0"
    assert booted.marker_line("stopped with") == "LAB: stopped with 1 sent"
    assert "Kernel panic" not in booted.console and "were lost unread" not in booted.console
    handled, last = booted.marker_line("handled ").split()[2::2]
    assert int(handled) >= int(last)


def test_each_report_reaches_the_registry_once_with_the_repeat_count(booted: lab.Boot, live_lab: Lab) -> None:
    found = events(live_lab)
    assert set(found) == {"crashlab_warn", "crashlab_warn_repeat", "crashlab_null_deref"}
    assert {name: e["repeats"] for name, e in found.items()} == {
        "crashlab_warn": 0, "crashlab_warn_repeat": REPEATS - 1, "crashlab_null_deref": 0}
    assert all(e["sources"] == ["live_kernel"] and e["capture"]["action"] == "none" for e in found.values())
    assert len(found["crashlab_warn"]["reports"]) == len(found["crashlab_null_deref"]["reports"]) == 1
    prefix = "LAB: watch crashreg-report: sent "
    sent = [line.split()[4] for line in booted.console.splitlines() if line.startswith(prefix)]
    assert len(sent) == len(set(sent)) == sum(len(e["reports"]) for e in found.values())
    assert all(e["signature"]["event_count"] == 1 for e in found.values())


def test_the_live_oops_fingerprints_as_the_engine_does_on_its_stored_log(live_lab: Lab) -> None:
    event = events(live_lab)["crashlab_null_deref"]
    stored = live_lab.stored_report(event["reports"][0]["report_id"])
    assert stored["console_log"].lstrip().startswith("[")
    assert "BUG: kernel NULL pointer dereference" in stored["console_log"].splitlines()[0]
    assert analyse_report(stored["console_log"], None).fingerprint == event["fingerprint"]
