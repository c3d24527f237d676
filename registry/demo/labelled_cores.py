"""The demo program's real cores as the core reader read them: the stacks (frames, registers,
the evidence the failure-mode labels are read from) of the demo's userspace crashes.

cores/ingest-worker.tar.xz holds ingest-worker (cores/ingest_worker.cc) in each release of the
demo fleet and its cores, each crash twice per release, made for real by `make demo-cores`
(scripts/demo_cores.py; cores/README.md). The same script reads each core with the core
handler's file mode and stores the stack it reports beside them, in cores/stacks.json: the
registry never imports an agent (tests/foundation/test_architecture.py), so the demo reads the
stored stacks, and tests/registry/demo/test_demo.py holds them to what the core reader reads
from the archive. Each simulated crash of the program keeps what the simulation decided (host,
time, how long its process had run) and carries the stack of a core of its crash and its
process's release, with the process facts file mode adds from the facts it is given; the
registry labels and fingerprints it from that stack.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from registry.demo.simulator import PROGRAM_RELEASES, Simulation

CORES = Path(__file__).parent / "cores"
ARCHIVE = CORES / "ingest-worker.tar.xz"
STACKS = CORES / "stacks.json"
MANIFEST = "manifest.json"
PROGRAM = "ingest-worker"
RELEASES = tuple(version for version, _ in PROGRAM_RELEASES)
CRASHES = ("ring", "index")  # ingest_worker.cc's argument: Bug.core of the demo's populations
PROCESS_FACTS = ("started_at", "uptime_s", "version")  # what file mode is told, not read from the core


@dataclass(frozen=True)
class LabelledCore:
    """One real core, read: which release crashed, which way, and the stack file mode reported
    (its process object without the facts of a crash: start time, uptime)."""

    name: str
    release: str
    crash: str
    stack: dict[str, Any]


def read_cores(stacks: Path = STACKS) -> list[LabelledCore]:
    """Every core of the archive, as scripts/demo_cores.py stored what file mode read."""
    stored = json.loads(stacks.read_text())
    return [LabelledCore(entry["core"], entry["release"], entry["crash"], entry["stack"])
            for entry in stored["cores"]]


def core_stack(core: LabelledCore, report: dict[str, Any]) -> dict[str, Any]:
    """The stack file mode reports for `core` given the simulated crash's process start, uptime
    and release (agents/coredump/report.py, process_object; a handler that knows its program's
    version sends it: the core has none)."""
    simulated = report["stack"]["process"]
    facts = {fact: simulated[fact] for fact in PROCESS_FACTS}
    return core.stack | {"process": core.stack["process"] | facts}


def with_real_cores(sim: Simulation, cores: list[LabelledCore]) -> Simulation:
    """`sim` with each crash of a bug that names a core crash carrying a real core's stack (one
    of that crash and release, the same for a report id every run)."""
    choices: dict[tuple[str, str], list[LabelledCore]] = defaultdict(list)
    for core in cores:
        choices[core.crash, core.release].append(core)
    reports = []
    for report in sim.reports:
        crash = sim.bug_of[report["report_id"]].core
        if crash:
            among = choices[crash, report["stack"]["process"]["version"]]
            chosen = among[random.Random(report["report_id"]).randrange(len(among))]
            report = report | {"stack": core_stack(chosen, report)}
        reports.append(report)
    return replace(sim, reports=reports)
