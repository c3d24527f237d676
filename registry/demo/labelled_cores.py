"""The demo program's real cores, read by the reporter's file mode: the stacks (frames,
registers, the evidence the failure-mode labels are read from) of the demo's userspace crashes.

cores/ingest-worker.tar.xz holds ingest-worker (cores/ingest_worker.cc) in each release of the
demo fleet and its cores, each crash twice per release, made for real by `make demo-cores`
(scripts/demo_cores.py; cores/README.md). Each simulated crash of the program keeps what the
simulation decided (host, time, how long its process had run) and carries the stack file mode
reads from a core of its crash and its process's release, built by the report builder file
mode uses (`userspace_report` with the crash's facts); the registry labels and fingerprints it
from that stack.
"""

from __future__ import annotations

import json
import random
import tarfile
import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.coredump import Analysis, CrashFacts, core_file_analysis, userspace_report
from registry.demo.simulator import PROGRAM_RELEASES, Simulation

ARCHIVE = Path(__file__).parent / "cores" / "ingest-worker.tar.xz"
MANIFEST = "manifest.json"
PROGRAM = "ingest-worker"
RELEASES = tuple(version for version, _ in PROGRAM_RELEASES)
CRASHES = ("ring", "index")  # ingest_worker.cc's argument: Bug.core of the demo's populations


@dataclass(frozen=True)
class LabelledCore:
    """One real core, read: which release crashed, which way, and file mode's analysis."""

    name: str
    release: str
    crash: str
    analysis: Analysis


def read_cores(archive: Path = ARCHIVE) -> list[LabelledCore]:
    """Every core of the archive through file mode (`--exe` the release's program)."""
    with tempfile.TemporaryDirectory(prefix="crashreg-demo-cores-") as directory, \
            tarfile.open(archive, "r:xz") as tar:
        tar.extractall(directory, filter="data")
        root = Path(directory)
        manifest = json.loads((root / MANIFEST).read_text())
        return [LabelledCore(entry["core"], entry["release"], entry["crash"],
                             core_file_analysis(str(root / entry["core"]), str(root / entry["program"])))
                for entry in manifest["cores"]]


def core_stack(core: LabelledCore, report: dict[str, Any]) -> dict[str, Any]:
    """The stack file mode reports for `core` with the simulated crash's facts and release."""
    process = report["stack"]["process"]
    facts = CrashFacts(hostname=report["host"]["hostname"], crashed_at=report["crashed_at"],
                       boot_id=report["boot_id"], host_uptime_s=report["uptime_s"],
                       process_started_at=process["started_at"], process_uptime_s=process["uptime_s"])
    stack = userspace_report(core.analysis, facts, fingerprint=False)["stack"]
    # the release, as a handler that knows its program's version sends it (the core has none)
    stack["process"]["version"] = process["version"]
    return stack


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
