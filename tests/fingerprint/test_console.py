"""Kernel console logs: every crash kind, the guilty frame, and what stays out of the identity."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.fingerprint import ALGORITHM_VERSION, analyse_console_log, analyse_report

FIXTURES = Path(__file__).parent / "fixtures"


def log(*lines: str, start: float = 100.0, ctx: str | None = None) -> str:
    """A console log: each line gets a timestamp (and a printk caller context if given)."""
    prefix = f"[ {ctx:>5}]" if ctx else ""
    return "".join(f"[{start + i / 1000:12.6f}]{prefix} {line}\n" for i, line in enumerate(lines))


TRACE = ("Call Trace:", " <TASK>")
TAIL = (" do_syscall_64+0x3b/0x90", " entry_SYSCALL_64_after_hwframe+0x44/0xae", " </TASK>")

# (name, log, kind, function, title fragment)
KINDS = [
    ("null-deref", log("BUG: kernel NULL pointer dereference, address: 0000000000000008",
                       "#PF: supervisor read access in kernel mode", "Oops: 0000 [#1] SMP PTI",
                       "RIP: 0010:ext4_xattr_get+0x5d/0x2a0", *TRACE,
                       " __vfs_getxattr+0x54/0x70", *TAIL),
     "null-deref", "ext4_xattr_get", "BUG: kernel NULL pointer dereference in ext4_xattr_get"),
    ("old null-deref", log("BUG: unable to handle kernel NULL pointer dereference at (null)",
                           "IP: [<ffffffff812f3a1b>] tcp_v4_rcv+0x2b/0x900",
                           "Oops: 0000 [#1] SMP"),
     "null-deref", "tcp_v4_rcv", "NULL pointer dereference in tcp_v4_rcv"),
    ("paging request", log("BUG: unable to handle page fault for address: ffffc90000a3f000",
                           "#PF: supervisor write access in kernel mode",
                           "Oops: 0002 [#1] PREEMPT SMP", "RIP: 0010:memset_orig+0x33/0xb0",
                           *TRACE, " nvme_setup_cmd+0x1a0/0x3c0 [nvme_core]", *TAIL),
     "paging-request", "nvme_setup_cmd", "paging request in nvme_setup_cmd [nvme_core]"),
    ("arm64 paging", log("Unable to handle kernel paging request at virtual address dead0000"
                         "00000108", "Internal error: Oops: 96000044 [#1] PREEMPT SMP",
                         "pc : list_del_entry+0x1c/0x40", "lr : xhci_urb_dequeue+0x88/0x200",
                         "Call trace:", " list_del_entry+0x1c/0x40",
                         " xhci_urb_dequeue+0x88/0x200", " usb_hcd_unlink_urb+0x6c/0x110"),
     "paging-request", "xhci_urb_dequeue", "paging request in xhci_urb_dequeue"),
    ("gpf", log("general protection fault, probably for non-canonical address 0xdffffc00: 0000"
                " [#1] PREEMPT SMP KASAN", "RIP: 0010:tcf_exts_destroy+0x3c/0x120", *TRACE,
                " tcf_exts_destroy+0x3c/0x120", " fl_destroy_filter+0x20/0x40", *TAIL),
     "gpf", "tcf_exts_destroy", "general protection fault in tcf_exts_destroy"),
    ("kernel BUG", log("------------[ cut here ]------------",
                       "kernel BUG at fs/ext4/inode.c:2716!",
                       "invalid opcode: 0000 [#1] SMP NOPTI",
                       "RIP: 0010:ext4_writepages+0x1170/0x1180", *TRACE,
                       " do_writepages+0xd2/0x1e0", *TAIL),
     "kernel-bug", "ext4_writepages", "kernel BUG in ext4_writepages"),
    ("warning", log("------------[ cut here ]------------",
                    "WARNING: CPU: 3 PID: 4410 at net/sched/sch_generic.c:477 "
                    "dev_watchdog+0x24b/0x250", "RIP: 0010:dev_watchdog+0x24b/0x250", *TRACE,
                    " call_timer_fn+0x29/0x130", *TAIL),
     "warning", "dev_watchdog", "WARNING in dev_watchdog"),
    ("refcount warning", log("refcount_t: underflow; use-after-free.",
                             "WARNING: CPU: 0 PID: 1 at lib/refcount.c:28 "
                             "refcount_warn_saturate+0xba/0x110",
                             "RIP: 0010:refcount_warn_saturate+0xba/0x110", *TRACE,
                             " mlx5e_tls_del+0x51/0x90 [mlx5_core]",
                             *TAIL),
     "warning", "mlx5e_tls_del", "WARNING: refcount bug in mlx5e_tls_del [mlx5_core]"),
    ("tx timeout", log("NETDEV WATCHDOG: eth2 (mlx5_core): transmit queue 17 timed out 5120 ms",
                       "WARNING: CPU: 12 PID: 0 at net/sched/sch_generic.c:525 "
                       "dev_watchdog+0x21f/0x230"),
     "tx-timeout", None, "transmit queue timed out [mlx5_core]"),
    ("soft lockup", log("watchdog: BUG: soft lockup - CPU#7 stuck for 22s! [kworker/7:1:341]",
                        "RIP: 0010:_raw_spin_lock+0x1a/0x30", *TRACE,
                        " i40e_clean_adminq_subtask+0x1d/0x200 [i40e]",
                        " process_one_work+0x1f0/0x3c0", " worker_thread+0x50/0x3b0",
                        " kthread+0x127/0x150", " ret_from_fork+0x1f/0x30"),
     "soft-lockup", "i40e_clean_adminq_subtask", "soft lockup in i40e_clean_adminq_subtask"),
    ("hung task", log("INFO: task jbd2/nvme0n1p2-:1234 blocked for more than 122 seconds.",
                      "      Not tainted 5.15.0 #1", "task:jbd2 state:D stack:0 pid:1234",
                      *TRACE, " __schedule+0x23d/0x590", " schedule+0x4e/0xc0",
                      " io_schedule+0x46/0x70", " bit_wait_io+0x11/0x60",
                      " __wait_on_bit+0x33/0xa0", " out_of_line_wait_on_bit+0x8d/0xb0",
                      " jbd2_journal_commit_transaction+0x16bb/0x1ad0",
                      " kjournald2+0xab/0x270", " kthread+0x127/0x150"),
     "hung-task", "jbd2_journal_commit_transaction",
     "INFO: task hung in jbd2_journal_commit_transaction"),
    ("rcu stall", log("rcu: INFO: rcu_sched self-detected stall on CPU",
                      "rcu: \t3-....: (21000 ticks this GP) idle=b2e/1/0x4000000000000002",
                      "NMI backtrace for cpu 3", *TRACE[:1], " <IRQ>",
                      " dump_stack_lvl+0x4a/0x63", " nmi_cpu_backtrace.cold+0x32/0x68",
                      " rcu_dump_cpu_stacks+0xa2/0xd0", " rcu_sched_clock_irq.cold+0x1ff/0x3d9",
                      " update_process_times+0x8c/0xc0", " tick_sched_timer+0x6f/0x80",
                      " __hrtimer_run_queues+0x105/0x280", " hrtimer_interrupt+0x101/0x220",
                      " __sysvec_apic_timer_interrupt+0x5c/0xe0",
                      " sysvec_apic_timer_interrupt+0x6d/0x90", " </IRQ>",
                      " asm_sysvec_apic_timer_interrupt+0x12/0x20",
                      "RIP: 0010:fib6_walk_continue+0x9a/0x1c0", " fib6_walk+0x3c/0x70",
                      " fib6_clean_tree+0x6a/0x90", " inet6_rtm_newroute+0x7a/0xa0",
                      " rtnetlink_rcv_msg+0x13c/0x380", " netlink_rcv_skb+0x4e/0xf0",
                      *TAIL),
     "rcu-stall", "inet6_rtm_newroute", "INFO: rcu detected stall in inet6_rtm_newroute"),
    ("kasan", log("BUG: KASAN: slab-use-after-free in tipc_conn_close+0x1c/0x50",
                  "Read of size 8 at addr ffff88801c9e1f18 by task kworker/u4:3/51",
                  *TRACE, " dump_stack_lvl+0xd9/0x150", " print_report+0xc1/0x5e0",
                  " kasan_report+0xbe/0xf0", " tipc_conn_close+0x1c/0x50", *TAIL),
     "kasan", "tipc_conn_close", "KASAN: slab-use-after-free Read in tipc_conn_close"),
    ("kasan in memcpy", log("BUG: KASAN: slab-out-of-bounds in memcpy+0x1d/0x60",
                            "Write of size 32 at addr ffff8880 by task syz/1", *TRACE,
                            " kasan_report+0xbe/0xf0", " memcpy+0x1d/0x60",
                            " hci_sock_setsockopt+0x2b1/0x5f0", *TAIL),
     "kasan", "hci_sock_setsockopt", "KASAN: slab-out-of-bounds Write in hci_sock_setsockopt"),
    ("kmsan", log("BUG: KMSAN: uninit-value in ppp_send_frame+0x28d/0x27f0", *TRACE,
                  " ppp_send_frame+0x28d/0x27f0", " ppp_xmit_process+0x23b/0x3b0", *TAIL),
     "kmsan", "ppp_send_frame", "KMSAN: uninit-value in ppp_send_frame"),
    ("kcsan", log("BUG: KCSAN: data-race in find_next_bit / rcu_report_exp_cpu_mult", "",
                  "read to 0xffffffff85a7f140 of 8 bytes by task 1082 on cpu 7:",
                  " find_next_bit+0x57/0xe0"),
     "kcsan", "find_next_bit", "KCSAN: data-race in find_next_bit"),
    ("ubsan", log("UBSAN: shift-out-of-bounds in net/sched/sch_taprio.c:1012:12",
                  "shift exponent 66 is too large", *TRACE, " dump_stack_lvl+0xd9/0x150",
                  " ubsan_epilogue+0xb/0x50", " __ubsan_handle_shift_out_of_bounds+0xfa/0x180",
                  " taprio_change+0x2fd/0x1120", *TAIL),
     "ubsan", "taprio_change", "UBSAN: shift-out-of-bounds in taprio_change"),
    ("kfence", log("BUG: KFENCE: out-of-bounds write in mlx5_cmd_exec+0x1d/0x60 [mlx5_core]",
                   "", "Out-of-bounds write at 0xffff8c2aae2b2fff (1B right of kfence-#21):",
                   " mlx5_cmd_exec+0x1d/0x60 [mlx5_core]"),
     "kfence", "mlx5_cmd_exec", "KFENCE: out-of-bounds write in mlx5_cmd_exec"),
    ("lockdep", log("======================================================",
                    "WARNING: possible circular locking dependency detected",
                    "6.1.0 #1 Not tainted",
                    "------------------------------------------------------",
                    "kworker/3:2/1234 is trying to acquire lock:",
                    "ffff888012a4c0b8 (&dev->mutex){+.+.}-{3:3}, at: "
                    "mlx5_unload_one+0x2a/0x80 [mlx5_core]", "",
                    "but task is already holding lock:",
                    "ffffffff8d3b5d28 (rtnl_mutex){+.+.}-{3:3}, at: rtnl_lock+0x17/0x20"),
     "lockdep", "mlx5_unload_one", "possible deadlock in mlx5_unload_one"),
    ("double fault", log("PANIC: double fault, error_code: 0x0",
                         "CPU: 0 PID: 3 Comm: ksoftirqd/0",
                         "RIP: 0010:__schedule_bug+0x0/0x60", "RIP: 0010:bpf_prog_run+0x1a/0x30"),
     "double-fault", "bpf_prog_run", "PANIC: double fault in bpf_prog_run"),
    ("stack guard", log("BUG: TASK stack guard page was hit at ffffc9000e4aff58 (stack is "
                        "ffffc9000e4b0000..ffffc9000e4b8000)",
                        "stack guard page: 0000 [#1] PREEMPT SMP",
                        "RIP: 0010:mark_lock+0x23/0x17b0", *TRACE, " __lock_acquire+0x1/0x2",
                        " bond_get_stats+0x1/0x2 [bonding]", " dev_get_stats+0x1/0x2",
                        " bond_get_stats+0x1/0x2 [bonding]", " rtnl_fill_ifinfo+0x1/0x2",
                        " rtnl_newlink+0x64/0xa0", " rtnetlink_rcv_msg+0x413/0xb80", *TAIL),
     "stack-guard", "rtnl_newlink", "BUG: stack guard page was hit in rtnl_newlink"),
    ("list corruption", log("list_del corruption. prev->next should be ffff8880, but was "
                            "dead000000000100. (prev=ffff8881)",
                            "------------[ cut here ]------------",
                            "kernel BUG at lib/list_debug.c:62!",
                            "RIP: 0010:__list_del_entry_valid_or_report+0xd0/0x110", *TRACE,
                            " nf_tables_abort+0x1a/0x2000 [nf_tables]", *TAIL),
     "list-corruption", "nf_tables_abort", "BUG: corrupted list in nf_tables_abort"),
    ("bad page state", log("BUG: Bad page state in process kswapd0  pfn:7deea",
                           "page dumped because: nonzero mapcount", *TRACE,
                           " dump_stack_lvl+0x4a/0x63", " bad_page+0xd1/0x110",
                           " free_unref_page_prepare+0x1e2/0x350", " free_unref_page+0x1a/0x100",
                           " zs_page_migrate+0x1d0/0x300", *TAIL),
     "bad-page-state", "zs_page_migrate", "BUG: Bad page state in zs_page_migrate"),
    ("memory leak", log("BUG: memory leak",
                        "unreferenced object 0xffff88810b6f8a00 (size 64):",
                        "  backtrace:", "    [<00000000dd93>] kmalloc_trace+0x25/0x90",
                        "    [<0000000062f0>] mlx5_fs_add_rule+0x3e/0x90 [mlx5_core]"),
     "memory-leak", "mlx5_fs_add_rule", "memory leak in mlx5_fs_add_rule [mlx5_core]"),
    ("bare panic", log("Kernel panic - not syncing: VFS: Unable to mount root fs on "
                       "unknown-block(259,2)", "CPU: 0 PID: 1 Comm: swapper/0"),
     "panic", None, "Kernel panic - not syncing: VFS: Unable to mount root fs on "
     "unknown-block(N,N)"),
    ("oom panic", log("Kernel panic - not syncing: Out of memory and no killable processes..."),
     "oom-panic", None, "Kernel panic - not syncing: Out of memory and no killable processes"),
    ("sleep in atomic", log("BUG: sleeping function called from invalid context at "
                            "kernel/locking/mutex.c:580", "in_atomic(): 1, irqs_disabled(): 0",
                            *TRACE, " dump_stack_lvl+0x4a/0x63", " __might_resched+0x145/0x200",
                            " mutex_lock+0x1a/0x40", " nvme_tcp_queue_rq+0x1d/0x3a0 [nvme_tcp]",
                            *TAIL),
     "sleep-in-atomic", "nvme_tcp_queue_rq", "invalid context in nvme_tcp_queue_rq"),
    ("hard lockup", log("watchdog: Watchdog detected hard LOCKUP on cpu 5",
                        "RIP: 0010:native_queued_spin_lock_slowpath+0x5d/0x1d0", *TRACE[:1],
                        " <IRQ>", " _raw_spin_lock_irqsave+0x3d/0x50",
                        " bnxt_msix+0x1a/0x80 [bnxt_en]", " </IRQ>"),
     "hard-lockup", "bnxt_msix", "hard LOCKUP in bnxt_msix [bnxt_en]"),
]


@pytest.mark.parametrize(("text", "kind", "function", "title"), [k[1:] for k in KINDS],
                         ids=[k[0] for k in KINDS])
def test_every_kind_is_classified_with_its_guilty_frame(text, kind, function, title) -> None:
    signature = analyse_console_log(text)
    assert signature is not None
    assert (signature.kind, signature.function) == (kind, function)
    assert title in signature.title
    assert signature.algorithm_version == ALGORITHM_VERSION
    assert len(signature.fingerprint) == 32


def test_kinds_of_one_function_get_different_fingerprints() -> None:
    fingerprints = {analyse_console_log(k[1]).fingerprint for k in KINDS}
    assert len(fingerprints) == len(KINDS)


# (fixture, kind, function, module, title, labels): production-style kernels
FIXTURE_CASES = [
    ("mce_broadcast_timeout", "machine-check", None, None,
     "Machine check: internal-timer error (uncorrected)", ["hardware-error"]),
    ("mce_memory_uncorrected", "machine-check", None, None,
     "Machine check: memory-controller error (uncorrected)", ["hardware-error"]),
    ("edac_uncorrected_dimm", "edac", None, None, "EDAC: uncorrected memory read error",
     ["hardware-error"]),
    ("aer_fatal_mlx5", "pcie-aer", None, "mlx5_core",
     "PCIe AER: uncorrected (fatal) Transaction Layer MalfTLP on [15b3:101d] [mlx5_core]",
     ["hardware-error"]),
    ("nmi_hard_lockup_mlx5", "hard-lockup", "mlx5_eq_comp_int", "mlx5_core",
     "watchdog: hard LOCKUP in mlx5_eq_comp_int [mlx5_core]", []),
    ("oom_panic", "oom-panic", None, None,
     "Kernel panic - not syncing: Out of memory: system-wide panic_on_oom is enabled", []),
    ("mlx5_null_deref_interleaved", "null-deref", "mlx5e_poll_rx_cq", "mlx5_core",
     "BUG: kernel NULL pointer dereference in mlx5e_poll_rx_cq [mlx5_core]", []),
    ("nvidia_gpf", "gpf", "_nv044315rm", "nvidia", "general protection fault in _nv044315rm "
     "[nvidia]", []),
]


@pytest.mark.parametrize(("name", "kind", "function", "module", "title", "labels"), FIXTURE_CASES,
                         ids=[c[0] for c in FIXTURE_CASES])
def test_production_fixtures(name, kind, function, module, title, labels) -> None:
    signature = analyse_console_log((FIXTURES / f"{name}.log").read_text())
    assert signature is not None
    assert (signature.kind, signature.function, signature.module) == (kind, function, module)
    assert signature.title == title
    assert signature.labels == labels


def test_machine_checks_fingerprint_by_error_class_not_by_interrupted_code() -> None:
    text = (FIXTURES / "mce_memory_uncorrected.log").read_text()
    elsewhere = text.replace("mlx5e_napi_poll+0x93/0x7c0 [mlx5_core]", "native_safe_halt+0x7/0x10")
    other_cpu = elsewhere.replace("CPU 40", "CPU 3").replace("SOCKET 1", "SOCKET 0")
    assert analyse_console_log(other_cpu).fingerprint == analyse_console_log(text).fingerprint
    timer = text.replace("be00000000800090", "be00000000800400")
    assert analyse_console_log(timer).fingerprint != analyse_console_log(text).fingerprint


def test_a_log_without_a_crash_has_no_signature() -> None:
    boot = log("Linux version 5.15.0-1045-nvidia (buildd@lcy02) #45-Ubuntu SMP",
               "Spectre V2 : WARNING: Unprivileged eBPF is enabled with eIBRS on",
               "EDAC MC: Ver: 3.0.0", "pcieport 0000:00:01.0: AER: enabled with IRQ 24",
               "INFO: lockdep is turned off.", "VFS: Mounted root (ext4 filesystem) readonly.")
    assert analyse_console_log(boot) is None
    assert analyse_console_log("") is None
    assert analyse_report(None, None) is None


def test_the_first_oops_is_the_crash() -> None:
    first = KINDS[4][1]  # gpf in tcf_exts_destroy
    second = KINDS[0][1]
    both = analyse_console_log(first + second)
    assert both.fingerprint == analyse_console_log(first).fingerprint


def test_a_following_panic_line_is_part_of_the_report_not_a_new_crash() -> None:
    warning = KINDS[6][1]
    panicked = warning + log("Kernel panic - not syncing: panic_on_warn set ...", start=200)
    assert analyse_console_log(panicked).fingerprint == analyse_console_log(warning).fingerprint


def test_weak_symptoms_only_count_when_nothing_else_crashed() -> None:
    corrected = log("EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (x)")
    assert analyse_console_log(corrected).kind == "edac"
    crash = corrected + KINDS[0][1]
    assert analyse_console_log(crash).kind == "null-deref"


def test_both_timestamp_forms_and_syslog_prefixes_give_one_fingerprint() -> None:
    lines = ("general protection fault: 0000 [#1] SMP", "RIP: 0010:bond_xmit+0x1a/0x90 [bonding]",
             *TRACE, " dev_hard_start_xmit+0x8f/0x1f0", *TAIL)
    plain = log(*lines)
    caller = log(*lines, ctx="T4411")
    syslog = "".join(f"Nov 29 12:00:01 gpu-a017 kernel: {line}\n" for line in lines)
    bare = "".join(f"{line}\n" for line in lines)
    fingerprints = {analyse_console_log(text).fingerprint for text in (plain, caller, syslog, bare)}
    assert len(fingerprints) == 1
    assert analyse_console_log(plain).function == "bond_xmit"


def test_interleaved_lines_of_other_tasks_are_ignored() -> None:
    ours = ("general protection fault: 0000 [#1] SMP", "RIP: 0010:bond_xmit+0x1a/0x90 [bonding]",
            *TRACE, " dev_hard_start_xmit+0x8f/0x1f0", *TAIL)
    noise = (" mlx5e_xmit+0x1/0x2 [mlx5_core]", "RIP: 0010:other_function+0x1/0x2")
    mixed = ""
    for i, line in enumerate(ours):
        mixed += f"[  10.{i:06d}][ T100] {line}\n"
        mixed += f"[  10.{i:06d}][ T200] {noise[i % 2]}\n"
    signature = analyse_console_log(mixed)
    assert signature.function == "bond_xmit"
    assert signature.fingerprint == analyse_console_log(log(*ours)).fingerprint


def test_unreliable_frames_and_clone_suffixes() -> None:
    text = log("kernel BUG at net/core/skbuff.c:110!", "invalid opcode: 0000 [#1] SMP", *TRACE,
               " ? die+0x1/0x2", " ? xfrm_output_resume+0x1/0x2",
               " skb_panic.cold.12+0x1/0x2", " skb_put.cold+0x1/0x2",
               " xfrm_output_resume.isra.0.cold.83+0x1a/0x90", *TAIL)
    signature = analyse_console_log(text)
    assert signature.function == "xfrm_output_resume"
    constprop = text.replace("xfrm_output_resume.isra.0.cold.83", "xfrm_output_resume.constprop.7")
    assert analyse_console_log(constprop).fingerprint == signature.fingerprint


def test_truncated_report_still_gets_a_signature() -> None:
    text = log("BUG: unable to handle page fault for address: ffffc90000a3f000",
               "#PF: supervisor write access in kernel mode")
    signature = analyse_console_log(text)
    assert signature.kind == "paging-request"
    assert signature.function is None


def test_module_is_kept_and_separates_drivers() -> None:
    base = KINDS[0][1].replace("ext4_xattr_get+0x5d/0x2a0", "ring_poll+0x5d/0x2a0 [drv_a]")
    other = base.replace("[drv_a]", "[drv_b]")
    a, b = analyse_console_log(base), analyse_console_log(other)
    assert (a.module, b.module) == ("drv_a", "drv_b")
    assert a.fingerprint != b.fingerprint


def test_normalisation_of_volatile_values() -> None:
    """Addresses, offsets, pids, cpus, task names and hex values do not reach the fingerprint."""
    one = log("BUG: using smp_processor_id() in preemptible [00000000] code: syz-executor.3/11203",
              "caller is debug_smp_processor_id+0x1c/0x20", "CPU: 1 PID: 11203 Comm: x",
              "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b")
    two = (one.replace("[00000000]", "[8000f01a]").replace("executor.3/11203", "executor.7/42")
           .replace("CPU: 1 PID: 11203", "CPU: 31 PID: 42").replace("0x1c/0x20", "0x2c/0x40")
           .replace("0x0000000b", "0x00000009"))
    assert analyse_console_log(one).fingerprint == analyse_console_log(two).fingerprint
    panic_one = log("Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b")
    panic_two = log("Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009",
                    start=999)
    assert analyse_console_log(panic_one).fingerprint == analyse_console_log(panic_two).fingerprint
    assert analyse_console_log(panic_one).title.endswith("exitcode=X")


def test_console_log_wins_over_stack_in_a_report() -> None:
    stack = {"signal": "SIGSEGV", "frames": [{"function": "main", "module": "a.out"}]}
    assert analyse_report(KINDS[0][1], stack).kind == "null-deref"
    assert analyse_report("no crash here\n", stack).kind == "userspace"
    assert analyse_report(None, stack).kind == "userspace"


def test_as_dict_has_every_field() -> None:
    fields = analyse_console_log(KINDS[0][1]).as_dict()
    assert set(fields) == {"fingerprint", "title", "kind", "function", "module", "frames",
                           "labels", "algorithm_version", "explanation"}


def test_newer_kernels_wording_of_hardware_errors_gives_the_same_signature() -> None:
    old = log("pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0",
              "mlx5_core 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
              "type=Transaction Layer, (Requester ID)",
              "mlx5_core 0000:3b:00.0:   device [15b3:101d] error status/mask=00004000/00000000",
              "mlx5_core 0000:3b:00.0:    [14] CmpltTO                (First)")
    new = (old.replace("Uncorrected (Fatal) error received:", "Uncorrectable (Fatal) error message"
                       " received from")
           .replace("severity=Uncorrected", "severity=Uncorrectable"))
    assert analyse_console_log(old).fingerprint == analyse_console_log(new).fingerprint
    assert "CmpltTO on [15b3:101d]" in analyse_console_log(new).title
    local = log("Kernel panic - not syncing: Fatal local machine check")
    assert analyse_console_log(local).kind == "machine-check"
    opcode = log("Oops: invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", "RIP: 0010:ring_poll+0x1/0x2")
    assert (analyse_console_log(opcode).kind, analyse_console_log(opcode).function) == (
        "invalid-opcode", "ring_poll")


def test_bug_sites_without_a_stack_stay_apart_and_name_their_file() -> None:
    slub = analyse_console_log("[  7.2] kernel BUG at mm/slub.c:321!\n")
    xfs = analyse_console_log("[  9.9] kernel BUG at fs/xfs/xfs_inode.c:88!\n")
    assert slub is not None and xfs is not None
    assert slub.fingerprint != xfs.fingerprint
    assert (slub.title, xfs.title) == ("kernel BUG at mm/slub.c", "kernel BUG at fs/xfs/xfs_inode.c")
    moved = analyse_console_log("[  1.0] kernel BUG at mm/slub.c:330!\n")  # same site, other line
    assert moved is not None and moved.fingerprint == slub.fingerprint
