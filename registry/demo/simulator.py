"""A simulated fleet with crash populations of known cause (tests, bench and `crashreg demo`).

The fleet: regions and clusters of physical hosts; general-purpose SKUs run a hypervisor and
carry several VMs, GPU SKUs run bare metal; BIOS, BMC and microcode versions belong to their
SKU or CPU; a kernel rollout moves part of the fleet to a new kernel in stages. The crash
populations are a table: a bad CPU among VMs, a BIOS-linked machine check, a rollout
regression, software bugs spread evenly (one of them rising slowly), small signatures.
Everything comes out contract-shaped (host objects, crash reports with kernel console logs
the signature engine fingerprints into one signature per bug), deterministic from a seed.
The console logs are real ones (kernel_logs/: the crash lab's and syzkaller's) with the bug's
function and call chain put in: the simulator writes no oops text of its own.
"""

from __future__ import annotations

import functools
import math
import random
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DAY = timedelta(days=1)


@dataclass(frozen=True)
class SkuSpec:
    name: str
    cpu_model: str
    vendor: str  # DMI "Hardware name"
    bios_versions: tuple[str, ...]
    microcodes: tuple[str, ...]
    bmc_versions: tuple[str, ...]
    vms: tuple[int, int]  # VMs per physical host (0, 0: bare metal)
    gpu_drivers: tuple[str, ...] = ()
    memory_gb: int = 1024
    weight: float = 1.0


SKUS: tuple[SkuSpec, ...] = (
    SkuSpec(
        "gp-epyc-9654",
        "AMD EPYC 9654 96-Core Processor",
        "Dell Inc. PowerEdge R7625/0H1TJT",
        ("1.8.2", "1.9.0"),
        ("0xa101144", "0xa10114e"),
        ("7.10.30.00", "7.10.50.00"),
        (4, 10),
        weight=0.35,
    ),
    SkuSpec(
        "gp-xeon-8480",
        "Intel(R) Xeon(R) Platinum 8480+",
        "Supermicro SYS-221H-TNR/X13DEM",
        ("2.0.1", "2.2.3"),
        ("0x2b0004d0", "0x2b000590"),
        ("01.02.05", "01.03.01"),
        (4, 10),
        weight=0.35,
    ),
    SkuSpec(
        "gpu-h100-sxm",
        "Intel(R) Xeon(R) Platinum 8468",
        "Supermicro SYS-821GE-TNHR/X13DEG-OAD",
        ("2.1.4", "2.3.0"),
        ("0x2b000461", "0x2b000590"),
        ("01.01.09", "01.03.01"),
        (0, 0),
        ("535.154.05", "550.54.15"),
        2048,
        weight=0.15,
    ),
    SkuSpec(
        "gpu-a100-pcie",
        "AMD EPYC 7763 64-Core Processor",
        "GIGABYTE G292-Z44-00/MZ62-HD5-00",
        ("1.4.6", "1.5.1"),
        ("0xa0011d1", "0xa0011d3"),
        ("12.61.17", "12.61.21"),
        (0, 0),
        ("535.154.05", "550.54.15"),
        weight=0.15,
    ),
)
REGIONS: tuple[str, ...] = ("us-east", "us-west", "eu-central")
CLUSTERS_PER_REGION = 4
KERNEL_IMAGES: dict[str, str] = {
    "5.15.148-fleet.12": "fleetos-22.04.4",
    "6.1.80-fleet.3": "fleetos-24.04.1",
    "6.1.90-fleet.1": "fleetos-24.04.2",
}
INITIAL_KERNELS: tuple[tuple[str, float], ...] = (
    ("5.15.148-fleet.12", 0.6),
    ("6.1.80-fleet.3", 0.4),
)
ROLLOUT_KERNEL = "6.1.90-fleet.1"
HYPERVISOR = "kvm-qemu-8.2"
TEAMS: tuple[str, ...] = ("search", "ads", "storage", "ml-training", "web")


@dataclass(frozen=True)
class Bug:
    """One bug: the console log kind and where it strikes (kernel), or the program, its signal
    and its stack (userspace: kind "userspace", `executable` set, `where` the signal)."""

    kind: str  # a kernel log template (kernel_logs/<kind>.log), or "userspace"
    function: str
    module: str | None = None
    callers: tuple[str, ...] = ()
    where: str = ""  # file:line for BUG/WARNING kinds, bank for machine checks, signal (userspace)
    executable: str | None = None
    core: str = ""  # userspace: the crash of the demo program's real cores (registry/demo/labelled_cores.py)


