"""Reading the guest's serial console: the kernel prints its messages into it whenever they
come, also inside a line the guest's own script is writing."""

from __future__ import annotations

import pytest

from tests.lab.lab import Boot, read_boot_id


def booted(console: str) -> Boot:
    return Boot(console=console, markers={}, seconds=0.0, boot_id=None, returncode=0)


def test_a_marker_line_is_read_without_a_kernel_message_printed_inside_it() -> None:
    # As a CI run's console showed it: the message after the line's text, before its newline.
    console = (
        "[    2.100000] Run /init as init process\n"
        "LAB: core_pattern |/usr/bin/handler %P %u %g %d %h %E"
        "[    2.166895] tsc: Refined TSC clocksource calibration: 2596.132 MHz\n"
        "\n"
        "LAB: boot_id 1234[   12.000001] random: crng init done\n-abcd\n"
    )
    pattern = booted(console).marker_line("core_pattern")
    assert pattern == "LAB: core_pattern |/usr/bin/handler %P %u %g %d %h %E"
    assert booted(console).marker_line("boot_id") == "LAB: boot_id 1234-abcd"
    assert read_boot_id(console) == "1234-abcd"
    # as a run's console showed it: the message right after the id, the id's line ended there
    assert read_boot_id("LAB: boot_id 9666-cf[   12.000001] random: crng init done\n\n") == "9666-cf"


def test_a_kernel_message_of_its_own_line_is_left_alone() -> None:
    console = "LAB: done\n[    3.000000] reboot: Power down\n"
    assert booted(console).marker_line("done") == "LAB: done"
    assert "[    3.000000] reboot: Power down" in booted(console).console
    with pytest.raises(AssertionError, match="no 'LAB: missing' line"):
        booted(console).marker_line("missing")
