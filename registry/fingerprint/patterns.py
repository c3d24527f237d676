"""The crash-report vocabulary as data: oops headers, frame skip lists, hardware classes.

Everything the console parser and the userspace labeller know about crashes lives here, so a
new kind of crash is a new table row, not a new branch. Regexes are matched against one line
that is already length-capped; they avoid nested quantifiers and use possessive ones where a
run could otherwise be re-scanned, so a hostile line cannot make them backtrack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Bump whenever a change here or in the parser can move a crash to a different fingerprint.
ALGORITHM_VERSION = 18

# How a pattern ranks when several appear in one log.
STRONG = 0  # a crash; the first one in the log is the crash
CONTINUATION = 1  # follow-up of another report (panic line, "Oops:"); a crash only if alone
WEAK = 2  # a symptom (corrected hardware errors, GPU Xid); the crash only when nothing else is


# --- where a report prints its culprit: a small program per row ----------------------------
#
# A row's `guilty` is a tuple of alternatives tried in turn until one names a frame; each
# alternative is the Reads of the report's parts in the order the kernel prints them
# ((RIP, TRACE): the faulting PC, then the call trace). The frames read are filtered by the skip
# classes and handed to the row's extractor (syzkaller's stackFmt parts, as named fields).
READ_PARTS: dict[str, str] = {
    "header": "the function the header line names (sanitizers print the faulting function there)",
    "rip": "the first PC line (RIP:, pc :, epc :, NIP, PC is at); the alternative fails without one",
    "trace": "the next call-trace marker (Call Trace:, Call trace:, backtrace:), then its frames",
    "frames": "frames from here to the end of this stack (the next stack marker)",
    "at": 'the next lockdep "..., at: func+0x" line',
    "pc": 'the next "[<address>] func+0x" line (lockdep\'s print_ip_sym)',
    "find": "move past the next line holding one of `texts`",
}


@dataclass(frozen=True)
class Read:
    """One part of a report the culprit's frames are read from (READ_PARTS says which)."""

    part: str
    texts: tuple[str, ...] = ()  # find: the texts, any of which ends the search
    named: bool = False  # the report names this frame itself: only NAMED_SKIP_CLASSES apply

    def __post_init__(self) -> None:
        if self.part not in READ_PARTS or (self.part == "find") != bool(self.texts):
            raise ValueError(f"bad guilty-frame part {self!r}")


HEADER, RIP, TRACE, FRAMES, AT, PC = (Read(part) for part in ("header", "rip", "trace", "frames",
                                                             "at", "pc"))
Program = tuple[tuple[Read, ...], ...]


def find(*texts: str) -> Read:
    """Move past the next line holding one of texts."""
    return Read("find", texts)


def named(read: Read) -> Read:
    """The same part, naming the frame itself (a lockdep acquisition site)."""
    return replace(read, named=True)


@dataclass(frozen=True)
class Oops:
    """One kind of kernel crash report and how to read it."""

    name: str  # stable rule name, shown in explanations as `kind_rule`
    kind: str  # stable slug, part of the fingerprint
    needle: str  # literal that must occur in the header line (fast prefilter)
    header: str  # regex searched in the stripped header line; named groups feed `title`
    title: str  # headline template over header/detail groups
    guilty: Program = ((RIP, TRACE),)  # where the culprit is printed: alternatives of Reads
    extract: str = "first"  # which read frame is guilty: first kept, or the stall/hung rules
    skip: str = ""  # this report's own helpers: a regex searched in each frame's name
    details: tuple[str, ...] = ()  # regexes searched in the report body for more title fields
    rank: int = STRONG
    by_function: bool = True  # False: the fingerprint ignores code (hardware: where the CPU was)
    classify: str = ""  # post-processor for hardware reports, see console.CLASSIFIERS
    garbled: str = ""  # a header that is itself a fragment: the damage flag it implies


_FUNC = r"(?P<func>[A-Za-z_][\w.$]*+)"
_SRC = r"(?P<file>/?+(?:[\w.-]++/)*+[\w-]++\.[chS])\b"
# __warn() prints the trapping PC's registers, then the trace
_WARN = ((RIP, TRACE), (HEADER, TRACE))
_LOCK_WORK = "process_one_work|flush_workqueue|drain_workqueue|destroy_workqueue"

# Literals the log is scanned for; every row's needle contains one of them. Few and distinct,
# because each costs one pass over the log.
TRIGGERS: tuple[str, ...] = (
    "BUG", "WARNING:", "INFO:", "UBSAN:", "general protection", "Unhandled fault",
    "nable to handle", "divide", "Internal error", "stack segment", "Alignment trap",
    "invalid opcode", "Oops", "LOCKUP", "panic", "PANIC", "Hardware Error", "EDAC", "AER:",
    "NETDEV", "Xid", "VFS:", "unregister_netdevice", "SYZF",
)