@dataclass(frozen=True)
class CrashPopulation:
    """Crashes of one known cause; `cause` is a key of CAUSES."""

    name: str
    cause: str
    bug: Bug
    events: int
    expected_verdict: str
    expected_attribute: str | None = None
    spray: tuple[Bug, ...] = ()  # bad host only: further signatures it sprays
    spray_events: int = 0


SPREAD_CALLERS = ("process_one_work", "worker_thread", "kthread", "ret_from_fork")
SYSCALL_CALLERS = ("__x64_sys_ioctl", "do_syscall_64", "entry_SYSCALL_64_after_hwframe")
NAPI_CALLERS = ("__napi_poll", "net_rx_action", "__do_softirq", "irq_exit_rcu")

# Functions a CPU that computes wrong crashes in: ordinary kernel code, "impossible" faults.
# Where a CPU that computes wrong crashes: ordinary kernel code, "impossible" faults and
# failed sanity checks (function, source line for the WARNING kind).
IMPOSSIBLE: tuple[tuple[str, str], ...] = (
    ("rb_insert_color", "lib/rbtree.c:231"),
    ("find_vma", "mm/mmap.c:1862"),
    ("__d_lookup_rcu", "fs/dcache.c:2291"),
    ("tcp_v4_rcv", "net/ipv4/tcp_ipv4.c:2035"),
    ("ext4_find_extent", "fs/ext4/extents.c:904"),
    ("filemap_get_read_batch", "mm/filemap.c:2388"),
    ("skb_release_data", "net/core/skbuff.c:893"),
    ("select_task_rq_fair", "kernel/sched/fair.c:7321"),
    ("unmap_page_range", "mm/memory.c:1580"),
    ("xas_load", "lib/xarray.c:206"),
    ("update_cfs_rq_load_avg", "kernel/sched/fair.c:4011"),
    ("ip_route_input_noref", "net/ipv4/route.c:2470"),
    ("copy_process", "kernel/fork.c:2330"),
    ("mas_walk", "lib/maple_tree.c:4930"),
)
SPRAY_KINDS: tuple[str, ...] = ("warning", "gpf", "paging")

DEFAULT_POPULATIONS: tuple[CrashPopulation, ...] = (
    CrashPopulation(
        "bad-cpu-host",
        "bad-host",
        Bug(
            "gpf",
            "native_queued_spin_lock_slowpath.part.0",
            None,
            ("_raw_spin_lock", "try_to_wake_up", "wake_up_q", "futex_wake", "do_futex", "__x64_sys_futex"),
        ),
        40,
        "single-host",
        "physical_host",
        spray=tuple(
            Bug(SPRAY_KINDS[i % len(SPRAY_KINDS)], name, None, SYSCALL_CALLERS, where)
            for i, (name, where) in enumerate(IMPOSSIBLE)
        ),
        spray_events=28,
    ),
    CrashPopulation(
        "bios-machine-check",
        "firmware",
        Bug("mce", "mce_panic", None, (), "Bank 17: be00000000800400"),
        60,
        "hardware-config",
        "bios_version",
    ),
    CrashPopulation(
        "rollout-regression",
        "rollout",
        Bug("null_deref", "mlx5e_poll_rx_cq", "mlx5_core", ("mlx5e_napi_poll", *NAPI_CALLERS)),
        120,
        "software",
        "kernel_version",
    ),
    CrashPopulation(
        "ext4-spread",
        "spread",
        Bug(
            "bug_at",
            "ext4_writepages",
            None,
            (
                "do_writepages",
                "__writeback_single_inode",
                "writeback_sb_inodes",
                "wb_writeback",
                *SPREAD_CALLERS,
            ),
            "fs/ext4/inode.c:2693",
        ),
        140,
        "software",
    ),
    CrashPopulation(
        "nvme-timeout-spread",
        "spread",
        Bug("bug_at", "nvme_tcp_io_work", "nvme_tcp", SPREAD_CALLERS, "drivers/nvme/host/tcp.c:1285"),
        110,
        "software",
    ),
    CrashPopulation(
        "tcp-warning-spread",
        "spread",
        Bug(
            "warning",
            "tcp_fastretrans_alert",
            None,
            ("tcp_ack", "tcp_rcv_established", "tcp_v4_do_rcv", "tcp_v4_rcv", "ip_protocol_deliver_rcu"),
            "net/ipv4/tcp_input.c:2955",
        ),
        90,
        "software",
    ),
    CrashPopulation(
        "xfs-lockup-rising",
        "rising",
        Bug(
            "soft_lockup",
            "xfs_extent_busy_flush",
            "xfs",
            ("xfs_alloc_ag_vextent_near", "xfs_alloc_vextent", "xfs_bmap_btalloc", *SPREAD_CALLERS),
        ),
        100,
        "software",
    ),
    CrashPopulation(
        "small-hung-task",
        "small",
        Bug(
            "hung_task",
            "io_schedule",
            None,
            (
                "bit_wait_io",
                "__wait_on_bit",
                "out_of_line_wait_on_bit",
                "jbd2_journal_commit_transaction",
                "kjournald2",
            ),
        ),
        3,
        "inconclusive",
    ),
    CrashPopulation(
        "small-bpf-paging",
        "small",
        Bug(
            "warning",
            "bpf_prog_run_array",
            None,
            ("trace_call_bpf", "kprobe_perf_func", "kprobe_dispatcher", "kprobe_ftrace_handler"),
            "kernel/bpf/core.c:2217",
        ),
        4,
        "inconclusive",
    ),
)


