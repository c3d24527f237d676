"""Contract-shaped crash reports for tests."""

from __future__ import annotations

import uuid
from typing import Any

NULL_DEREF_LOG = """\
[ 8812.118803] BUG: kernel NULL pointer dereference, address: 0000000000000008
[ 8812.118810] #PF: supervisor read access in kernel mode
[ 8812.118815] Oops: 0000 [#1] SMP NOPTI
[ 8812.118820] CPU: 17 PID: 0 Comm: swapper/17 Tainted: G           OE     6.8.0-52-generic #53-Ubuntu
[ 8812.118830] RIP: 0010:mlx5e_poll_rx_cq+0x3a/0x9c0 [mlx5_core]
[ 8812.118900] Call Trace:
[ 8812.118905]  <IRQ>
[ 8812.118910]  mlx5e_napi_poll+0xde/0x6b0 [mlx5_core]
[ 8812.118915]  __napi_poll+0x30/0x1f0
[ 8812.118920]  net_rx_action+0x181/0x2e0
[ 8812.118925]  __do_softirq+0xe7/0x2f0
[ 8812.118930] Kernel panic - not syncing: Fatal exception in interrupt
"""


def crash_report(**overrides: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "report_id": f"r-{uuid.uuid4().hex}",
        "source": "crash_kernel",
        "crashed_at": "2026-11-29T12:00:00Z",
        "host": {
            "hostname": "gpu-a017",
            "physical_host": "phys-17",
            "region": "us-east",
            "kernel_version": "6.8.0-52",
            "memory_gb": 2048,
            "labels": {"pool": "train"},
        },
        "boot_id": f"boot-{uuid.uuid4().hex[:12]}",
        "uptime_s": 86400,
        "console_log": NULL_DEREF_LOG,
    }
    report.update(overrides)
    return report