# Ordered: the first row whose needle and header match a line wins for that line. Each row
# cites the kernel code that prints its header and decides where the culprit's frames are.
OOPSES: tuple[Oops, ...] = (
    # --- sanitizers: the report names the faulting function, then prints the access stack,
    # then "Allocated by task"/"Freed by task" stacks that are not the bug -----------------
    # mm/kasan/report.c print_report(): "BUG: KASAN: double-free in kfree+0x..": the freeing caller
    Oops("kasan-invalid-free", "kasan", "KASAN:", r"BUG: KASAN: (?:double-free or invalid-free|"
         r"double-free|invalid-free)(?: in " + _FUNC + ")?", "KASAN: invalid-free",
         guilty=((HEADER, TRACE),), skip="slab_|kfree|vunmap|vfree"),
    # mm/kasan/report.c: "BUG: KASAN: use-after-free in f+0x..", "Read of size N at addr"
    Oops("kasan-access", "kasan", "KASAN:", r"BUG: KASAN: (?P<bug>[\w-]++)(?: in " + _FUNC + ")?",
         "KASAN: {bug} {access}", guilty=((HEADER, TRACE),),
         details=(r"\b(?P<access>Read|Write) (?:of size|at addr)",)),
    # mm/kmsan/report.c kmsan_report(): the use's stack follows the header directly, then
    # "Uninit was stored/created at:" stacks; USB and skb helpers consume the caller's data
    Oops("kmsan-usb-infoleak", "kmsan", "KMSAN: kernel-usb-infoleak",
         r"BUG: KMSAN: (?P<bug>kernel-usb-infoleak)(?: in " + _FUNC + ")?", "KMSAN: {bug}",
         guilty=((FRAMES,), (HEADER,)), skip="alloc_skb|usb_submit_urb|usb_start_wait_urb|usb_bulk_msg"
         "|usb_interrupt_msg|usb_control_msg"),
    Oops("kmsan", "kmsan", "KMSAN:", r"BUG: KMSAN: (?P<bug>[\w-]++)(?: in " + _FUNC + ")?",
         "KMSAN: {bug}", guilty=((FRAMES,), (HEADER,)),
         skip=r"alloc_skb|netlink_ack|netlink_rcv_skb|_encrypt$|^(?:crypto|cipher|drbg|rng)_"),
    # kernel/kcsan/report.c: "BUG: KCSAN: data-race in f1 / f2": both racing functions named
    Oops("kcsan", "kcsan", "KCSAN:", r"BUG: KCSAN: (?P<bug>[\w-]++(?:: [\w-]++)?) in " + _FUNC,
         "KCSAN: {bug}", guilty=((HEADER,),)),
    # mm/kfence/report.c kfence_report_error(): "BUG: KFENCE: use-after-free read in f+0x.."
    # then the access stack directly
    Oops("kfence", "kfence", "KFENCE:", r"BUG: KFENCE: (?P<bug>[\w -]+?) in " + _FUNC,
         "KFENCE: {bug}", guilty=((HEADER, FRAMES),)),
    # lib/ubsan.c ubsan_prologue(): "UBSAN: shift-out-of-bounds in file:line" then dump_stack
    Oops("ubsan", "ubsan", "UBSAN:", r"UBSAN: (?P<bug>[\w -]+?) in ", "UBSAN: {bug}",
         guilty=((TRACE,),), skip="ubsan|overflow"),
    # --- faults: the faulting PC, then the trace (arch/x86/mm/fault.c, arch/arm64/mm/fault.c
    # die_kernel_fault(), arch/riscv/mm/fault.c, arch/x86/kernel/traps.c) ----------------
    Oops("null-deref", "null-deref", "NULL pointer dereference",
         r"(?:BUG: |Unable to handle kernel |unable to handle kernel )"
         r"(?:unable to handle kernel |kernel |Kernel )?NULL pointer dereference",
         "BUG: kernel NULL pointer dereference", guilty=((RIP, TRACE), (TRACE,))),
    Oops("paging-request", "paging-request", "nable to handle ",
         r"(?:BUG: )?[Uu]nable to handle (?:kernel paging request|page fault for address"
         r"|kernel access to user memory|kernel data access|kernel execute|kernel write to read-only)",
         "BUG: unable to handle kernel paging request", guilty=((RIP, TRACE), (TRACE,))),
    # the second half of the header went out in another printk() and was lost
    Oops("paging-request-split", "paging-request", "BUG: unable to handle kernel",
         r"BUG: unable to handle kernel\s*+$", "BUG: unable to handle kernel",
         guilty=((RIP, TRACE), (TRACE,)), garbled="corrupted"),
    Oops("paging-request-old", "paging-request", "BUG: unable to handle kernel",
         r"BUG: unable to handle kernel", "BUG: unable to handle kernel paging request",
         guilty=((RIP, TRACE), (TRACE,))),
    # arch/x86/kernel/traps.c: "general protection fault, probably for non-canonical address"
    Oops("gpf", "gpf", "general protection fault", r"general protection fault",
         "general protection fault", guilty=((RIP, TRACE), (TRACE,))),
    Oops("stack-segment", "stack-segment", "stack segment: ", r"stack segment: ",
         "stack segment fault", guilty=((RIP, TRACE), (TRACE,))),
    # arch/x86/kernel/traps.c do_error_trap(): the PC is the culprit
    Oops("divide-error", "divide-error", "divide", r"divide[ _]error: ",
         "divide error", guilty=((RIP,), (TRACE,))),
    Oops("double-fault", "double-fault", "double fault", r"^PANIC: double fault",
         "PANIC: double fault", guilty=((RIP,), (TRACE,)), rank=CONTINUATION),
    # arch/x86/kernel/traps.c handle_stack_overflow(): recursion, named like a stall
    Oops("stack-guard", "stack-guard", "stack guard page",
         r"BUG: (?:TASK |IRQ )?stack guard page was hit", "BUG: stack guard page was hit",
         guilty=((RIP, TRACE), (TRACE,)), extract="stall"),
    Oops("stack-guard-panic", "stack-guard", "stack guard page", r"^stack guard page: ",
         "BUG: stack guard page was hit", guilty=((RIP, TRACE), (TRACE,)), extract="stall",
         rank=CONTINUATION),
    # arch/arm/mm/fault.c and alignment.c (32-bit arm)
    Oops("arm-unhandled-fault", "unhandled-fault", "Unhandled fault:",
         r"^Unhandled fault: (?P<what>[\w ]+?) \(", "Unhandled fault: {what}",
         guilty=((RIP, TRACE), (TRACE,))),
    Oops("arm-alignment-trap", "alignment-trap", "Alignment trap:", r"^Alignment trap:",
         "Alignment trap", guilty=((RIP, TRACE), (TRACE,))),
    # arch/arm64/kernel/traps.c die(): "Internal error: Oops - BUG: ..." after the real header
    Oops("arm-internal-error", "internal-error", "Internal error:",
         r"^Internal error: (?P<what>[^:\[]*+)", "Internal error: {what}",
         guilty=((RIP, TRACE), (TRACE,)), rank=CONTINUATION),
    Oops("invalid-opcode", "invalid-opcode", "invalid opcode:", r"invalid opcode: ",
         "invalid opcode", guilty=((RIP,), (TRACE,)), rank=CONTINUATION),
    Oops("oops", "oops", "Oops", r"^Oops(?: - [\w/ ]+)?: ", "Oops", guilty=((RIP, TRACE), (TRACE,)),
         rank=CONTINUATION),
    # --- assertions -------------------------------------------------------------------------
    # lib/list_debug.c: the list check reports for its caller (list helpers are skipped)
    Oops("list-debug-bug", "list-corruption", "list_debug.c", r"kernel BUG at lib/list_debug\.c",
         "BUG: corrupted list", guilty=((TRACE,), (RIP,))),
    Oops("list-add-corruption", "list-corruption", "list_add corruption", r"list_add corruption",
         "BUG: corrupted list", guilty=((TRACE,), (RIP,))),
    Oops("list-del-corruption", "list-corruption", "list_del corruption", r"list_del corruption",
         "BUG: corrupted list", guilty=((TRACE,), (RIP,))),
    # mm/usercopy.c usercopy_abort(): the copy's caller
    Oops("usercopy-bug", "bad-usercopy", "usercopy", r"kernel BUG at mm/usercopy\.c",
         "BUG: bad usercopy", guilty=((TRACE,), (RIP,)), skip="usercopy|__check"),
    # lib/bug.c report_bug() for BUG_ON(): the PC is the assertion; skb wrappers assert for
    # their caller (include/linux/skbuff.h)
    Oops("bug-at", "kernel-bug", "kernel BUG at ", r"kernel BUG at " + _SRC, "kernel BUG",
         skip="^skb_", guilty=((RIP, TRACE), (TRACE,))),
    Oops("bug-at-plain", "kernel-bug", "Kernel BUG", r"Kernel BUG (?:at )?", "kernel BUG",
         guilty=((RIP, TRACE), (TRACE,))),
    # kernel/panic.c __warn(): "WARNING: CPU: n PID: n at file:line func+0x", then the PC's
    # registers and the trace; the file tells which API warned on behalf of its caller
    Oops("warn-debugobjects", "warning", "WARNING:", r"WARNING: [^\n]*?lib/debugobjects\.c",
         "WARNING: ODEBUG bug", guilty=_WARN,
         skip="debug_|rcu|hrtimer_|timer_|work_|percpu_|vunmap|vfree|__free_|kobject_"),
    Oops("warn-refcount", "warning", "WARNING:", r"WARNING: [^\n]*?lib/refcount\.c",
         "WARNING: refcount bug", guilty=_WARN, skip="refcount|kobject_"),
    Oops("warn-lockdep", "warning", "WARNING:", r"WARNING: [^\n]*?kernel/locking/lockdep\.c",
         "WARNING: locking bug", guilty=_WARN, skip="lock_sock|release_sock"),
    Oops("warn-usb-submit-urb", "warning", "usb_submit_urb",
         r"WARNING: [^\n]*? usb_submit_urb", "WARNING: usb_submit_urb", guilty=_WARN,
         skip="usb_submit_urb|usb_start_wait_urb|usb_bulk_msg|usb_interrupt_msg|usb_control_msg"),
    Oops("warn-kobject", "warning", "WARNING:", r"WARNING: [^\n]*?lib/kobject\.c",
         "WARNING: kobject bug", guilty=_WARN, skip="kobject_"),
    Oops("warn-proc-generic", "warning", "WARNING:", r"WARNING: [^\n]*?fs/proc/generic\.c",
         "WARNING: proc registration bug", guilty=_WARN, skip="proc_"),
    Oops("warn-usercopy", "warning", "WARNING:", r"WARNING: [^\n]*?mm/usercopy\.c",
         "WARNING: bad usercopy", guilty=_WARN, skip="usercopy|__check"),
    Oops("warn-zero-vmalloc", "warning", "WARNING:", r"WARNING: [^\n]*?mm/vmalloc\.c[^\n]*? "
         r"__vmalloc_node", "WARNING: zero-size vmalloc", guilty=_WARN),
    Oops("warn-kmalloc", "warning", "WARNING:", r"WARNING: [^\n]*?mm/\S++ k\w?\w?alloc",
         "WARNING: kmalloc bug", guilty=_WARN, skip="kmalloc|krealloc|slab|kmem"),
    # net/sched/sch_generic.c dev_watchdog(): a NIC's queue stalled; the driver is the identity
    Oops("netdev-watchdog", "tx-timeout", "NETDEV WATCHDOG",
         r"NETDEV WATCHDOG: (?P<dev>\S++) \((?P<driver>[\w-]++)\): transmit queue",
         "NETDEV WATCHDOG: transmit queue timed out [{driver}]", guilty=(), by_function=False),
    # --- lockdep (kernel/locking/lockdep.c): the report names the acquisition it is about ---
    # print_circular_bug_header(): "is trying to acquire lock: ... at: f1", "but task is
    # already holding lock: ... at: f2", then the dependency chain; workqueue locks are
    # taken by the workqueue core on behalf of the work item
    Oops("lockdep-circular-old", "lockdep", "INFO: possible circular",
         r"INFO: possible circular locking dependency detected \]", "possible deadlock",
         guilty=((find("is trying to acquire lock"), named(AT)),)),
    Oops("lockdep-circular", "lockdep", "locking dependency detected",
         r"possible circular locking dependency", "possible deadlock", guilty=((AT, AT, FRAMES),),
         skip=_LOCK_WORK),
    # print_irq_inversion_bug(): "... just changed the state of lock: ... at: f"
    Oops("lockdep-irq-inversion", "lockdep", "lock inversion",
         r"possible irq lock inversion dependency detected", "possible deadlock",
         guilty=((find("just changed the state of lock"), named(AT)),)),
    # print_bad_irq_dependency(): "which became SOFTIRQ-unsafe at:" then that stack
    Oops("lockdep-irq-unsafe-order", "lockdep", "lock order detected",
         r"-safe -> [A-Z]++-unsafe lock order detected", "possible deadlock",
         guilty=((find("which became"), FRAMES), (find("is trying to acquire"), named(AT)))),
    # print_deadlock_bug(): "is trying to acquire lock: ... at: f"
    Oops("lockdep-recursive", "lockdep", "recursive locking", r"possible recursive locking detected",
         "possible deadlock", guilty=((find("is trying to acquire lock"), named(AT)),)),
    # print_usage_bug(): "... takes: ... at: f", then the current stack (newer kernels name
    # the trace's first real frame, older "[ INFO: ... ]" reports the "takes" site)
    Oops("lockdep-inconsistent-old", "lockdep-inconsistent", "INFO: inconsistent lock state",
         r"INFO: inconsistent lock state", "inconsistent lock state", guilty=((find("takes"), named(AT)),)),
    Oops("lockdep-inconsistent", "lockdep-inconsistent", "inconsistent lock state",
         r"inconsistent lock state", "inconsistent lock state",
         guilty=((TRACE,), (find("takes"), named(AT)))),
    # print_unlock_imbalance_bug(): "is trying to release lock (..) at:" + print_ip_sym()
    Oops("lockdep-bad-unlock", "lockdep-bad-unlock", "bad unlock balance",
         r"bad unlock balance detected", "BUG: bad unlock balance", guilty=((PC, TRACE), (TRACE,))),
    # print_freed_lock_bug() and print_held_locks_bug(): the lock holder's acquisition site
    Oops("lockdep-held-freed", "lockdep-held-freed", "held lock freed", r"held lock freed",
         "BUG: held lock freed", guilty=((named(PC),), (find("is freeing memory"), named(AT)), (TRACE,))),
    Oops("lockdep-still-held", "lockdep-still-held", "still has locks held",
         r"still has locks held", "BUG: still has locks held", guilty=((named(PC),), (named(AT),), (TRACE,))),
    # kernel/entry/common.c lockdep_sys_exit(): "leaving the kernel with locks still held"
    Oops("lockdep-return-user", "lockdep-return-user", "returning to user space",
         r"lock held when returning to user", "BUG: lock held when returning to user space",
         guilty=((find("leaving the kernel with locks still held"), named(AT)),)),
    # lockdep register_lock_class(): the caller using a lock without lockdep_init_map
    Oops("lockdep-nonstatic", "lockdep-nonstatic", "non-static key",
         r"trying to register non-static key", "INFO: trying to register non-static key",
         guilty=((TRACE,),), skip="stack|lock|IRQ"),
    # lockdep_rcu_suspicious(): "suspicious RCU usage" at file:line, then the stack
    Oops("lockdep-rcu", "lockdep-rcu", "suspicious RCU usage", r"suspicious RCU usage",
         "WARNING: suspicious RCU usage", guilty=((TRACE,),), skip="rcu|kmem|slab"),
    Oops("lockdep-nested", "lockdep-nested", "ested lock was not taken",
         r"[Nn]ested lock was not taken", "WARNING: nested lock was not taken", guilty=_WARN),
    # print_lock_invalid_wait_context(): x86 prints it as a lockdep WARNING, arm as a BUG
    Oops("lockdep-wait-context", "warning", "Invalid wait context", r"BUG: Invalid wait context",
         "WARNING: locking bug", guilty=((TRACE,),), skip="lock_sock|release_sock"),
    # mm/slub.c (old SLAB debugging): "INFO: Freed in f age=.."
    Oops("slub-debug", "slub-debug", "INFO: ", r"INFO: (?P<what>Freed|Allocated) in " + _FUNC,
         "INFO: {what}", guilty=((HEADER,),), rank=CONTINUATION, garbled="truncated"),
    # --- warnings (after the specific WARNING rows above) -------------------------------
    Oops("warn-at", "warning", "WARNING:",
         r"WARNING: (?:\[[^\]]*+\] )?(?:CPU: \d++ PID: \d++ )?(?:at )?" + _SRC
         + r"(?::\d++)? (?:at )?(?:\[<?[0-9a-f]++>?\] )?" + _FUNC, "WARNING", guilty=_WARN),
    # the 2025 __warn() format: "WARNING: file:line at 0x.., CPU#n: comm/pid"
    Oops("warn-at-address", "warning", "WARNING:", r"WARNING: " + _SRC + r":\d++ at 0x",
         "WARNING", guilty=((RIP, TRACE), (TRACE,))),
    # arch/x86/kernel/unwind_frame.c: the unwinder's own complaint, no culprit
    Oops("warn-stack-regs-value", "warning-regs", "WARNING: kernel stack",
         r"WARNING: kernel stack regs .*? has bad '(?P<what>\w++)' value",
         "WARNING: kernel stack regs has bad '{what}' value", guilty=(), by_function=False),
    Oops("warn-stack-regs", "warning-regs", "WARNING: kernel stack",
         r"WARNING: kernel stack (?:regs|frame pointer)",
         "WARNING: kernel stack regs has bad value", guilty=(), by_function=False),
    # any other WARNING line (a driver's pr_warn("WARNING: ...")): its text is the identity
    Oops("warn-text", "warning-text", "WARNING:", r"WARNING: (?P<what>\S[^\n]{0,100})",
         "WARNING: {what}", guilty=(), by_function=False),
    # --- atomicity / scheduling: the stack's first real frame called the sleeping API ------
    # kernel/sched/core.c __might_resched(): "BUG: sleeping function called from invalid context"
    Oops("sleep-in-atomic", "sleep-in-atomic", "sleeping function called",
         r"BUG: sleeping function called from", "BUG: sleeping function called from invalid "
         "context", guilty=((TRACE,),)),
    # kernel/sched/core.c __schedule_bug()
    Oops("sched-atomic", "sched-atomic", "scheduling while atomic", r"BUG: scheduling while atomic",
         "BUG: scheduling while atomic", guilty=((TRACE,),), skip="schedule"),
    # lib/smp_processor_id.c check_preemption_disabled()
    Oops("preemptible", "preemptible", "in preemptible",
         r"BUG: using (?P<what>[\w]++\(\)) in preemptible", "BUG: using {what} in preemptible code",
         guilty=((TRACE,),), skip="dump_stack|preemption|preempt|debug_|processor_id|this_cpu"),
    # kernel/locking/spinlock_debug.c spin_bug()/rwlock_bug()
    Oops("spinlock-debug", "spinlock", "BUG: ", r"BUG: (?P<lock>spinlock|rwlock) (?P<what>lockup "
         r"suspected|already unlocked|recursion|cpu recursion|bad magic|wrong owner|wrong CPU"
         r"|trylock failure on UP)", "BUG: {lock} {what}", guilty=((TRACE,),),
         skip="spin_|_lock|_unlock"),
    Oops("rwlock-debug", "rwlock", "BUG: rwlock", r"BUG: rwlock (?P<what>[\w ]+?)(?: on|$)",
         "BUG: rwlock {what}", guilty=((TRACE,),), skip="rwlock|read_lock|write_lock|do_raw_"),
    # --- hangs ------------------------------------------------------------------------------
    # kernel/watchdog.c watchdog_timer_fn(): the interrupted PC and its task's stack
    Oops("soft-lockup", "soft-lockup", "soft lockup", r"BUG: soft lockup", "BUG: soft lockup",
         guilty=((RIP, TRACE), (TRACE,)), extract="stall"),
    # kernel/watchdog_perf.c / watchdog_buddy.c: the CPU spins with interrupts off, nearly
    # always on a lock; its NMI stack's first real frame (often an IRQ handler) took it
    Oops("hard-lockup", "hard-lockup", "hard LOCKUP", r"(?:Watchdog detected|NMI watchdog:) hard "
         r"LOCKUP", "watchdog: hard LOCKUP", guilty=((RIP, TRACE), (TRACE,))),
    Oops("hard-lockup-detected", "hard-lockup", "hard LOCKUP", r"detected hard LOCKUP",
         "watchdog: hard LOCKUP", guilty=((RIP, TRACE), (TRACE,))),
    # kernel/rcu/tree_stall.h print_cpu_stall(): NMI backtraces of the stalled CPUs; the code
    # that loops is the one the timer interrupt (x86 apic, arm64 el1h_64_irq) interrupted
    Oops("rcu-stall", "rcu-stall", "rcu_", r"INFO: rcu_(?:preempt|sched|bh) (?:self-)?detected"
         r"(?: expedited)? stall", "INFO: rcu detected stall",
         guilty=((find("apic_timer_interrupt"), RIP, FRAMES),
                 (find("apic_timer_interrupt", "Exception stack", "el1h_64_irq"), FRAMES),
                 (find("NMI backtrace for cpu"), RIP, TRACE), (RIP, TRACE)),
         extract="stall", skip="apic_timer_interrupt|rcu"),
    # kernel/hung_task.c check_hung_task(): the blocked task's stack
    Oops("hung-task", "hung-task", "blocked for more than", r"INFO: task [^\n]*? blocked for more "
         r"than", "INFO: task hung", guilty=((TRACE,),), extract="hung"),
    # kernel/workqueue.c show_all_workqueues(): pool state, no culprit stack
    Oops("workqueue-lockup", "workqueue-lockup", "workqueue lockup", r"BUG: workqueue lockup",
         "BUG: workqueue lockup", guilty=(), by_function=False),
    # kernel/hung_task.c (task with a fatal signal pending)
    Oops("task-cant-die", "task-cant-die", "can't die", r"INFO: task [^\n]*? can't die for more "
         r"than", "INFO: task can't die", guilty=((TRACE,),), skip="schedule"),
    # --- memory -----------------------------------------------------------------------------
    # mm/page_alloc.c bad_page() + mm/page_owner.c: the page's allocation stack
    Oops("bad-page-state", "bad-page-state", "Bad page ", r"BUG: Bad page (?P<what>state|cache)",
         "BUG: Bad page {what}", guilty=((find("page last allocated"), FRAMES), (TRACE,)),
         skip="^bad_page$|(?:free|put|get|update|release)_page|free_unref|^_*folio|truncate_inode_pages"
         "|page_frag_free|alloc|vmap|page_owner"),
    # mm/memory.c print_bad_pte(): a corrupted page table, no culprit frame
    Oops("bad-page-map", "bad-page-map", "Bad page map", r"BUG: Bad page map", "BUG: Bad page map",
         guilty=(), by_function=False),
    # kernel/fork.c check_mm()
    Oops("bad-rss", "bad-rss", "Bad rss-counter", r"BUG: Bad rss-counter state",
         "BUG: Bad rss-counter state", guilty=(), by_function=False),
    # mm/kmemleak.c print_unreferenced(): the leaked object's allocation backtrace
    Oops("kmemleak", "memory-leak", "memory leak", r"BUG: memory leak", "memory leak",
         guilty=((find("backtrace"), FRAMES),),
         skip="kmemleak|mmap|kmem|slab|alloc|create_object|idr_get|list_lru_init|kasprintf"
         "|kvasprintf|pcpu_create|strdup|strndup|memdup"),
    # mm/slub.c slab_err() / object_err()
    Oops("slub-kmalloc-corruption", "slab-corruption", "BUG kmalloc-",
         r"^BUG kmalloc-\d++ \([^)]*+\): (?P<what>.{1,80})", "BUG: slab corruption: {what}",
         guilty=((TRACE,),), skip="slab_|check_|free_|kfree|kmem"),
    # mm/oom_kill.c: the system is out of memory, not a code bug
    Oops("oom-panic", "oom-panic", "Out of memory", r"Kernel panic - not syncing: (?P<why>(?:System "
         r"is deadlocked on memory|Out of memory)[^\n]{0,80})", "Kernel panic - not syncing: {why}",
         guilty=(), by_function=False),
    # --- filesystems / net ------------------------------------------------------------------
    # fs/dcache.c umount_check()
    Oops("dentry-in-use", "dentry-in-use", "still in use",
         r"BUG: Dentry \S++ ++still in use.*?\[(?P<func>unmount)", "BUG: Dentry still in use",
         guilty=((HEADER,),)),
    # fs/super.c generic_shutdown_super(), fs/file_table.c: a printk without a stack
    Oops("vfs", "vfs", "VFS: ", r"VFS: (?P<what>Busy inodes after unmount|Close: file count is "
         r"(?:zero|0))", "VFS: {what}", guilty=(), by_function=False),
    # net/core/dev.c netdev_wait_allrefs(): a leaked device reference, no culprit stack
    Oops("netdev-unregister", "netdev-unregister", "unregister_netdevice: waiting for",
         r"unregister_netdevice: waiting for \S++ to become free",
         "unregister_netdevice: waiting for DEV to become free", guilty=(), by_function=False),
    # --- hardware (arch/x86/kernel/cpu/mce/, drivers/edac/, drivers/pci/pcie/aer.c,
    # NVIDIA's driver): the identity is the failing part's class, not the interrupted code ---
    Oops("mce-exception", "machine-check", "Hardware Error]", r"\[Hardware Error\]: (?:CPU \d++: )?"
         r"Machine [Cc]heck(?: Exception)?:", "Machine check", guilty=(), by_function=False,
         classify="mce"),
    Oops("mce-panic", "machine-check", "achine check", r"Kernel panic - not syncing: (?:Fatal )?"
         r"(?:local )?[Mm]achine check", "Machine check", guilty=(), by_function=False,
         classify="mce"),
    Oops("mce-broadcast-timeout", "machine-check", "broadcast exception handler",
         r"Timeout: Not all CPUs entered broadcast exception handler", "Machine check",
         guilty=(), by_function=False, classify="mce"),
    Oops("mce-bank", "machine-check", "Hardware Error]", r"\[Hardware Error\]: (?:CPU \d++: )?"
         r"Machine Check: \d++ Bank", "Machine check", guilty=(), by_function=False,
         classify="mce"),
    Oops("aer-fatal", "pcie-aer", "AER:", r"AER: (?:Multiple )?Uncorrect(?:ed|able) \(Fatal\) "
         r"error (?:message )?received", "PCIe AER", guilty=(), by_function=False,
         classify="aer"),
    Oops("edac-ue", "edac", "EDAC ", r"EDAC (?:\w++ )?MC\d++: \d++ (?P<sev>UE) (?P<what>[\w ]+?)"
         r"(?: on|$)", "EDAC: uncorrected {what}", guilty=(), by_function=False),
    Oops("aer-corrected", "pcie-aer", "AER:", r"AER: (?:Multiple )?(?:Correct(?:ed|able)|"
         r"Uncorrect(?:ed|able) \(Non-Fatal\)) error (?:message )?received", "PCIe AER",
         guilty=(), by_function=False, classify="aer", rank=WEAK),
    Oops("edac-ce", "edac", "EDAC ", r"EDAC (?:\w++ )?MC\d++: \d++ (?P<sev>CE) (?P<what>[\w ]+?)"
         r"(?: on|$)", "EDAC: corrected {what}", guilty=(), by_function=False, rank=WEAK),
    Oops("mce-logged", "machine-check", "Machine check events logged",
         r"Hardware Error\]: Machine check events logged", "Machine check", guilty=(),
         by_function=False, classify="mce", rank=WEAK),
    Oops("gpu-xid", "gpu-xid", "NVRM: Xid", r"NVRM: Xid \([^)]*+\): (?P<xid>\d++)",
         "NVRM: Xid {xid}", guilty=(), by_function=False, rank=WEAK),
    # --- panics (kernel/panic.c panic(); after everything that may precede them) -----------
    # kernel/panic.c __stack_chk_fail(): names the function whose canary was smashed
    Oops("stack-protector", "stack-corruption", "stack-protector", r"Kernel panic - not syncing: "
         r"stack-protector: Kernel stack is corrupted in: (?:(?:0x)?[0-9a-f]{8,}+\b|" + _FUNC + ")",
         "kernel panic: stack is corrupted", guilty=((HEADER,), (TRACE,)), skip="stack_chk"),
    # kernel/sched/core.c schedule_debug(): a stack overflow seen at the next schedule()
    Oops("stack-end-corrupted", "stack-corruption", "corrupted stack end",
         r"Kernel panic - not syncing: corrupted stack end", "kernel panic: corrupted stack end",
         guilty=((TRACE,),), extract="stall", skip="schedule|retint_kernel"),
    # arch/arm64/kernel/traps.c handle_bad_stack(), arch/riscv/kernel/traps.c
    Oops("stack-overflow-panic", "stack-overflow", "kernel stack overflow",
         r"Kernel panic - not syncing: kernel stack overflow", "kernel stack overflow",
         guilty=((TRACE,), (RIP,)), extract="stall", skip="bad_stack", rank=CONTINUATION),
    Oops("panic-hard-lockup", "hard-lockup", "Hard LOCKUP", r"Kernel panic - not syncing: Hard "
         r"LOCKUP", "watchdog: hard LOCKUP", guilty=((RIP, TRACE), (TRACE,)), rank=CONTINUATION),
    Oops("panic-softlockup", "soft-lockup", "softlockup", r"Kernel panic - not syncing: softlockup",
         "BUG: soft lockup", guilty=((RIP, TRACE), (TRACE,)), extract="stall", rank=CONTINUATION),
    Oops("panic-hung-task", "hung-task", "hung_task", r"Kernel panic - not syncing: hung_task",
         "INFO: task hung", guilty=((TRACE,),), extract="hung", rank=CONTINUATION),
    # the report these panics end was lost: the panic line alone says nothing of the bug
    Oops("panic-after-report", "panic", "Kernel panic - not syncing", r"Kernel panic - not "
         r"syncing: (?P<why>Fatal exception|panic_on_warn set|hung_task: blocked tasks)",
         "Kernel panic - not syncing: {why}", guilty=((TRACE,),), rank=CONTINUATION,
         by_function=False, garbled="truncated"),
    Oops("panic", "panic", "Kernel panic - not syncing", r"Kernel panic - not syncing: ?(?P<why>"
         r".{0,120})", "Kernel panic - not syncing: {why}", guilty=((TRACE,),), rank=CONTINUATION,
         by_function=False),
    # kernel/workqueue.c process_one_work(): "last function: f" is the work item that leaked
    Oops("workqueue-leak", "workqueue-leak", "workqueue leaked", r"BUG: workqueue leaked lock or "
         r"atomic", "BUG: workqueue leaked lock or atomic", guilty=((HEADER,),),
         details=(r"last function: " + _FUNC,)),
    # any other BUG line: no convention names a culprit, so its text is the identity
    Oops("bug-generic", "bug", "BUG: ", r"BUG: (?P<what>\S[^\n]{0,100})", "BUG: {what}",
         guilty=(), by_function=False),
    # any other INFO: line of a debugging facility: its text is the identity
    Oops("info-text", "info-text", "INFO: ", r"INFO: (?P<what>\S[^\n]{0,100})", "INFO: {what}",
         guilty=(), by_function=False),
    # syzkaller's executor reporting its own failure (the corpus' harness, pkg/report)
    Oops("syz-failure", "syz-failure", "SYZF", r"SYZ(?P<which>FAIL|FATAL):(?P<what>[^\n]{0,120})",
         "SYZ{which}:{what}", guilty=(), by_function=False),
    # a bare "BUG:"/"WARNING:" line: the rest of the header was lost (two CPUs printing)
    Oops("bare-marker", "corrupted", ":", r"^(?P<what>BUG|WARNING|INFO):\s*+$",
         "{what}: corrupted report", guilty=((TRACE,), (RIP,)), rank=CONTINUATION, garbled="corrupted"),
    Oops("trusty-assert", "trusty-assert", "ASSERT FAILED", r"trusty: panic .*?ASSERT FAILED at "
         r"\([^)]*+\): (?P<what>.{0,80})", "trusty: ASSERT FAILED: {what}", guilty=(),
         by_function=False),
    # rust/kernel: "rust_kernel: panicked at file:line", then the trace
    Oops("rust-panic", "rust-panic", "panicked at", r"panicked at (?P<what>.{0,120})",
         "Rust panic: {what}", guilty=((TRACE,),),
         skip=r"_R\w*?panic|rust_begin_unwind|rust_panic|core\w*?panicking"),
)