PROGRAM = "/usr/bin/ingest-worker"
POOL_CLUSTERS: tuple[str, ...] = ("us-east-c1", "us-west-c2", "eu-central-c3")
VM_BIOS = "1.16.3-debian-1.16.3-2"  # the virtual firmware every VM reports (SeaBIOS)
PROGRAM_CALLERS = ("worker_loop", "std::thread::_State_impl::_M_run", "start_thread", "clone3")

# Confounders (issue 16): a program deployed on a VM pool whose VMs all share the virtual BIOS,
# the hypervisor, a label and their clusters; one of its signatures is a mixture (a bad physical
# host in the pool plus a race spread over the pool); a kernel bug that needs long uptimes,
# which a rollout that rebooted most of the fleet turns into an "old kernel" finding against a
# snapshot of today's inventory.
CONFOUNDED_POPULATIONS: tuple[CrashPopulation, ...] = (
    CrashPopulation(
        "pool-mixed",
        "pool-mixed",
        Bug("userspace", "ring_buffer_commit", "ingest-worker", PROGRAM_CALLERS, "SIGSEGV", PROGRAM, "ring"),
        120,
        "software",
        "physical_host",
    ),
    CrashPopulation(
        "pool-race",
        "pool-spread",
        Bug("userspace", "chunk_index_merge", "ingest-worker", PROGRAM_CALLERS, "SIGSEGV", PROGRAM, "index"),
        90,
        "software",
    ),
    CrashPopulation(
        "long-uptime",
        "long-uptime",
        Bug("soft_lockup", "compaction_alloc", None, ("isolate_freepages", "migrate_pages", *SPREAD_CALLERS)),
        150,
        "software",
    ),
)


@dataclass(frozen=True)
class FleetConfig:
    seed: int = 7
    days: int = 90
    start: datetime = datetime(2026, 8, 1, tzinfo=UTC)
    physical_per_cluster: int = 35
    rollout_day: int = 45
    rollout_share: float = 0.35
    bad_host_onset_day: int = 20
    firmware_bios: str = "2.1.4"  # exists on gpu-h100-sxm only
    populations: tuple[CrashPopulation, ...] = DEFAULT_POPULATIONS
    scale: float = 1.0  # multiplies every population's event count
    # confounders, off by default (see `confounded`)
    pool_clusters: tuple[str, ...] = ()  # clusters whose VMs run PROGRAM (label service=ingest-worker)
    vm_bios: str | None = None  # the BIOS string VMs report; None: their physical host's
    concentrated_share: float = 0.3  # pool-mixed: share of its crashes on the pool's bad host
    long_uptime_days: float = 30.0  # long-uptime: crashes only on hosts up at least this long
    program_upgrade_day: int = 45  # PROGRAM's processes started from this day on run its new release


def confounded(seed: int = 7, concentrated_share: float = 0.3, **overrides: Any) -> FleetConfig:
    """A fleet with the confounders of issue 16 beside the clean populations."""
    settings: dict[str, Any] = {
        "seed": seed,
        "rollout_share": 0.8,
        "pool_clusters": POOL_CLUSTERS,
        "vm_bios": VM_BIOS,
        "concentrated_share": concentrated_share,
        "populations": DEFAULT_POPULATIONS + CONFOUNDED_POPULATIONS,
    }
    return FleetConfig(**(settings | overrides))


def today_start(days: int = 90) -> datetime:
    """The start of a simulated fleet of `days` days ending this hour (the demo's): its last
    crashes are today's, none in the future."""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - days * DAY


