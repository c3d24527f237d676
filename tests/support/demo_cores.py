"""Userspace reports of the demo's real cores (registry/demo/cores): the ingest worker's return
to null in `ring_buffer_commit` and its null read in `chunk_index_merge`, as file mode reads
them, with a host, a crash time and a process start of the test's choosing."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from agents.coredump import CrashFacts, userspace_report
from registry.demo.labelled_cores import LabelledCore, read_cores

STARTED_AT = "2026-11-18T08:00:00Z"


@functools.cache
def demo_cores() -> tuple[LabelledCore, ...]:
    return tuple(read_cores())


def core_report(crash: str = "ring", release: str = "3.1.4", hostname: str = "vm-ingest-7",
                crashed_at: str = "2026-11-20T10:00:00Z", copy: int = 0) -> dict[str, Any]:
    """The report file mode sends for a core of `crash` in `release` (the `copy`-th of them)."""
    core = [c for c in demo_cores() if c.crash == crash and c.release == release][copy]
    uptime = (datetime.fromisoformat(crashed_at) - datetime.fromisoformat(STARTED_AT)).total_seconds()
    facts = CrashFacts(hostname=hostname, crashed_at=crashed_at, process_started_at=STARTED_AT,
                       process_uptime_s=uptime)
    report = userspace_report(core.analysis, facts, fingerprint=False)
    report["report_id"] = f"{report['report_id'][:60]}-{hostname}-{crashed_at}"
    report["stack"]["process"]["version"] = release
    report["host"] |= {"kernel_version": "6.8.0-52", "region": "us-east"}
    report["boot_id"] = f"boot-{hostname}-{crashed_at}"
    return report