# --- how a kernel line arrives: the prefixes put before the kernel's text ------------------
#
# A line is [noise][transport][level][timestamp][caller id] text. console.py strips, in that
# order, at most one of each (each table is tried first to last); bench/signatures.py renders
# logs in every style below and measures that the fingerprint does not move. Groups here are
# never quantified possessively (see console._PREFIX: Python before 3.11.5, gh-106052).

# Printed into the line by the console itself: kernel/printk/printk.c before 5.10 prefixed the
# next line with the count a console fell behind by (later kernels print it on a line of its
# own, and nbcon consoles also print REPLAY_MARKER); a getty prompt on the serial console.
LINE_NOISE: tuple[str, ...] = (r"\*\* \d++ printk messages dropped \*\* ", r"[\w.-]++ login: ")
# Transports that wrap each kernel record (the host's name is any token):
TRANSPORT_PREFIXES: tuple[tuple[str, str], ...] = (
    # journalctl -k -o short / short-precise ("Dec 01 10:00:00[.123456] host kernel: "), and
    # RFC 3164 syslog files ("Dec  1 ..."), with the "<PRI>" they carry on the wire
    ("syslog", r"(?:<\d{1,3}>)?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d++)? \S++ kernel: "),
    # journalctl -o short-full ("Tue 2026-12-01 10:00:00 UTC host kernel: ")
    ("journal-full", r"[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d++)? \S++ \S++ kernel: "),
    # journalctl -o short-iso / short-iso-precise, rsyslog's RSYSLOG_FileFormat
    ("syslog-iso", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d++)?(?:Z|[+-]\d\d:?\d\d)? \S++ kernel: "),
    # journalctl -o short-unix ("1764583200.123456 host kernel: ")
    ("journal-unix", r"\d{9,}+\.\d++ \S++ kernel: "),
    # journalctl -o short-monotonic ("[  123.456789] host kernel: "): the journal's clock, not
    # the kernel's timestamp, so the line counts as untimed
    ("journal-monotonic", r"\[ *+\d++\.\d++\] \S++ kernel: "),
    # RFC 5424 (rsyslog RSYSLOG_SyslogProtocol23Format, syslog-ng): "<PRI>1 TIMESTAMP HOST
    # kernel PROCID MSGID STRUCTURED-DATA ", then an optional BOM
    ("rfc5424", "<\\d{1,3}>1 \\S++ \\S++ kernel \\S++ \\S++ (?:-|(?:\\[[^\\]]*+\\])+) \ufeff?+"),
    # util-linux dmesg -x ("kern  :warn  : ")
    ("dmesg-decode", r"kern *+:[a-z]++ *+: "),
)
# The kernel's timestamp: printk_time's "[  12.345678]" (consoles, dmesg, syslog via /proc/kmsg),
# util-linux dmesg -T / --time-format ctime ("[Tue Dec  1 10:00:00 2026]") and --time-format
# iso ("2026-12-01T10:00:00,123456+00:00 ").
KERNEL_TIMESTAMPS: tuple[str, ...] = (
    r"\[ *+\d++\.\d++\]",
    r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]",
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d++[+-]\d\d:\d\d",
)
# kernel/printk/printk.c (nbcon, 6.12+): a console taken over mid-line leaves the cut line,
# prints this marker on a line of its own, then prints the whole line again.
REPLAY_MARKER = "** replaying previous printk message **"