@dataclass
class Simulation:
    config: FleetConfig
    inventory: list[tuple[datetime, list[dict[str, Any]]]]  # (observed_at, hosts) in time order
    reports: list[dict[str, Any]]  # in time order
    truth: dict[str, str]  # report_id -> population name
    bug_of: dict[str, Bug]  # report_id -> bug (the intended signature)
    bad_physical_host: str
    end: datetime
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # final inventory
    rollout_at: dict[str, datetime] = field(default_factory=dict)  # host -> when it took the rollout
    pool_bad_physical_host: str | None = None  # the bad host of the pool-mixed population

    def population(self, name: str) -> CrashPopulation:
        return next(p for p in self.config.populations if p.name == name)

    def host_at(self, name: str, moment: datetime) -> dict[str, Any]:
        return _host_at(self.hosts, self.rollout_at, name, moment)

    def pool(self) -> list[str]:
        """The hosts running PROGRAM (the deployment pool)."""
        return _pool(self.hosts)


SERVICE_LABEL = ("service", "ingest-worker")  # what the pool's hosts carry
# Values every host of the program's pool carries: they describe the population, never a cause.
POOL_SHARED = frozenset(
    {("bios_version", VM_BIOS), ("hypervisor", HYPERVISOR), ("labels", "=".join(SERVICE_LABEL))}
)


def _pool(hosts: dict[str, dict[str, Any]]) -> list[str]:
    key, value = SERVICE_LABEL
    return sorted(n for n, h in hosts.items() if (h.get("labels") or {}).get(key) == value)


def _host_at(
    hosts: dict[str, dict[str, Any]], rollout_at: dict[str, datetime], name: str, moment: datetime
) -> dict[str, Any]:
    host = hosts[name]
    switched = rollout_at.get(name)
    if switched is not None and switched <= moment:
        return host | {"kernel_version": ROLLOUT_KERNEL, "os_image": KERNEL_IMAGES[ROLLOUT_KERNEL]}
    return host


def weekly_inventory(sim: Simulation) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """The whole fleet as an inventory job sees it once a week from the start (a history)."""
    moments = []
    moment = sim.config.start - timedelta(hours=1)
    while moment <= sim.end:
        moments.append(moment)
        moment += 7 * DAY
    return [(m, [sim.host_at(name, m) for name in sorted(sim.hosts)]) for m in moments]


def one_off_inventory(sim: Simulation) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """The fleet loaded once, today, after all the crashes (no history)."""
    return [(sim.end, [sim.host_at(name, sim.end) for name in sorted(sim.hosts)])]


def _pick_weighted(rng: random.Random, options: Sequence[tuple[Any, float]]) -> Any:
    return rng.choices([o for o, _ in options], weights=[w for _, w in options])[0]


