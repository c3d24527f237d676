"""Plain-data analysis of a simulated fleet (no database): the pure path end to end."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import Any

from registry.demo.simulator import Bug, Simulation
from registry.epidemiology.analysis import (
    Context,
    Controls,
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
    unrecorded_changes,
)
from registry.epidemiology.attributes import host_values, physical_host_of
from registry.epidemiology.findings import Baseline, joint_from_units
from registry.epidemiology.narrative import FLEET, Population
from registry.epidemiology.suspects import HostSignatureCount, suspect_hosts
from registry.epidemiology.uptime import outside_counts


def bug_key(bug: Bug) -> str:
    return f"{bug.executable or 'kernel'}:{bug.kind}:{bug.function}"


class SimulatedRegistry:
    """Signatures = the simulator's intended bugs; baselines from an inventory (the simulator's
    history unless given). `program_label`: the label key naming what a host runs (else the
    program's hosts are those that reported its crashes). `whole_fleet` and `case_control=False`
    show what the confounders do without the right denominator or the case-control baseline."""

    def __init__(
        self,
        sim: Simulation,
        inventory: Sequence[tuple[datetime, list[dict[str, Any]]]] | None = None,
        program_label: str | None = None,
        whole_fleet: bool = False,
        case_control: bool = True,
    ) -> None:
        self.sim = sim
        self.whole_fleet, self.with_case_control = whole_fleet, case_control
        self.inventory = sim.inventory if inventory is None else inventory
        self.program_label = program_label
        self.records: dict[str, list[CrashRecord]] = defaultdict(list)
        self.hosts_of: dict[str, set[str]] = defaultdict(set)  # executable -> hosts that reported it
        self.hostname_of: dict[int, str] = {}
        for report in sim.reports:
            bug = sim.bug_of[report["report_id"]]
            when = datetime.fromisoformat(report["crashed_at"].replace("Z", "+00:00"))
            record = CrashRecord(when, host_values(report["host"]), report["uptime_s"])
            self.records[bug_key(bug)].append(record)
            self.hostname_of[id(record)] = report["host"]["hostname"]
            if bug.executable:
                self.hosts_of[bug.executable].add(report["host"]["hostname"])

    @cached_property
    def states(self):
        return states_from_history(
            (observed_at, host) for observed_at, hosts in self.inventory for host in hosts
        )

    @cached_property
    def window(self):
        return self.sim.config.start.date(), self.sim.end.date()

    def population(self, bug: Bug) -> tuple[Population, set[str] | None]:
        if not bug.executable or self.whole_fleet:
            return FLEET, None
        program = bug.executable.rsplit("/", 1)[-1]
        if self.program_label:
            label = ("labels", f"{self.program_label}={program}")
            hosts = {s.hostname for s in self.states if label in s.values}
            source = f"the inventory label {self.program_label}={program}"
        else:
            hosts = self.hosts_of[bug.executable]
            source = "crash reports of the same program"
        return Population("program", program, len(hosts), source), hosts

    def case_control(self, hosts: set[str] | None):
        everything = [r for rs in self.records.values() for r in rs]

        def baseline(controls: Controls) -> Baseline | None:
            chosen = [
                r
                for r in everything
                if controls.start <= r.crashed_at < controls.end
                and (hosts is None or self.hostname_of[id(r)] in hosts)
                and (controls.min_uptime_s is None or (r.uptime_s or 0) >= controls.min_uptime_s)
            ]
            if not chosen:
                return None
            counts = Counter(v for r in chosen for v in r.values)
            return crash_baseline(
                dict(counts), len(chosen), joint_from_units([(1.0, r.values) for r in chosen])
            )

        return baseline

    def analyse(self, bug: Bug) -> dict:
        records = self.records[bug_key(bug)]
        changed, by_attribute = unrecorded_changes(records, self.states)
        sample = replace(SignatureSample.from_records(records), unrecorded_changes=changed,
                         unrecorded_by_attribute=by_attribute)
        population, hosts = self.population(bug)
        states = [s for s in self.states if hosts is None or s.hostname in hosts]
        fleet = fleet_view(sample, fleet_baseline(states, *signature_window(sample)))
        context = Context(
            window_start=self.window[0],
            window_end=self.window[1],
            fleet=fleet,
            case_control=self.case_control(hosts) if self.with_case_control else None,
            exposure=exposure_by_day(states, *self.window),
            changes=inventory_changes(self.states),
            uptimes=outside_counts(
                [r.uptime_s for rs in self.records.values() for r in rs if r not in records]
            ),
            inventory_since=min(observed_at for observed_at, _ in self.inventory),
            population=population,
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


def signature_of(sim, answers, population: str) -> str:  # type: ignore[no-untyped-def]
    bug = sim.population(population).bug
    report_id = next(r for r, p in sim.truth.items() if p == population and sim.bug_of[r] == bug)
    return answers[report_id]["signature"]["id"]