# Kinds whose signature names a failing part rather than a bug in code.
HARDWARE_KINDS = frozenset({"machine-check", "edac", "pcie-aer", "gpu-xid"})
HARDWARE_LABEL = "hardware-error"

# Header fields that are free text and need normalising before they enter a title.
FREE_TEXT_FIELDS = frozenset({"why", "what"})

# Lines that contain a needle but are known not to be crashes.
IGNORED_LINES = re.compile(
    r"WARNING: /etc/ssh/moduli|WARNING: workqueue cpumask|INFO: lockdep is turned off"
    # informational WARNING lines of boot and userspace (sshd, glibc, mitigations, fbcon, fs)
    r"|WARNING: [Tt]he mand mount option|WARNING: Unsupported flag value|WARNING: Unprivileged "
    r"eBPF|WARNING: fbcon: Driver|WARNING: See https|WARNING: kernel not compiled with"
    r"|EXT4-[Ff][Ss](?: \([^)]*+\))?:|(?i:warning: \S+ uses (?:deprecated v2 capabilities|"
    r"wireless extensions))|XFS \(\w++\): WARNING|rmt_storage:INFO:|_INFO:"
    r"|INFO: Stall ended before state dump|INFO: NMI handler|took too long to run"
    r"|INFO: recovery required|BUG: no syscalls can create|INFO: no syscalls"
    r"|is not present in /proc/kallsyms|ODEBUG:|DEBUG:|xlog_status:|_INFO::"
    r"|general protection fault [^\n]*? error:\d++ in "  # a userspace fault (traps.c, printk)
)