def _build_fleet(config: FleetConfig, rng: random.Random) -> dict[str, dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    vm_number = 0
    for region in REGIONS:
        for c in range(1, CLUSTERS_PER_REGION + 1):
            cluster = f"{region}-c{c}"
            for p in range(1, config.physical_per_cluster + 1):
                sku = _pick_weighted(rng, [(s, s.weight) for s in SKUS])
                physical = f"{'hv' if sku.vms[1] else 'bm'}-{cluster}-{p:03d}"
                hardware = {
                    "physical_host": physical,
                    "region": region,
                    "cluster": cluster,
                    "sku": sku.name,
                    "cpu_model": sku.cpu_model,
                    "microcode": rng.choice(sku.microcodes),
                    "bios_version": rng.choice(sku.bios_versions),
                    "bmc_version": rng.choice(sku.bmc_versions),
                    "memory_gb": sku.memory_gb,
                }
                booted = config.start - timedelta(days=rng.uniform(0.5, 120))
                hosts[physical] = _host(physical, hardware, rng, booted) | {
                    "gpu_driver": rng.choice(sku.gpu_drivers) if sku.gpu_drivers else None,
                    "hypervisor": None,
                }
                for _ in range(rng.randint(*sku.vms) if sku.vms[1] else 0):
                    vm_number += 1
                    name = f"vm-{region}-{vm_number:05d}"
                    booted = config.start - timedelta(days=rng.uniform(0.5, 120))
                    hosts[name] = _host(name, hardware, rng, booted) | {
                        "hypervisor": HYPERVISOR,
                        "memory_gb": 64,
                        "gpu_driver": None,
                    }
                    _confound(hosts[name], config)
    return hosts


def _confound(vm: dict[str, Any], config: FleetConfig) -> None:
    """A VM of the confounded fleet: virtual firmware; in the pool, the program's label."""
    if config.vm_bios:
        vm["bios_version"] = config.vm_bios
    if vm["cluster"] in config.pool_clusters:
        vm["labels"] = vm["labels"] | dict([SERVICE_LABEL])


def _host(hostname: str, hardware: dict[str, Any], rng: random.Random, booted: datetime) -> dict[str, Any]:
    kernel = _pick_weighted(rng, INITIAL_KERNELS)
    return {
        "hostname": hostname,
        **hardware,
        "kernel_version": kernel,
        "os_image": KERNEL_IMAGES[kernel],
        "labels": {
            "team": rng.choice(TEAMS),
            "tier": "prod" if rng.random() < 0.8 else "staging",
        },
        "booted_at": booted,
    }


def _vmcore_host(host: dict[str, Any]) -> dict[str, Any]:
    """The host object a reporter sends (no inventory-only fields)."""
    return {k: v for k, v in host.items() if k != "booted_at" and v is not None}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Fleet:
    """The fleet over time: who runs which kernel when."""

    def __init__(self, config: FleetConfig, rng: random.Random) -> None:
        self.config = config
        self.hosts = _build_fleet(config, rng)
        names = sorted(self.hosts)
        chosen = rng.sample(names, round(config.rollout_share * len(names)))
        self.rollout_at: dict[str, datetime] = {}
        stage_length = len(chosen) // 3 + 1
        for index, name in enumerate(chosen):
            stage = index // stage_length
            self.rollout_at[name] = (
                config.start + (config.rollout_day + stage) * DAY + timedelta(hours=rng.uniform(8, 18))
            )

    def host_at(self, name: str, moment: datetime) -> dict[str, Any]:
        return _host_at(self.hosts, self.rollout_at, name, moment)

    def inventory(self) -> list[tuple[datetime, list[dict[str, Any]]]]:
        start = self.config.start - timedelta(hours=1)
        snapshots = [(start, [dict(h) for h in self.hosts.values()])]
        by_time: dict[datetime, list[dict[str, Any]]] = {}
        for name, moment in self.rollout_at.items():
            day = moment.replace(hour=20, minute=0, second=0, microsecond=0)
            by_time.setdefault(day, []).append(self.host_at(name, moment) | {"booted_at": moment})
        snapshots += sorted(by_time.items())
        return snapshots


# ---- crash placement: cause -> (when, which host) ---------------------------------------


def _uniform_time(rng: random.Random, start: datetime, days: float) -> datetime:
    return start + timedelta(seconds=rng.uniform(0, days * 86_400))


def _place_spread(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    names = ctx["names"]
    return [
        (_uniform_time(rng, sim.config.start, sim.config.days), rng.choice(names), None)
        for _ in range(ctx["events"])
    ]


def _place_rising(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    names = ctx["names"]
    days = sim.config.days
    return [
        (sim.config.start + timedelta(days=days * rng.random() ** 0.5), rng.choice(names), None)
        for _ in range(ctx["events"])
    ]


def _place_rollout(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    rolled = sorted(sim.rollout_at)
    first = min(sim.rollout_at.values())
    days = (ctx["end"] - first).total_seconds() / 86_400
    out = []
    while len(out) < ctx["events"]:
        moment = _uniform_time(rng, first, days)
        name = rng.choice(rolled)
        if sim.rollout_at[name] <= moment:  # only hosts already on the new kernel
            out.append((moment, name, None))
    return out


def _place_firmware(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    bios = [n for n, h in sim.hosts.items() if h["bios_version"] == sim.config.firmware_bios]
    return [
        (
            _uniform_time(rng, sim.config.start, sim.config.days),
            rng.choice(bios),
            timedelta(days=rng.uniform(0.1, 2.5)),  # fails early after boot
        )
        for _ in range(ctx["events"])
    ]


def _place_bad_host(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    vms = ctx["bad_vms"]
    onset = sim.config.start + sim.config.bad_host_onset_day * DAY
    days = sim.config.days - sim.config.bad_host_onset_day
    on_host = ctx["events"] - max(1, ctx["events"] // 20)
    out = [(_uniform_time(rng, onset, days), rng.choice(vms), None) for _ in range(on_host)]
    out += [
        (_uniform_time(rng, onset, days), rng.choice(ctx["names"]), None)
        for _ in range(ctx["events"] - on_host)
    ]
    return out


def _place_small(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    return [
        (_uniform_time(rng, sim.config.start, sim.config.days), name, None)
        for name in rng.sample(ctx["names"], ctx["events"])
    ]


def _place_pool_spread(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    return [
        (_uniform_time(rng, sim.config.start, sim.config.days), rng.choice(ctx["pool"]), None)
        for _ in range(ctx["events"])
    ]


def _place_pool_mixed(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    """`concentrated_share` on the VMs of the pool's bad host (since its onset), the rest spread
    over the pool (a race)."""
    onset = sim.config.start + sim.config.bad_host_onset_day * DAY
    days = sim.config.days - sim.config.bad_host_onset_day
    on_host = round(ctx["events"] * sim.config.concentrated_share)
    out = [(_uniform_time(rng, onset, days), rng.choice(ctx["pool_bad_vms"]), None) for _ in range(on_host)]
    out += [
        (_uniform_time(rng, sim.config.start, sim.config.days), rng.choice(ctx["pool"]), None)
        for _ in range(ctx["events"] - on_host)
    ]
    return out


def _place_long_uptime(sim: _Fleet, rng: random.Random, pop: CrashPopulation, ctx: dict) -> list:
    """Spread over the fleet, but only on hosts up `long_uptime_days` (boot or rollout reboot;
    `simulate` drops those a crash rebooted meanwhile). Twice the candidates: some drop."""
    least = sim.config.long_uptime_days * DAY
    out = []
    while len(out) < 2 * ctx["events"]:
        moment = _uniform_time(rng, sim.config.start, sim.config.days)
        name = rng.choice(ctx["names"])
        boot = sim.hosts[name]["booted_at"]
        switched = sim.rollout_at.get(name)
        if switched is not None and switched <= moment:
            boot = max(boot, switched)
        if moment - boot >= least:
            out.append((moment, name, LONG_UPTIME))
    return out


LONG_UPTIME = timedelta(0)  # marker: keep the crash only if the host is still up long enough

CAUSES = {
    "pool-spread": _place_pool_spread,
    "pool-mixed": _place_pool_mixed,
    "long-uptime": _place_long_uptime,
    "spread": _place_spread,
    "rising": _place_rising,
    "rollout": _place_rollout,
    "firmware": _place_firmware,
    "bad-host": _place_bad_host,
    "small": _place_small,
}


def _choose_bad_host(
    fleet: _Fleet, rng: random.Random, among: Sequence[str] | None = None, avoid: str | None = None
) -> tuple[str, list[str]]:
    """A hypervisor with at least six VMs (among these VMs, when given)."""
    carriers: dict[str, list[str]] = {}
    for name in among if among is not None else fleet.hosts:
        host = fleet.hosts[name]
        if host.get("hypervisor"):
            carriers.setdefault(host["physical_host"], []).append(name)
    candidates = sorted(p for p, vms in carriers.items() if len(vms) >= 6 and p != avoid)
    physical = rng.choice(candidates)
    return physical, sorted(carriers[physical])


def simulate(config: FleetConfig | None = None) -> Simulation:
    """The whole simulation, deterministic from `config.seed`."""
    config = config or FleetConfig()
    rng = random.Random(config.seed)
    fleet = _Fleet(config, rng)
    end = config.start + config.days * DAY
    bad_physical, bad_vms = _choose_bad_host(fleet, rng)
    names = sorted(fleet.hosts)
    pool = _pool(fleet.hosts)
    pool_bad, pool_bad_vms = (
        _choose_bad_host(fleet, random.Random(config.seed + 1), pool, bad_physical) if pool else (None, [])
    )
    planned: list[tuple[datetime, str, timedelta | None, CrashPopulation, Bug]] = []
    for pop in config.populations:
        events = max(1, round(pop.events * config.scale)) if pop.cause != "small" else pop.events
        ctx = {
            "names": names,
            "events": events,
            "end": end,
            "bad_vms": bad_vms,
            "pool": pool,
            "pool_bad_vms": pool_bad_vms,
        }
        for moment, name, early in CAUSES[pop.cause](fleet, rng, pop, ctx):
            planned.append((moment, name, early, pop, pop.bug))
        if pop.spray:
            onset = config.start + config.bad_host_onset_day * DAY
            for i in range(round(pop.spray_events * config.scale)):
                bug = pop.spray[i % len(pop.spray)]
                moment = _uniform_time(rng, onset, config.days - config.bad_host_onset_day)
                planned.append((moment, rng.choice(bad_vms), None, pop, bug))
    planned.sort(key=lambda item: (item[0], item[1]))

    booted = {name: host["booted_at"] for name, host in fleet.hosts.items()}
    reports, truth, bug_of = [], {}, {}
    kept: Counter[str] = Counter()
    for index, (moment, name, early, pop, bug) in enumerate(planned):
        boot = booted[name]
        switched = fleet.rollout_at.get(name)
        if switched is not None and switched <= moment:
            boot = max(boot, switched)  # the rollout rebooted it
        if early is LONG_UPTIME:
            wanted = max(1, round(pop.events * config.scale))
            if moment - boot < config.long_uptime_days * DAY or kept[pop.name] >= wanted:
                continue  # a crash rebooted it meanwhile (or enough of them)
            kept[pop.name] += 1
        elif early is not None and moment - early > boot:
            boot = moment - early
        uptime = max(60.0, (moment - boot).total_seconds())
        host = fleet.host_at(name, moment)
        report_id = f"sim{config.seed}-{index:06d}"
        report = {
            "report_id": report_id,
            "source": "userspace" if bug.executable else "crash_kernel",
            "crashed_at": _iso(moment),
            "host": _vmcore_host(host),
            "boot_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "uptime_s": int(uptime),
        }
        if bug.executable:
            # the race of a mixed population crashes processes at start-up; a separate generator
            # keeps the kernel crashes' logs what they were
            race = pop.cause == "pool-mixed" and name not in pool_bad_vms
            process = program_process(config, moment, uptime, race, random.Random(f"{config.seed}:{index}"))
            report["stack"] = user_stack(bug, rng, process)
        else:
            report["console_log"] = console_log(bug, host, uptime, rng)
        reports.append(report)
        truth[report_id] = pop.name
        bug_of[report_id] = bug
        if not bug.executable:  # a program's crash does not reboot its host
            booted[name] = moment + timedelta(minutes=rng.uniform(2, 10))
    return Simulation(
        config=config,
        inventory=fleet.inventory(),
        reports=reports,
        truth=truth,
        bug_of=bug_of,
        bad_physical_host=bad_physical,
        end=end,
        hosts=fleet.hosts,
        rollout_at=fleet.rollout_at,
        pool_bad_physical_host=pool_bad,
    )


def inventory_json(snapshot: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Host objects ready for POST /api/v1/hosts (dates as ISO strings, no nulls)."""
    return [
        {k: (_iso(v) if isinstance(v, datetime) else v) for k, v in h.items() if v is not None}
        for h in snapshot
    ]


# ---- userspace stacks and console logs ---------------------------------------------------


# PROGRAM's releases (version, build-id); processes started from `program_upgrade_day` on run the second.
PROGRAM_RELEASES: tuple[tuple[str, str], ...] = (
    ("3.1.4", "5f1e" * 10),
    ("3.2.0", "8c07" * 10),
)
STARTUP_S = (5.0, 600.0)  # how long a process has run when a start-up race crashes it


def program_process(
    config: FleetConfig, moment: datetime, host_uptime_s: float, race: bool, rng: random.Random
) -> dict[str, Any]:
    """The stack's `process` of one crash of PROGRAM: how long it had run (a start-up race:
    minutes; otherwise anything up to the host's uptime, log-uniform), when it started and
    the release it ran."""
    if race:
        uptime = min(rng.uniform(*STARTUP_S), host_uptime_s)
    else:
        uptime = math.exp(rng.uniform(math.log(STARTUP_S[1]), math.log(max(host_uptime_s, STARTUP_S[1] + 1))))
    started = moment - timedelta(seconds=uptime)
    upgraded = started >= config.start + config.program_upgrade_day * DAY
    version = PROGRAM_RELEASES[1 if upgraded else 0][0]
    return {"pid": rng.randrange(300, 4_000_000), "name": PROGRAM.rsplit("/", 1)[-1],
            "started_at": _iso(started), "uptime_s": round(uptime, 3), "version": version}


def user_stack(bug: Bug, rng: random.Random, process: dict[str, Any]) -> dict[str, Any]:
    """The contract's `stack` of one crash of a userspace bug (addresses random, frames not)
    with its `process` (`program_process`)."""
    frames = [
        {"function": function, "module": bug.module, "offset": f"0x{rng.randrange(0x10, 0x800):x}"}
        for function in (bug.function, *bug.callers)
    ]
    build_id = dict(PROGRAM_RELEASES)[process["version"]]
    return {"executable": bug.executable, "signal": bug.where, "build_id": build_id, "frames": frames,
            "process": process}


NOISE: tuple[str, ...] = (
    "systemd-journald[{pid}]: Received client request to flush runtime journal.",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth{cpu}: link becomes ready",
    "EXT4-fs (nvme0n1p{cpu}): mounted filesystem with ordered data mode. Quota mode: none.",
    "mlx5_core 0000:{bus:02x}:00.0: mlx5e_tx_timeout_work: TX timeout on queue: {cpu}",
    'audit: type=1400 audit({epoch}.{ms:03d}:{pid}): apparmor="DENIED" operation="open"',
    "kvm: vcpu {cpu}: requested {khz} kHz, host TSC {khz} kHz",
    "perf: interrupt took too long ({pid} > {ms}), lowering kernel.perf_event_max_sample_rate",
)
COMMS: tuple[str, ...] = (
    "kworker/{cpu}:1",
    "swapper/{cpu}",
    "java",
    "python3",
    "containerd",
    "nginx",
    "postgres",
    "ksoftirqd/{cpu}",
)
MODULES = "mlx5_ib mlx5_core nvme_tcp nvme_fabrics xfs bonding tls nf_tables nvidia_uvm(POE)"


def _hex(rng: random.Random, digits: int = 16) -> str:
    return f"{rng.getrandbits(4 * digits):0{digits}x}"


def _frame(function: str, rng: random.Random, module: str | None = None) -> str:
    offset = rng.randrange(0x10, 0x400)
    size = offset + rng.randrange(0x40, 0x600)
    suffix = f" [{module}]" if module else ""
    return f"{function}+0x{offset:x}/0x{size:x}{suffix}"


KERNEL_LOGS = Path(__file__).parent / "kernel_logs"
MARK = re.compile(r"@(\w+)@")
REGISTER_DUMP = re.compile(r"^(RSP|RAX|RDX|RBP|R10|R13|FS|CR2|DR[0-9]): ")
HEX_WORD = re.compile(r"\b[0-9a-f]{16}\b")


@functools.cache
def kernel_log_template(kind: str) -> tuple[str, ...]:
    """The crash lines of a real console log with its volatile fields marked
    (kernel_logs/README.md says where each comes from)."""
    lines = (KERNEL_LOGS / f"{kind}.log").read_text().splitlines()
    return tuple(line for line in lines if not line.startswith("# SOURCE:"))


def _trace(bug: Bug, rng: random.Random) -> list[str]:
    """The bug's call chain as the kernel prints it under `Call Trace:`."""
    if bug.kind == "hung_task":
        return [f" {_frame(name, rng)}" for name in ("__schedule", "schedule", bug.function, *bug.callers)]
    prefix = bug.function.split("_")[0]
    return [f" {_frame(name, rng, bug.module if name.startswith(prefix) else None)}" for name in bug.callers]


def console_log(bug: Bug, host: dict[str, Any], uptime_s: float, rng: random.Random) -> str:
    """A kernel console tail for one crash of `bug`: noise, then a real log of its kind
    (`kernel_log_template`) naming the bug's function and call chain.

    Everything that differs between two crashes of one bug (timestamps, addresses, offsets,
    registers, PIDs, CPUs, task names) is random; the bug's kind, function and call chain are not.
    """
    cpu = rng.randrange(0, 96)
    fill = {
        "cpu": cpu,
        "pid": rng.randrange(100, 400_000),
        "bus": rng.randrange(0, 0xFF),
        "epoch": 1_780_000_000 + rng.randrange(10**7),
        "ms": rng.randrange(1000),
        "khz": rng.randrange(2_000_000, 3_800_000),
    }
    fill["comm"] = rng.choice(COMMS).format(**fill)
    marks = {
        "rip": _frame(bug.function, rng, bug.module),
        "where": bug.where,
        "cpu": str(cpu),
        "pid": str(fill["pid"]),
        "comm": fill["comm"],
        "taint": "Tainted: G           OE" if "nvidia" in MODULES else "Not tainted",
        "kernel": host.get("kernel_version", "6.1.0"),
        "hardware": _vendor(host),
        "bios": host.get("bios_version", "1.0"),
        "bios_date": f"{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/2026",
        "modules": MODULES,
        "stuck": str(rng.randint(22, 48)),
        "blocked": str(rng.choice([122, 245, 368])),
        "epoch": str(fill["epoch"]),
        "socket": str(cpu % 2),
        "apic": f"{cpu * 2:x}",
        "microcode": host.get("microcode", "0x0")[2:],
    }
    clock = max(uptime_s - rng.uniform(5, 60), 1.0)
    lines: list[str] = []

    def emit(text: str) -> None:
        nonlocal clock
        clock += rng.uniform(0.000001, 0.0004)
        lines.append(f"[{clock:12.6f}] {text}")

    for _ in range(rng.randint(2, 6)):
        emit(rng.choice(NOISE).format(**fill))
    for line in kernel_log_template(bug.kind):
        if line == "@trace@":
            for frame in _trace(bug, rng):
                emit(frame)
            continue
        if REGISTER_DUMP.match(line):
            line = HEX_WORD.sub(lambda _: _hex(rng), line)
        emit(MARK.sub(lambda mark: marks[mark.group(1)], line))
    return "\n".join(lines) + "\n"


def _vendor(host: dict[str, Any]) -> str:
    if host.get("hypervisor"):
        return "QEMU Standard PC (Q35 + ICH9, 2009)"
    sku = next((s for s in SKUS if s.name == host.get("sku")), None)
    return sku.vendor if sku else "Generic Server"
