"""A crash storm does not become a Jira storm: one facts update per interval, not per event."""

from __future__ import annotations

import pytest

STORM_EVENTS = 5_000
STORM_MINUTES = 50


@pytest.mark.parametrize("jira_flavour", ["datacenter"], indirect=True)
def test_a_storm_of_5000_events_makes_one_update_per_interval(harness):
    """Flavour-independent (the throttle is ours), so one flavour; both databases."""
    signature = harness.crash()["signature"]
    harness.sync(with_reconcile=False)
    per_minute = STORM_EVENTS // STORM_MINUTES
    for minute in range(STORM_MINUTES):
        harness.burst(int(signature["id"]), per_minute - (1 if minute == 0 else 0),
                      f"6.8.0-{52 + minute % 3}-generic", host_prefix=f"gpu-{minute:02d}")
        harness.later(minutes=1)
        harness.sync(with_reconcile=False)
    harness.later(minutes=5)
    harness.sync(with_reconcile=False)
    updates = harness.emulator.calls("PUT", r"/rest/api/2/issue/CRASH-1$")
    assert STORM_MINUTES // 5 <= len(updates) <= STORM_MINUTES // 5 + 2
    assert len(harness.emulator.issues) == 1
    description = harness.emulator.issue("CRASH-1").fields["description"]
    assert f"||Events|{STORM_EVENTS}|" in description
    assert f"||Hosts|{STORM_EVENTS}|" in description
    assert harness.link(signature["id"]).facts_pushed_at >= harness.clock() - harness.options.update_interval
