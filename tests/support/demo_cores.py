"""Userspace reports of the demo's real cores (registry/demo/cores): the ingest worker's return
to null in `ring_buffer_commit` and its null read in `chunk_index_merge`, as file mode read
them (the stored stacks), with a host, a crash time and a process start of the test's choosing."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

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
    process = core.stack["process"] | {"started_at": STARTED_AT, "uptime_s": uptime}
    report: dict[str, Any] = {"report_id": f"core-{core.name}", "source": "userspace",
                              "crashed_at": crashed_at, "host": {"hostname": hostname},
                              "stack": core.stack | {"process": process}}
    report["report_id"] = f"{report['report_id'][:60]}-{hostname}-{crashed_at}"
    report["stack"]["process"]["version"] = release
    report["host"] |= {"kernel_version": "6.8.0-52", "region": "us-east"}
    report["boot_id"] = f"boot-{hostname}-{crashed_at}"
    return report