# Frames that are never the bug, as named classes (the class name is the `rule` an explanation
# gives a skipped frame). Each entry is a regex *searched* in the function name (clone suffixes
# already cut), so "spin_lock" covers _raw_spin_lock_irqsave; anchor with ^ or $ to narrow.
# One line per entry group, each citing the kernel code that puts such frames on a stack.
SKIP_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reporting", (
        # lib/dump_stack.c, arch/*/kernel/dumpstack.c and stacktrace.c: the printing of the stack itself
        "dump_stack", "show_stack", "show_trace", "show_regs", "dump_backtrace", "walk_stack",
        "arch_stack_walk", "stack_trace_save", "stack_trace_consume",
        # kernel/panic.c (panic, __warn, warn_slowpath_fmt, check_panic_on_warn, print_tainted)
        "panic", "__warn", "warn_slowpath", "warn_bogus", "print_tainted", "^get_taint$",
        # lib/bug.c (report_bug) and arch/*/kernel/traps.c (fixup_bug, handle_bug) run BUG/WARN
        "report_bug", "fixup_bug", "handle_bug", "bug_handler", "bug_brk_handler",
        # mm/page_alloc.c warn_alloc, kernel/printk/printk.c, lib/vsprintf.c, lib/hexdump.c
        "warn_alloc", "printk", "printf", "va_format", "string", "pointer", "hex_dump",
        # drivers/base/core.c dev_printk family prints on behalf of a driver
        "^_?_?dev_(?:printk|emerg|alert|crit|err|warn|notice|info)",
        # lockdep's own printing (kernel/locking/lockdep.c print_usage_bug, print_unlock_...)
        "print_usage_bug", "print_unlock", "imbalance_bug", "print_report",
        # mm/kasan/report.c, mm/kfence/report.c address description
        "print_address_description",
        # lib/nmi_backtrace.c and kernel/hung_task.c print other CPUs' and tasks' stacks
        "nmi_cpu_backtrace", "nmi_trigger_cpumask_backtrace", "trigger_.*backtrace",
        "sched_show_task", "^show_state", "^__schedule_bug$",
        # lib/fortify_string.c and the assert helpers report the caller's overflow
        "__fortify_report", "fortify_panic", "assertfail",
    )),
    ("exception-entry", (
        # arch/x86/kernel/traps.c and arch/x86/entry/entry_64.S: trap and IDT entry
        "^asm_exc_", "^exc_", "_trap$", "do_trap", "do_error_trap", "invalid_op", "^do_int3",
        "do_general_protection", "^_*die(?:_body)?$", "^oops_", "do_divide_error",
        # arch/x86/entry/entry_64.S, entry_32.S: syscall and kernel-thread entry
        "^entry_(?:SYSCALL|SYSENTER|INT80)", "^ret_from_fork", "^ret_from_kernel_thread",
        # arch/x86/mm/fault.c: page fault handling around the faulting access
        "page_fault_oops", "kernelmode_fixup_or_oops", "^_*bad_area", "^no_context$",
        "do_user_addr_fault", "do_kern_addr_fault", "handle_page_fault", "spurious_kernel_fault",
        "__phys_addr",
        # arch/arm64/mm/fault.c and arch/arm64/kernel/entry-common.c: arm64 fault entry
        "do_(?:kernel|translation|tag_check|bad_area|alignment)_fault", "do_mem_abort",
        "die_kernel_fault", "^el1_", "^el1h_64_", "^el0t_64_", "do_sea$", "do_tag_recovery",
        "do_debug_exception", "call_el1_break_hook", "^brk_handler",
        # arch/riscv/kernel/traps.c and arch/riscv/mm/fault.c: riscv trap entry
        "^handle_exception$", "^do_trap_", "^do_page_fault$", "^handle_break$", "^die_",
        # arch/arm/kernel/traps.c and arch/arm/mm/fault.c (32-bit arm)
        "^do_DataAbort$", "^do_PrefetchAbort$", "^__do_kernel_fault$", "^do_undefinstr$",
        # arch/powerpc/kernel/traps.c
        "program_check_exception", "program_check_common",
    )),
    ("sanitizer", (
        # mm/kasan/, mm/kmsan/, kernel/kcsan/, lib/ubsan.c, mm/kfence/: the sanitizer runtimes
        "__sanitizer", "__asan", "kasan", "hwasan", "__msan", "kmsan", "kcsan_setup_watchpoint",
        "__tsan_", "__ubsan_", "ubsan_", "kfence_", "__kfence",
        # mm/kasan/generic.c and include/linux/kasan-checks.h: access checks the compiler inserts
        "check_memory_region", "read_word_at_a_time", "(?:read|write)_once_.*nocheck",
        # kernel/kcov.c and the compiler's coverage and retpoline thunks
        "__sanitizer_cov", "kcov_", "_indirect_thunk_", "__x86_return_thunk",
        # mm/usercopy.c and mm/slub.c object checks report the caller's access
        "check_heap_object", "check_object",
        # lib/debugobjects.c reports misuse by the object's owner
        "debug_object", "timer_is_static_object", "work_is_static_object",
        # kernel/locking/lockdep.c validation (the lock's user is the bug)
        "lockdep", "lock_class", "mark_lock", "(?:reacquire|mark)_held_locks", "__lock_acquire",
        "validate_chain", "check_prev_add", "check_noncircular", "check_irq_usage",
        # kernel/trace/trace_preemptirq.c: the irq-state tracing hooks local_irq_enable() and
        # friends call into lockdep (lockdep_hardirqs_on_prepare); a lockdep report raised
        # there is about the caller that toggled interrupts
        "^trace_(?:hard|soft)irqs_(?:on|off)",
        # lib/fault-inject.c
        "should_fail",
        # kernel/trace/trace_event_perf.c and include/trace/perf.h: tracepoint machinery
        "perf_trace",
    )),
    ("locking", (
        # kernel/locking/{spinlock,mutex,rwsem,rtmutex,semaphore,osq_lock,qspinlock}.c
        "lock_acquire", "lock_release", "raw_spin_rq", "spin_lock", "spin_trylock",
        "spin_unlock", "read_lock", "read_trylock", "write_lock", "write_trylock",
        "read_unlock", "write_unlock", "queued_spin", "^do_raw_", "^down$", "down_read",
        "down_write", "down_trylock", "up_read", "up_write", "^mutex_", "^__mutex_",
        "^rt_mutex_", "owner_on_cpu", "osq_lock", "osq_unlock", "^lock_timer_base$",
        # kernel/softirq.c bottom-half toggles around locked sections
        "bh_enable", "bh_disable",
        # include/linux/atomic, lib/refcount.c, lib/kref: counters that warn for their caller
        "atomic(?:64)?_(?:dec|inc|read|set|or|xor|and|add|sub|fetch|xchg|cmpxchg|try)",
        "(?:set|clear|change|test)_bit", "^refcount_", "^kref_", "ref_tracker",
        "seqprop_assert",
        # kernel/sched/wait.c and completion.c wake and wait for their callers
        "__wake_up", "^complete$", "wait_for_completion", "finish_wait",
    )),
    ("allocator", (
        # mm/slub.c, mm/slab_common.c, mm/page_alloc.c, mm/vmalloc.c, mm/util.c: allocation
        "alloc_page", "k?v?(?:m|z|c)alloc", "krealloc", "kmem_cache", "allocate_slab", "slab_",
        "_noprof$", "__alloc_frozen_pages", "^kv?free$", "kfree_skb", "vfree", "vunmap",
        "memdup", "strdup", "strndup", "kasprintf", "kvasprintf",
        # mm/filemap.c and mm/folio-compat.c page cache lookups that allocate
        "folio_(?:alloc|unlock)", "filemap_alloc_folio", "__filemap_get_folio",
        "find_or_create_page", "do_read_cache_folio", "read_cache_page", "pagecache_get_page",
        "grab_cache_page_write_begin", "^(?:un)?lock_page",
        # mm/memory.c: might_fault / might_sleep annotations run on behalf of the caller
        "might_fault", "might_sleep", "__might_resched",
    )),
    ("string-copy", (
        # lib/string.c, arch/*/lib/mem*.S: string and memory helpers
        "memcpy", "memcmp", "memset", "memchr", "memmove", "strcmp", "strncmp", "strcpy",
        "strlcpy", "strncpy", "strscpy", "strlen", "strstr", "strnstr", "strnlen", "strchr",
        # lib/usercopy.c, lib/iov_iter.c, arch/*/lib/copy_user*: user and iterator copies
        "copy_to_user", "copy_from_user", "copy_to_iter", "copy_from_iter", "copy_page_to_iter",
        "copy_page_from_iter", "copy_folio_to_iter", "^copyin$", "^copyout$",
        # get_user()/put_user() are macros: their frames are __get_user_4, __put_user_nocheck_8
        # (and mm/gup.c's get_user_pages*); a driver's own tun_get_user is the bug's code
        "^_*(?:get|put)_user", "extract_(?:user|iter)_to_sg",
        # include/asm-generic/io.h MMIO accessors and lib/logic_iomem.c
        "read[bwlq]$", "write[bwlq]$", "logic_in", "logic_out",
        # lib/crc*.c checksum helpers
        "^crc\\d+", "crc_itu_t",
    )),
    ("data-structure", (
        # lib/list_debug.c, lib/rbtree.c, lib/klist.c, lib/xarray.c, lib/rhashtable.c
        "list_add", "list_del", "list_replace", "list_move", "list_splice", "^rb_", "^__rb_",
        "^klist_", "xas_(?:start|load|find)", "rhashtable_lookup",
    )),
    ("core-api", (
        # kernel/workqueue.c, kernel/time/timer.c, kernel/kthread.c: APIs that wait or warn for
        # the caller that used them wrongly
        "del_timer", "__timer_delete_sync", "__mod_timer", "sk_stop_timer_sync", "flush_work",
        "__cancel_work_timer", "cancel_work_sync", "try_to_grab_pending", "flush_workqueue",
        "drain_workqueue", "destroy_workqueue", "queue_work", "insert_work",
        "__queue_delayed_work", "queue_delayed_work_on", "kthread_stop",
        # lib/kobject.c, drivers/base/{core,dd,devres}.c: device model teardown
        "kobject_", "add_uevent_var", "get_device_parent", "device_add", "device_del",
        "device_unregister", "device_destroy", "device_release", "devres_release_all",
        "device_for_each_child", "^put_device$", "device_remove_file", "sysfs_remove",
        # drivers/char/hw_random, drivers/i2c, drivers/tty, net/core/dev.c unregistration
        "hwrng_unregister", "i2c_del_adapter", "__unregister_client", "tty_unregister_device",
        "rollback_registered", "unregister_netdev",
        # drivers/usb/core/{urb,message,hcd}.c and drivers/usb/gadget/udc/dummy_hcd.c
        "dummy_urb_enqueue", "usb_kill_urb", "usb_kill_anchored_urbs", "usb_control_msg",
        "usb_hcd_submit_urb", "usb_submit_urb",
        # fs/inode.c, fs/dcache.c, mm/truncate.c: reference drops that run the caller's release
        "^iput$", "^iput_final$", "^ihold$", "fast_dput", "dput", "drop_nlink",
        # fs/buffer.c mark_buffer_dirty() warns about its caller's buffer
        "^mark_buffer_dirty$",
        "find_lock_entries", "truncate_inode_pages_range", "cleanup_srcu_struct",
        "ida_free",
    )),
)
GENERIC_SKIP: tuple[str, ...] = tuple(entry for _, entries in SKIP_CLASSES for entry in entries)
# Skip classes that hold even for a frame the report names (a part marked `!`): the printing of
# the report is never the bug. Kernels before 4.10 print the whole call trace as `[<address>]
# func+0x`, so lockdep's print_ip_sym part (`pc`) can land on the trace's `dump_stack`.
NAMED_SKIP_CLASSES: frozenset[str] = frozenset({"reporting"})

