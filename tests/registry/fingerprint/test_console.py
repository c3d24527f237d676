"""Kernel console logs: behaviour around the golden cases (tests/support/data/golden/, checked
by test_golden.py): what stays out of the identity, which crash in a log is the crash."""

from __future__ import annotations

from registry.fingerprint import analyse_console_log, analyse_report
from registry.fingerprint.console import _PREFIX, strip_prefix
from registry.fingerprint.patterns import TRANSPORT_PREFIXES
from tests.support.golden import TAIL, TRACE, golden, log


def test_machine_checks_fingerprint_by_error_class_not_by_interrupted_code() -> None:
    text = golden("production/mce-memory-uncorrected")
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
    first = golden("kinds/gpf")
    second = golden("kinds/null-deref")
    both = analyse_console_log(first + second)
    assert both.fingerprint == analyse_console_log(first).fingerprint


def test_a_following_panic_line_is_part_of_the_report_not_a_new_crash() -> None:
    warning = golden("kinds/warning")
    panicked = warning + log("Kernel panic - not syncing: panic_on_warn set ...", start=200)
    assert analyse_console_log(panicked).fingerprint == analyse_console_log(warning).fingerprint


def test_weak_symptoms_only_count_when_nothing_else_crashed() -> None:
    corrected = log("EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (x)")
    assert analyse_console_log(corrected).kind == "edac"
    crash = corrected + golden("kinds/null-deref")
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
    base = golden("kinds/null-deref").replace("ext4_xattr_get+0x5d/0x2a0", "ring_poll+0x5d/0x2a0 [drv_a]")
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
    assert analyse_report(golden("kinds/null-deref"), stack).kind == "null-deref"
    assert analyse_report("no crash here\n", stack).kind == "userspace"
    assert analyse_report(None, stack).kind == "userspace"


def test_as_dict_has_every_field() -> None:
    fields = analyse_console_log(golden("kinds/null-deref")).as_dict()
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


def test_user_access_helpers_are_skipped_but_a_drivers_own_get_user_is_not() -> None:
    """get_user()/put_user() frames (__get_user_4, __put_user_nocheck_8) report their caller;
    drivers/net/tun.c's tun_get_user is code of its own, and the guilty function."""
    def guilty(*frames: str) -> str | None:
        text = log("BUG: kernel NULL pointer dereference, address: 0000000000000008",
                   "#PF: supervisor read access in kernel mode", "Oops: 0000 [#1] SMP", *TRACE,
                   *frames, *TAIL)
        return analyse_console_log(text).function

    assert guilty(" __get_user_4+0x1/0x2", " tun_chr_write_iter+0x1/0x2") == "tun_chr_write_iter"
    assert guilty(" __put_user_nocheck_8+0x1/0x2", " sock_ioctl+0x1/0x2") == "sock_ioctl"
    assert guilty(" tun_get_user+0x2ec2/0x4150", " tun_chr_write_iter+0x1/0x2") == "tun_get_user"
    assert guilty(" tun_put_user+0x1/0x2", " tun_do_read+0x1/0x2") == "tun_put_user"


def test_a_hung_task_in_a_sleeping_primitive_is_named_after_its_caller() -> None:
    """msleep, ssleep (msleep inline), usleep_range_state, schedule_timeout and the wait_for_*
    family name no bug: the code that chose to wait does (kernel/time/sleep_timeout.c,
    include/linux/delay.h, kernel/sched/completion.c)."""
    def hung(*frames: str) -> str | None:
        text = log("INFO: task kworker/u8:2:91 blocked for more than 122 seconds.",
                   "task:kworker/u8:2 state:D stack:0 pid:91 ppid:2 flags:0x00004000", *TRACE,
                   " __schedule+0x27c/0x6b0", " schedule+0x33/0x110", *frames,
                   " drv_fw_poll+0x1/0x2 [drv]", " process_one_work+0x228/0x3d0",
                   " worker_thread+0x53/0x420", " kthread+0x127/0x150", " ret_from_fork+0x1f/0x30",
                   " </TASK>")
        return analyse_console_log(text).function

    for frames in ([" schedule_timeout+0x87/0x140", " msleep+0x2d/0x40"],
                   [" schedule_timeout+0x87/0x140", " msleep_interruptible+0x2d/0x40"],
                   [" schedule_hrtimeout_range_clock+0xa3/0x120", " usleep_range_state+0x65/0x90"],
                   [" schedule_timeout+0x87/0x140", " wait_for_completion_timeout+0x7d/0x130"],
                   [" io_schedule_timeout+0x19/0x40"]):
        assert hung(*frames) == "drv_fw_poll", frames


