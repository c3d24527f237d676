"""Plain-data analysis of a simulated fleet (no database): the pure path end to end."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from functools import cached_property

from registry.epidemiology.analysis import (
    Context,
    CrashRecord,
    SignatureSample,
    analyse_signature,
    crash_baseline,
    exposure_by_day,
    fleet_baseline,
    fleet_view,
    inventory_changes,
    signature_window,
    states_from_history,
)
from registry.epidemiology.attributes import host_values, physical_host_of
from registry.epidemiology.findings import joint_from_units
from registry.epidemiology.simulator import Bug, Simulation
from registry.epidemiology.suspects import HostSignatureCount, suspect_hosts
from registry.epidemiology.uptime import outside_counts


def bug_key(bug: Bug) -> str:
    return f"{bug.kind}:{bug.function}"


class SimulatedRegistry:
    """Signatures = the simulator's intended bugs; baselines from its inventory history."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.records: dict[str, list[CrashRecord]] = defaultdict(list)
        self.physical: dict[str, list[str]] = defaultdict(list)
        for report in sim.reports:
            key = bug_key(sim.bug_of[report["report_id"]])
            when = datetime.fromisoformat(report["crashed_at"].replace("Z", "+00:00"))
            self.records[key].append(CrashRecord(when, host_values(report["host"]), report["uptime_s"]))

    @cached_property
    def states(self):
        return states_from_history(
            (observed_at, host) for observed_at, hosts in self.sim.inventory for host in hosts
        )

    @cached_property
    def window(self):
        return self.sim.config.start.date(), self.sim.end.date()

    def analyse(self, bug: Bug) -> dict:
        records = self.records[bug_key(bug)]
        sample = SignatureSample.from_records(records)
        everything = [r for rs in self.records.values() for r in rs]
        counts = Counter(v for r in everything for v in r.values)
        joint = joint_from_units([(1.0, r.values) for r in everything])
        fleet = fleet_view(sample, fleet_baseline(self.states, *signature_window(sample)))
        context = Context(
            baselines=[b for b in (fleet, crash_baseline(dict(counts), len(everything), joint)) if b],
            window_start=self.window[0],
            window_end=self.window[1],
            exposure=exposure_by_day(self.states, *self.window),
            changes=inventory_changes(self.states),
            uptimes=outside_counts([r.uptime_s for r in everything if r not in records]),
        )
        return analyse_signature(sample, context)

    def suspects(self) -> list[dict]:
        met: dict[tuple[str, str], list[CrashRecord]] = defaultdict(list)
        for key, records in self.records.items():
            for record in records:
                met[(physical_host_of(record.values) or "?", key)].append(record)
        rows = [
            HostSignatureCount(
                physical,
                key,
                len(records),
                len({v for r in records for v in r.values if v[0] == "hostname"}),
                min(r.crashed_at for r in records),
                max(r.crashed_at for r in records),
            )
            for (physical, key), records in met.items()
        ]
        per_physical = Counter(h["physical_host"] for h in self.sim.hosts.values())
        return suspect_hosts(rows, per_physical)