# Stalls loop across several functions, so the top of the stack is random. The bug is named
# after the frame just *above* the first of these dispatch points (the driver's ioctl, the
# protocol's handler) or, when the stack starts at one, after the dispatch point itself.
# Regexes searched in the name (syscall wrapper prefixes already stripped).
STALL_ANCHORS: tuple[str, ...] = (
    # kernel/workqueue.c, arch/*/entry/common.c, arch/arm64/kernel/syscall.c: work and syscalls
    "process_one_work", "do_syscall_", "do_fast_syscall_", "sysenter_dispatch",
    "tracesys_phase2", "el0_svc_handler", "invoke_syscall", "ret_fast_syscall",
    # net/core/dev.c, kernel/softirq.c, kernel/time/{timer,hrtimer}.c: softirq and timers
    "netif_receive_skb", "do_softirq", "call_timer_fn", "_run_timers", "run_timer_softirq",
    "hrtimer_run", "run_ksoftirqd", "tasklet_action", "tasklet_hi_action",
    # kernel/smpboot.c, kernel/kthread.c, arch/*/kernel/smpboot.c: thread and CPU start
    "smpboot_thread_fn", "^kthread$", "start_secondary", "cpu_startup_entry", "ret_from_fork",
    # fs/read_write.c, fs/ioctl.c, block/ioctl.c, mm/mmap.c, fs/open.c: file operations
    "vfs_write", "vfs_read", "vfs_iter_read", "vfs_iter_write", "do_iter_read", "do_iter_write",
    "call_read_iter", "call_write_iter", "new_sync_read", "new_sync_write", "vfs_ioctl",
    "ksys_ioctl", "compat_ioctl", "compat_sys_ioctl", "blkdev_driver_ioctl", "blkdev_ioctl",
    "do_iter_readv_writev", "^call_mmap", "mmap_region", "do_mmap", "do_dentry_open",
    "vfs_open",
    # net/socket.c, net/core/sock.c, net/netlink/: socket and netlink dispatch
    "^sock_sendmsg", "^sock_recvmsg", "^sock_release", "^__sock_release", "^setsockopt$",
    "kernel_setsockopt", "sock_common_setsockopt", "^listen$", "kernel_listen",
    "sk_common_release", "^sock_mmap", "^accept$", "kernel_accept", "^sock_do_ioctl",
    "^sock_ioctl", "^compat_sock_ioctl", "^nfnetlink_rcv_msg", "^rtnetlink_rcv_msg",
    "^netlink_dump", "^(?:sys_)?(?:socketpair|connect|ioctl)",
    # mm/memory.c, arch/*/mm/fault.c: page fault entry
    "__do_fault", "do_page_fault", "^page_fault$",
    # fs/file_table.c, kernel/task_work.c, kernel/entry/common.c: return-to-user work
    "__fput", "task_work_run", "exit_to_usermode", "smp_call_function",
    # init/main.c do_one_initcall(): built-in and module init functions (a driver's probe
    # path loops under its module's init)
    "^do_one_initcall$",
)