def test_lockdep_never_blames_its_irq_tracing_hooks_or_the_stack_printer() -> None:
    """trace_hardirqs_on/off call into lockdep on behalf of whoever toggled interrupts; an old
    kernel's bracketed call trace is not lockdep's print_ip_sym line, so `dump_stack` there is
    not the frame the report names."""
    irqs_on = analyse_console_log(golden("kinds/lockdep-inconsistent-irqs-on"))
    assert irqs_on.function == "nvfoo_ring_reset"
    decisions = {f["function"]: (f["decision"], f["rule"]) for f in irqs_on.explanation["frames"]}
    assert decisions["trace_hardirqs_on"] == ("skipped", "sanitizer")
    assert decisions["dump_stack_lvl"] == ("skipped", "reporting")
    old = analyse_console_log(golden("kinds/lockdep-still-held-old-kernel"))
    assert (old.function, old.explanation["section"]) == ("pipe_lock", "at:")
    off = golden("kinds/lockdep-inconsistent-irqs-on").replace("trace_hardirqs_on+",
                                                               "trace_hardirqs_off_caller+")
    assert analyse_console_log(off).function == "nvfoo_ring_reset"


# One line per row of the prefix tables, as each transport prints it: (line, timestamped).
PREFIXED = {
    "syslog": ("<4>Dec  1 10:00:00 gpu-a017 kernel: BUG: x", False),
    "journal-full": ("Tue 2026-12-01 10:00:00 UTC gpu-a017 kernel: BUG: x", False),
    "syslog-iso": ("2026-12-01T10:00:00.123456+00:00 gpu-a017 kernel: BUG: x", False),
    "journal-unix": ("1764583200.123456 gpu-a017 kernel: BUG: x", False),
    "journal-monotonic": ("[  123.456789] gpu-a017 kernel: BUG: x", False),
    "rfc5424": ('<4>1 2026-12-01T10:00:00.1Z gpu-a017 kernel - - [timeQuality tzKnown="1"] BUG: x',
                False),
    "dmesg-decode": ("kern  :warn  : [  123.456789] BUG: x", True),
}


def test_every_transport_prefix_is_taken_off_and_the_kernels_own_timestamp_kept() -> None:
    assert set(PREFIXED) == {name for name, _ in TRANSPORT_PREFIXES}
    for name, (line, timed) in PREFIXED.items():
        assert strip_prefix(line) == ("BUG: x", None), name
        assert (_PREFIX.match(line).group("ts") is not None) == timed, name
    for stamp in ("[  123.456789]", "[Tue Dec  1 10:00:00 2026]", "2026-12-01T10:00:00,123456+00:00"):
        assert _PREFIX.match(f"{stamp} [  T412] BUG: x").group("ts", "ctx") == (stamp, "T412")
        assert strip_prefix(f"Dec 01 10:00:00 gpu-a017 kernel: {stamp}[  C3] BUG: x") == ("BUG: x", "C3")
    assert strip_prefix("** 7 printk messages dropped ** [  1.000000] BUG: x") == ("BUG: x", None)


def test_a_line_cut_by_a_console_takeover_is_read_once_from_its_replay() -> None:
    """kernel/printk/nbcon.c: the cut line, the marker, the whole line again. A header cut
    short must not become a crash of its own."""
    lines = ("BUG: kernel NULL pointer dereference, address: 0000000000000008",
             "#PF: supervisor read access in kernel mode", "Oops: 0000 [#1] SMP",
             "RIP: 0010:ring_poll+0x1a/0x90 [drv]", *TRACE, " napi_poll+0x1/0x2", *TAIL)
    clean = log(*lines, ctx="C3")
    cut = clean.replace("[  100.000000][    C3] BUG: kernel NULL pointer dereference",
                        "[  100.000000][    C3] BUG: kernel NULL pointer de\n"
                        "** replaying previous printk message **\n"
                        "[  100.000000][    C3] BUG: kernel NULL pointer dereference")
    cut = cut.replace("[  100.003000][    C3] RIP: 0010:ring_poll+0x1a/0x90 [drv]",
                      "[  100.003000][    \n** replaying previous printk message **\n"
                      "[  100.003000][    C3] RIP: 0010:ring_poll+0x1a/0x90 [drv]")
    assert cut.count("replaying") == 2
    read = analyse_console_log(cut)
    assert (read.fingerprint, read.title) == (analyse_console_log(clean).fingerprint,
                                              "BUG: kernel NULL pointer dereference in ring_poll [drv]")