# Syscall wrappers: one syscall, one name across architectures (include/linux/syscalls.h
# __SYSCALL_DEFINEx, arch/x86/include/asm/syscall_wrapper.h, arch/arm64/.../syscall_wrapper.h).
# A frame is named by the shortest result of removing one of these prefixes.
SYSCALL_PREFIXES: tuple[str, ...] = (
    "SYSC_", "SyS_", "sys_", "__x64_", "__ia32_", "__arm64_", "____sys_", "___sys_", "__sys_",
    "__se_", "__se_sys_", "__do_sys_", "compat_SYSC_", "compat_SyS_", "ksys_",
)

# Stalls whose top frame waits on other CPUs (kernel/smp.c): one bucket for every variant.
STALL_BUCKETS: tuple[tuple[str, str], ...] = (("smp_call_function", "smp_call_function"),)

# Hung tasks (kernel/hung_task.c prints the blocked task's stack): hangs on these are victims
# of one shared problem (RTNL held, RCU stuck), grouped by the anchor, searched in the name.
HUNG_ANCHORS: tuple[tuple[str, str], ...] = (
    ("rtnl_lock", ""),  # net/core/rtnetlink.c (the frame keeps its name: rtnl_lock_killable)
    ("synchronize_rcu", "synchronize_rcu"),  # kernel/rcu/tree.c
    ("synchronize_srcu", "synchronize_rcu"),  # kernel/rcu/srcutree.c
    ("synchronize_net", "synchronize_rcu"),  # net/core/dev.c
    ("synchronize_sched", "synchronize_rcu"),  # older kernels' kernel/rcu/tree.c
)
# The blocking primitives a hung task sleeps in, below the code that waits: kernel/sched/
# core.c (__schedule, schedule_timeout), kernel/locking/ (mutex, rwsem, semaphore),
# kernel/sched/{completion,wait,wait_bit}.c, kernel/rcu/tree.c rcu_barrier (syzkaller's
# linuxHangTaskFrameExtractor list), and the timed sleeps a driver polls its hardware with:
# kernel/time/sleep_timeout.c (timer.c before 6.13) msleep, msleep_interruptible,
# usleep_range_state, schedule_timeout*, kernel/time/hrtimer.c schedule_hrtimeout*, and
# include/linux/delay.h's inline ssleep/fsleep/usleep_range, which print as those.
HUNG_SKIP: tuple[str, ...] = (
    "sched", "_lock", "_slowlock", "down", "rwsem", "completion", "kthread", "wait",
    "synchronize", "context_switch", "__switch_to", "cancel_delayed_work", "rcu_barrier",
    "^msleep", "^ssleep$", "^fsleep$", "^usleep_range",
)

# Intel SDM vol. 3B "MCA error codes": (mask, value, class) over the low 16 bits of
# MCi_STATUS, with the corrected-error-filtering bit 12 cleared. First match wins.
MCE_ERROR_CLASSES: tuple[tuple[int, int, str], ...] = (
    (0xFFFF, 0x0000, "no-error"),
    (0xFFFF, 0x0001, "unclassified"),
    (0xFFFF, 0x0002, "microcode-rom-parity"),
    (0xFFFF, 0x0003, "external"),
    (0xFFFF, 0x0004, "frc"),
    (0xFFFF, 0x0005, "internal-parity"),
    (0xFFFF, 0x0006, "smm-handler-code-access"),
    (0xFFFF, 0x0400, "internal-timer"),
    (0xFC00, 0x0400, "internal-unclassified"),
    (0xFFFC, 0x000C, "generic-cache-hierarchy"),
    (0xFFF0, 0x0010, "tlb"),
    (0xFF80, 0x0080, "memory-controller"),
    (0xFF00, 0x0100, "cache-hierarchy"),
    (0xF800, 0x0800, "bus-interconnect"),
)

# Messages that name a hardware class when no MCi_STATUS is printed.
MCE_MESSAGE_CLASSES: tuple[tuple[str, str], ...] = (
    ("broadcast exception handler", "broadcast-timeout"),
    ("Processor context corrupt", "processor-context-corrupt"),
    ("unknown source", "unknown-source"),
    ("Action required", "memory-poison"),
)

# Tokens in human-facing text that differ between two crashes of one bug.
VOLATILE_TEXT: tuple[tuple[str, str], ...] = (
    (r"\[ *+\d++\.\d++\].*+", ""),  # another line's timestamp: the rest is interleaved
    (r"\[ *+(?:\d++\.?+\d*+)?+$", ""),  # one cut short where a title's text is cut ({0,100})
    (r"\bkworker/u?\d++:\d++H?\b", "kworker"),
    (r"\b0x[0-9a-fA-F]++\b", "X"),
    (r"\b[0-9a-fA-F]{8,}+\b", "X"),
    (r"(?<![\w.])\d++(?![\w])", "N"),
    (r"(?<=[a-zA-Z_.-])\d++(?!\w)", "N"),  # task names: syz-executor.3, cpu7
)

# --- userspace ----------------------------------------------------------------------------

# Rust's core and alloc crates, by their modules: `core::` alone is a namespace C++ programs
# use for their own code.
RUST_LIBRARY = (
    r"(?:core::(?:panicking|option|result|slice|str|cell|ptr|ops|fmt|iter|num|array|intrinsics|hint"
    r"|mem|char|convert|cmp|any|ffi|alloc|sync|hash|time)|alloc::(?:vec|raw_vec|alloc|boxed|string"
    r"|collections|rc|sync|slice|str|fmt|borrow))::"
)

# The C library's string and memory functions, by their C names (for USERSPACE_SKIP).
LIBC_STRING_FUNCTIONS = (
    r"(?:mem(?:cpy|move|set|cmp|chr|rchr|mem|ccpy|pcpy)|rawmemchr|str(?:n?len|n?cpy|n?cat|n?cmp|n?casecmp|r?chr"
    r"|chrnul|str|casestr|n?dup|tok(?:_r)?|c?spn|pbrk|sep|coll|xfrm)|stpn?cpy|wcs(?:n?len|n?cpy|n?cat|n?cmp"
    r"|r?chr|str)|wmem(?:cpy|move|set|cmp|chr)|bcopy|bzero|explicit_bzero)"
)

# Frames of the runtime rather than the program (matched at the start of a function name,
# leading "_" ignored).
USERSPACE_SKIP: tuple[str, ...] = (
    # signal delivery, abort, assertions and the C library's own checks
    "__restore_rt", "__kernel_rt_sigreturn", "_sigtramp", "__sigreturn", "sigreturn",
    "raise$", "__GI_raise", "gsignal", "abort$", "__GI_abort", "__pthread_kill",
    "pthread_kill", "__libc_message", "__fortify_fail", "__chk_fail", "__stack_chk_fail",
    "__assert_fail", "__assert_fail_base", "__GI___assert_fail", "__assert_perror_fail", "malloc_printerr",
    # unwinding and the C++ ABI (throw, terminate, pure virtual and bad casts)
    "_Unwind_", "__gxx_personality", "__cxa_", "__cxxabiv1::",
    # The standard libraries' own code, also where a template or generic of theirs is
    # instantiated in the program: libstdc++'s std:: and __gnu_cxx:: (a vector's at() that
    # throws out_of_range), Rust's std, core and alloc (their panics, unwrap and expect
    # failures, the abort), as a path or as the type a trait method is called on.
    "std::", "__gnu_cxx::", RUST_LIBRARY, rf"<(?:std::|{RUST_LIBRARY})",
    # ... and their traits' methods on a type with no path: a primitive, a slice, a generic
    # parameter (`<usize as core::slice::index::SliceIndex<[T]>>::index`, a Vec's index). A
    # program's own type is named with its crate's path, and the orphan rule keeps a program
    # from implementing the standard library's traits on the standard library's types.
    rf"<[^:<>]+ as (?:std::|{RUST_LIBRARY})",
    # ... and libstdc++'s as a raw symbol the demangler leaves unread (a `decltype(...)` in its
    # return type): an Itanium name in std (`St`, or its abbreviations `Sa`, `Ss`, ...) or in
    # __gnu_cxx, which a program may not declare its own code in
    r"(?<=_)Z(?:N[rVKRO]*)?S[tabsiod]", r"(?<=_)ZN[rVKRO]*9__gnu_cxx",
    # the C++ runtime's allocation and casts, linked into the program (-static-libstdc++)
    "operator new", "operator delete", "__dynamic_cast$",
    # Rust's panic machinery (std's own symbols are __rustc:: since 1.90) and a closure or fn
    # called through the Fn traits (v0 names)
    "__rustc::", "rust_panic", "__rust_start_panic", "__rust_begin_short_backtrace",
    "__rust_end_short_backtrace", r"<.* as core::ops::function::Fn",
    # The C library linked into the program (`gcc -static`): no module tells its code apart, so
    # by name, exactly (a program's own `copy` or `measure` is no namesake), the functions a bad
    # pointer or a corrupt heap faults in: strings and memory with their CPU variants
    # (`__memmove_avx_unaligned_erms`), the heap, locks, stdio, sorting, number parsing and the
    # math functions that store through a pointer, under any of their aliases (modf is also
    # `modff64` and `modff32x`: each reader picks one). A variant's name begins with `__`,
    # which C keeps for the implementation: a program's `memcpy_wrapper` is its own.
    LIBC_STRING_FUNCTIONS + "$", r"(?<=__)" + LIBC_STRING_FUNCTIONS + r"_\w+$",
    r"(?:int_(?:free|malloc|realloc|memalign)|malloc_consolidate|unlink_chunk|sysmalloc|tcache_\w+"
    r"|libc_(?:free|malloc|calloc|realloc|memalign)|c?free|malloc|calloc|realloc|reallocarray|memalign"
    r"|posix_memalign|aligned_alloc|valloc|pvalloc)$",
    r"pthread_(?:mutex|rwlock|cond|spin|barrier)_\w+$", r"pthread_(?:join|detach|once|[gs]etspecific)$",
    r"IO_\w+$", r"(?:v?[fsd]?n?w?printf|vfw?printf_internal|printf_buffer\w*|printf_fp\w*|f?w?puts|f?putw?c"
    r"|fwrite|fread|fgetw?s|fclose|fflush|fopen|fdopen|fseeko?|getline|getdelim|v?[fs]?scanf)$",
    r"(?:qsort(?:_r)?|msort_with_tmp|bsearch|[gs]etenv|unsetenv|ato(?:i|l|ll|f)"
    r"|strto(?:u?ll?|u?q|[dfl]|imax|umax)(?:_l)?(?:_internal)?)$",
    r"(?:modf|frexp|sincos|remquo|lgamma_r)(?:f|l|f\d+x?)?$",
    # thread and process start
    "backtrace$", "__libc_start_main", "__libc_start_call_main", "_start$",
    "start_thread", "clone$", "clone3$", "__clone",
    # Go's runtime
    "runtime.sigpanic", "runtime.raise", "runtime.crash", "runtime.dieFromSignal", "runtime.fatalpanic",
    "runtime.gopanic",
)

# Source files of the runtime, matched at the start of the path symbolication names from the
# debug info (registry/symbolication): code a header or a standard library puts in the
# program's own module, inlined or instantiated there. Glibc's fortified memcpy and strcpy
# (inlined from bits/string_fortified.h) call the C library's checks, which abort; a generic
# of Rust's std, core or alloc panics; an intrinsic loads through the program's pointer: the
# program's code that called them is guilty, as when they are read by name alone.
USERSPACE_SKIP_FILES: tuple[str, ...] = (
    r"/usr/include/",  # the C library's and the system's headers, libstdc++'s (c++/)
    r"/usr/lib/gcc/[^/]+/[^/]+/include/",  # GCC's own: intrinsics, stdarg
    r"/usr/lib/llvm-[^/]+/lib/clang/[^/]+/include/",  # clang's
    r"/rustc/[0-9a-f]+/library/",  # Rust's standard library, as rustc records its sources
)

# glibc's libraries: libc itself and those split from it before 2.34 (libpthread, libdl, librt,
# ...) or still apart (libm, libresolv, the NSS modules), its debugging preloads; as
# `libX.so.N` or, on older releases, `libX-2.NN.so`.
GLIBC_LIBRARIES = (
    "c|m|mvec|pthread|dl|rt|util|anl|resolv|BrokenLocale|nss_[a-z0-9]+|c_malloc_debug|memusage|pcprofile"
    "|SegFault"
)
# Modules of the runtime: a frame in them is never the program's own code, named or not
# (the C library and the loader are stripped of their local symbols on most distributions):
# a fault in one is the program's, through what it passed (a bad pointer to modf) or broke (a
# heap an allocator then trips on). Searched in the module's file name.
USERSPACE_SKIP_MODULES: tuple[str, ...] = (
    # the C library and the loaders: glibc's, musl's
    rf"^lib(?:{GLIBC_LIBRARIES})(?:\.so|-2\.)", r"^ld-linux", r"^ld-musl", r"^libc\.musl",
    # the C++ and compiler runtimes: GCC's and LLVM's
    r"^libstdc\+\+\.so", r"^libc\+\+(abi)?\.so", r"^libgcc_s\.so", r"^libunwind\.so",
    r"^lib(?:atomic|gomp|itm|quadmath)\.so",
    # the sanitizers' runtimes (their interceptors and reports): GCC's and clang's
    r"^lib(?:a|hwa|l|t|ub)san\.so", r"^libclang_rt\.",
    # allocators that replace the C library's heap (glibc's own is in libc)
    r"^libjemalloc\.so", r"^libtcmalloc\w*\.so", r"^libmimalloc\.so", r"^libtbbmalloc\.so",
    # the kernel's vDSO
    r"^linux-vdso\.so", r"^\[vdso\]$",
)

# Corruption labels, in the order a signature lists them; each needs its proof in the
# report's stack evidence (userspace.PROOFS).
USERSPACE_LABELS: tuple[str, ...] = ("stack-overflow", "return-to-null", "bad-return", "misaligned-stack")

# A stack overflow, proved by the fault (userspace.overflowed_its_stack): how far below a stack
# its guard reaches (Linux's stack_guard_gap, 256 pages, below a growing stack; a thread's
# guard page is a no-access mapping inside it), and how far from the stack pointer the faulting
# access may be (a push just below it, a frame's locals above it; with stack-clash protection
# the probes touch every page at the stack pointer).
STACK_GUARD_GAP = 1 << 20
FAULT_BELOW_SP, FAULT_ABOVE_SP = 1 << 12, 64 << 10
# Or by the runtime's own guard-page handler on the crashing stack, which aborts only after a
# guard page was hit: Rust's std (the module path moved under `pal` in Rust 1.79).
STACK_OVERFLOW_HANDLERS: tuple[str, ...] = (
    r"^std::sys::(?:pal::)?unix::stack_overflow::imp::signal_handler$",
)

# The failure mode a signal means, after the corruption labels.
SIGNAL_LABELS: dict[str, str] = {
    "SIGSEGV": "segfault", "SIGBUS": "bus-error", "SIGABRT": "abort", "SIGFPE": "fpe",
    "SIGILL": "illegal-instruction", "SIGTRAP": "trap", "SIGSYS": "bad-syscall",
}

# Register names: instruction and stack pointers per architecture.
IP_REGISTERS = ("rip", "eip", "pc", "ip")
SP_REGISTERS = ("rsp", "esp", "sp")

# Where the ABIs (x86-64 SysV, i386 SysV as compilers use it, AArch64) fix the stack's
# alignment: the CFA of a function called across an ABI boundary.
STACK_ALIGNMENT: tuple[tuple[str, int], ...] = (("rsp", 16), ("esp", 16), ("sp", 16))
