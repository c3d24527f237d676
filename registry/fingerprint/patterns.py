"""The crash-report vocabulary as data: oops headers, frame skip lists, hardware classes.

Everything the console parser and the userspace labeller know about crashes lives here, so a
new kind of crash is a new table row, not a new branch. Regexes are matched against one line
that is already length-capped; they avoid nested quantifiers and use possessive ones where a
run could otherwise be re-scanned, so a hostile line cannot make them backtrack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Bump whenever a change here or in the parser can move a crash to a different fingerprint.
ALGORITHM_VERSION = 1

# How a pattern ranks when several appear in one log.
STRONG = 0  # a crash; the first one in the log is the crash
CONTINUATION = 1  # follow-up of another report (panic line, "Oops:"); a crash only if alone
WEAK = 2  # a symptom (corrected hardware errors, GPU Xid); the crash only when nothing else is


@dataclass(frozen=True)
class Oops:
    """One kind of kernel crash report and how to read it."""

    name: str  # stable rule name, shown in explanations as `kind_rule`
    kind: str  # stable slug, part of the fingerprint
    needle: str  # literal that must occur in the header line (fast prefilter)
    header: str  # regex searched in the stripped header line; named groups feed `title`
    title: str  # headline template over header/detail groups
    guilty: str = "rip"  # strategy that picks the guilty frame, see console.GUILTY_STRATEGIES
    skip: str = ""  # extra skip fragments, "|"-separated: substrings, or name prefixes if "^x"
    details: tuple[str, ...] = ()  # regexes searched in the report body for more title fields
    anchor: str = ""  # "lockdep" strategy: line after which the first "at:" frame is guilty
    begin: str = ""  # frames are read from the first line holding this (the stalled context)
    rank: int = STRONG
    by_function: bool = True  # False: the fingerprint ignores code (hardware: where the CPU was)
    classify: str = ""  # post-processor for hardware reports, see console.CLASSIFIERS


_FUNC = r"(?P<func>[A-Za-z_][\w.$]*+)"
_SRC = r"(?P<file>/?+(?:[\w.-]++/)*+[\w-]++\.[chS])\b"

# Literals the log is scanned for; every row's needle contains one of them. Few and distinct,
# because each costs one pass over the log.
TRIGGERS: tuple[str, ...] = (
    "BUG", "WARNING:", "INFO:", "UBSAN:", "general protection", "Unhandled fault",
    "nable to handle", "divide", "Internal error", "stack segment", "Alignment trap",
    "invalid opcode", "Oops", "LOCKUP", "panic", "PANIC", "Hardware Error", "EDAC", "AER:",
    "NETDEV", "Xid", "VFS:", "unregister_netdevice",
)

# Ordered: the first row whose needle and header match a line wins for that line.
OOPSES: tuple[Oops, ...] = (
    # --- sanitizers ---------------------------------------------------------------------
    Oops("kasan-invalid-free", "kasan", "KASAN:", r"BUG: KASAN: double-free or invalid-free",
         "KASAN: invalid-free", guilty="stack", skip="kmem_|slab_|kfree|vunmap|vfree|__free_"),
    Oops("kasan-access", "kasan", "KASAN:", r"BUG: KASAN: (?P<bug>[\w-]++)(?: in " + _FUNC + ")?",
         "KASAN: {bug} {access}", guilty="header",
         details=(r"\b(?P<access>Read|Write) of size",)),
    Oops("kmsan", "kmsan", "KMSAN:", r"BUG: KMSAN: (?P<bug>[\w-]++)(?: in " + _FUNC + ")?", "KMSAN: {bug}",
         guilty="header"),
    Oops("kcsan", "kcsan", "KCSAN:", r"BUG: KCSAN: (?P<bug>[\w-]++(?:: [\w-]++)?) in " + _FUNC,
         "KCSAN: {bug}", guilty="header"),
    Oops("kfence", "kfence", "KFENCE:", r"BUG: KFENCE: (?P<bug>[\w -]+?) in " + _FUNC,
         "KFENCE: {bug}", guilty="header"),
    Oops("ubsan", "ubsan", "UBSAN:", r"UBSAN: (?P<bug>[\w -]+?) in ", "UBSAN: {bug}", guilty="stack"),
    # --- faults -------------------------------------------------------------------------
    Oops("null-deref", "null-deref", "NULL pointer dereference",
         r"(?:BUG: |Unable to handle kernel |unable to handle kernel )"
         r"(?:unable to handle kernel |kernel |Kernel )?NULL pointer dereference",
         "BUG: kernel NULL pointer dereference"),
    Oops("paging-request", "paging-request", "nable to handle ",
         r"(?:BUG: )?[Uu]nable to handle (?:kernel paging request|page fault for address"
         r"|kernel access to user memory|kernel data access|kernel execute)",
         "BUG: unable to handle kernel paging request"),
    Oops("paging-request-old",
         "paging-request", "BUG: unable to handle kernel", r"BUG: unable to handle kernel",
         "BUG: unable to handle kernel paging request"),
    Oops("gpf", "gpf", "general protection fault", r"general protection fault",
         "general protection fault"),
    Oops("stack-segment",
         "stack-segment", "stack segment: ", r"^(?:Oops: )?stack segment: ", "stack segment fault"),
    Oops("divide-error", "divide-error", "divide", r"^(?:Oops: )?divide[ _]error: ", "divide error"),
    Oops("double-fault", "double-fault", "double fault", r"^PANIC: double fault", "PANIC: double fault",
         rank=CONTINUATION),
    Oops("stack-guard", "stack-guard", "stack guard page", r"BUG: (?:TASK |IRQ )?stack guard page was hit",
         "BUG: stack guard page was hit", guilty="overflow"),
    Oops("stack-guard-panic",
         "stack-guard", "stack guard page", r"^stack guard page: ", "BUG: stack guard page was hit",
         rank=CONTINUATION),
    Oops("arm-unhandled-fault",
         "unhandled-fault", "Unhandled fault:", r"^Unhandled fault: (?P<what>[\w ]+?) \(",
         "Unhandled fault: {what}"),
    Oops("arm-alignment-trap", "alignment-trap", "Alignment trap:", r"^Alignment trap:", "Alignment trap"),
    Oops("arm-internal-error", "internal-error", "Internal error:", r"^Internal error: (?P<what>[^:\[]*+)",
         "Internal error: {what}", rank=CONTINUATION),
    Oops("invalid-opcode",
         "invalid-opcode", "invalid opcode:", r"^(?:Oops: )?invalid opcode: ", "invalid opcode",
         rank=CONTINUATION),
    Oops("oops", "oops", "Oops", r"^Oops(?: - [\w/ ]+)?: ", "Oops", rank=CONTINUATION),
    # --- assertions ---------------------------------------------------------------------
    Oops("list-debug-bug", "list-corruption", "list_debug.c", r"kernel BUG at lib/list_debug\.c",
         "BUG: corrupted list", guilty="stack", skip="list_|_list_"),
    Oops("list-add-corruption", "list-corruption", "list_add corruption", r"list_add corruption",
         "BUG: corrupted list", guilty="stack", skip="list_|_list_"),
    Oops("list-del-corruption", "list-corruption", "list_del corruption", r"list_del corruption",
         "BUG: corrupted list", guilty="stack", skip="list_|_list_"),
    Oops("usercopy-bug", "bad-usercopy", "usercopy", r"kernel BUG at mm/usercopy\.c",
         "BUG: bad usercopy", guilty="stack", skip="usercopy|check_|copy_"),
    Oops("bug-at", "kernel-bug", "kernel BUG at ", r"kernel BUG at " + _SRC, "kernel BUG",
         guilty="rip"),
    Oops("bug-at-plain", "kernel-bug", "Kernel BUG", r"Kernel BUG (?:at )?", "kernel BUG", guilty="rip"),
    Oops("warn-debugobjects",
         "warning", "WARNING:", r"^WARNING: [^\n]*?lib/debugobjects\.c", "WARNING: ODEBUG bug",
         guilty="rip", skip="debug_|rcu|hrtimer_|timer_|work_|percpu_|kmem_|slab_|kfree"
         "|vunmap|vfree|free_|kobject_|queue_work"),
    Oops("warn-refcount", "warning", "WARNING:", r"^WARNING: [^\n]*?lib/refcount\.c", "WARNING: refcount bug",
         guilty="rip", skip="refcount|kobject_"),
    Oops("warn-lockdep", "warning", "WARNING:", r"^WARNING: [^\n]*?kernel/locking/lockdep\.c",
         "WARNING: locking bug", guilty="rip", skip="lock_sock|release_sock"),
    Oops("warn-usb-submit-urb",
         "warning", "usb_submit_urb", r"^WARNING: [^\n]*? usb_submit_urb", "WARNING: usb_submit_urb",
         guilty="rip", skip="usb_submit_urb|usb_start_wait_urb|usb_bulk_msg|usb_interrupt_msg"
         "|usb_control_msg"),
    Oops("warn-kobject", "warning", "WARNING:", r"^WARNING: [^\n]*?lib/kobject\.c", "WARNING: kobject bug",
         guilty="rip", skip="kobject_"),
    Oops("warn-proc-generic",
         "warning", "WARNING:", r"^WARNING: [^\n]*?fs/proc/generic\.c", "WARNING: proc registration bug",
         guilty="rip", skip="proc_"),
    Oops("warn-usercopy", "warning", "WARNING:", r"^WARNING: [^\n]*?mm/usercopy\.c", "WARNING: bad usercopy",
         guilty="rip", skip="usercopy|check_"),
    Oops("warn-kmalloc",
         "warning", "WARNING:", r"^WARNING: [^\n]*?mm/\S++ k\w?\w?alloc", "WARNING: kmalloc bug",
         guilty="rip", skip="kmalloc|kcalloc|kzalloc|krealloc|vmalloc|kvmalloc"),
    Oops("netdev-watchdog",
         "tx-timeout", "NETDEV WATCHDOG", r"NETDEV WATCHDOG: (?P<dev>\S++) \((?P<driver>[\w-]++)\)"
         r": transmit queue", "NETDEV WATCHDOG: transmit queue timed out [{driver}]",
         guilty="none", by_function=False),
    # --- lockdep (guilty = where the new lock is taken) --------------------------------
    Oops("lockdep-circular",
         "lockdep", "locking dependency detected", r"possible circular locking dependency",
         "possible deadlock", guilty="lockdep", anchor="is trying to acquire lock"),
    Oops("lockdep-irq-inversion",
         "lockdep", "lock inversion", r"possible irq lock inversion dependency detected",
         "possible deadlock", guilty="lockdep", anchor="just changed the state of lock"),
    Oops("lockdep-irq-unsafe-order",
         "lockdep", "lock order detected", r"(?:HARD|SOFT)IRQ-unsafe lock order detected",
         "possible deadlock", guilty="lockdep", anchor="is trying to acquire"),
    Oops("lockdep-recursive", "lockdep", "recursive locking", r"possible recursive locking detected",
         "possible deadlock", guilty="lockdep", anchor="is trying to acquire lock"),
    Oops("lockdep-inconsistent",
         "lockdep-inconsistent", "inconsistent lock state", r"inconsistent lock state",
         "inconsistent lock state", guilty="lockdep", anchor="takes"),
    Oops("lockdep-bad-unlock", "lockdep-bad-unlock", "bad unlock balance", r"bad unlock balance detected",
         "BUG: bad unlock balance", guilty="lockdep", anchor="is trying to release lock"),
    Oops("lockdep-held-freed", "lockdep-held-freed", "held lock freed", r"held lock freed",
         "BUG: held lock freed", guilty="lockdep", anchor="is freeing memory"),
    Oops("lockdep-still-held", "lockdep-still-held", "still has locks held", r"still has locks held",
         "BUG: still has locks held", guilty="lockdep", anchor="lock held by"),
    Oops("lockdep-return-user",
         "lockdep-return-user", "returning to user space", r"lock held when returning to user",
         "BUG: lock held when returning to user space", guilty="lockdep",
         anchor="leaving the kernel with locks still held"),
    Oops("lockdep-nonstatic", "lockdep-nonstatic", "non-static key", r"trying to register non-static key",
         "INFO: trying to register non-static key", guilty="stack", skip="stack|lock|IRQ"),
    Oops("lockdep-rcu", "lockdep-rcu", "suspicious RCU usage", r"suspicious RCU usage",
         "WARNING: suspicious RCU usage", guilty="stack",
         skip="rcu|kmem|slab|kmalloc|vmalloc|kcalloc|kzalloc|lockdep_rcu"),
    Oops("lockdep-nested", "lockdep-nested", "nested lock was not taken", r"nested lock was not taken",
         "WARNING: nested lock was not taken", guilty="stack"),
    Oops("lockdep-wait-context", "warning", "Invalid wait context", r"BUG: Invalid wait context",
         "WARNING: locking bug", guilty="lockdep", anchor="is trying to lock",
         skip="might_|lock_acquire"),
    Oops("slub-debug", "slub-debug", "INFO: ", r"^INFO: (?P<what>Freed|Allocated) in " + _FUNC,
         "INFO: {what}", guilty="header", rank=CONTINUATION),
    # --- warnings (after the specific WARNING rows above) -------------------------------
    Oops("warn-at",
         "warning", "WARNING:", r"^WARNING: (?:\[[^\]]*+\] )?(?:CPU: \d++ PID: \d++ )?(?:at )?" + _SRC
         + r"(?::\d++)? (?:at )?(?:\[<?[0-9a-f]++>?\] )?" + _FUNC,
         "WARNING", guilty="header"),
    Oops("warn-stack-regs-value",
         "warning-regs", "WARNING: kernel stack", r"^WARNING: kernel stack regs .*? has bad "
         r"'(?P<what>\w++)' value", "WARNING: kernel stack regs has bad '{what}' value",
         guilty="none", by_function=False),
    Oops("warn-stack-regs",
         "warning-regs", "WARNING: kernel stack", r"^WARNING: kernel stack (?:regs|frame pointer)",
         "WARNING: kernel stack regs has bad value", guilty="none", by_function=False),
    # --- atomicity / scheduling ---------------------------------------------------------
    Oops("sleep-in-atomic",
         "sleep-in-atomic", "sleeping function called", r"BUG: sleeping function called from",
         "BUG: sleeping function called from invalid context", guilty="stack",
         skip="might_sleep|might_resched|might_fault|might_lock|lock_|down|mutex_|rt_mutex"
         "|wait_for_completion"),
    Oops("sched-atomic", "sched-atomic", "scheduling while atomic", r"BUG: scheduling while atomic",
         "BUG: scheduling while atomic", guilty="stack",
         skip="schedule|preempt|cond_resched|mutex_|rt_mutex|down|wait_for|msleep|usleep"),
    Oops("preemptible", "preemptible", "in preemptible", r"BUG: using (?P<what>[\w]++\(\)) in preemptible",
         "BUG: using {what} in preemptible code", guilty="stack",
         skip="check_preemption_disabled|debug_smp_processor_id|this_cpu_|preempt"),
    Oops("spinlock-debug", "spinlock", "BUG: spinlock", r"BUG: spinlock (?P<what>lockup suspected|already "
         r"unlocked|recursion|bad magic|wrong owner|wrong CPU)", "BUG: spinlock {what}",
         guilty="stack", skip="spin_|do_raw_spin"),
    Oops("rwlock-debug", "rwlock", "BUG: rwlock", r"BUG: rwlock (?P<what>[\w ]+?)(?: on|$)",
         "BUG: rwlock {what}", guilty="stack", skip="rwlock|read_lock|write_lock|do_raw_"),
    # --- hangs ----------------------------------------------------------------------------
    Oops("soft-lockup", "soft-lockup", "soft lockup", r"BUG: soft lockup", "BUG: soft lockup", guilty="stall",
         skip="watchdog_timer_fn"),
    Oops("hard-lockup", "hard-lockup", "hard LOCKUP", r"(?:Watchdog detected|NMI watchdog:) hard LOCKUP",
         "watchdog: hard LOCKUP", guilty="stall"),
    Oops("hard-lockup-detected",
         "hard-lockup", "hard LOCKUP", r"detected hard LOCKUP", "watchdog: hard LOCKUP",
         guilty="stall"),
    Oops("rcu-stall", "rcu-stall", "rcu_", r"INFO: rcu_(?:preempt|sched|bh) (?:self-)?detected"
         r"(?: expedited)? stall", "INFO: rcu detected stall", guilty="stall", skip="rcu",
         begin="apic_timer_interrupt"),
    Oops("hung-task", "hung-task", "blocked for more than", r"^INFO: task [^\n]*? blocked for more than",
         "INFO: task hung", guilty="hung"),
    Oops("workqueue-lockup", "workqueue-lockup", "workqueue lockup", r"BUG: workqueue lockup",
         "BUG: workqueue lockup", guilty="none", by_function=False),
    Oops("task-cant-die", "task-cant-die", "can't die", r"^INFO: task [^\n]*? can't die for more than",
         "INFO: task can't die", guilty="stack",
         skip="schedule|wait|mutex_|down|rwsem|io_schedule|msleep"),
    # --- memory ---------------------------------------------------------------------------
    Oops("bad-page-state", "bad-page-state", "Bad page state", r"BUG: Bad page state", "BUG: Bad page state",
         guilty="frames", begin="page last allocated",
         skip="^post_alloc_hook|^get_page_from_freelist|^alloc|^folio|^page|^filemap|^free_"
         "|^bad_page|^release_pages|^put_page|^lru_|^shmem_alloc|^pagecache"),
    Oops("bad-page-map", "bad-page-map", "Bad page map", r"BUG: Bad page map", "BUG: Bad page map",
         guilty="stack", skip="print_bad_pte|zap_|unmap_|vm_normal_page"),
    Oops("bad-rss", "bad-rss", "Bad rss-counter", r"BUG: Bad rss-counter state",
         "BUG: Bad rss-counter state", guilty="none", by_function=False),
    Oops("kmemleak", "memory-leak", "memory leak", r"BUG: memory leak", "memory leak", guilty="stack",
         skip="kmemleak|kmalloc|kcalloc|kzalloc|vmalloc|mmap|kmem|slab|alloc|create_object"
         "|idr_get|list_lru_init|kasprintf|kvasprintf|pcpu_create|strdup|strndup|memdup"),
    Oops("slub-kmalloc-corruption",
         "slab-corruption", "BUG kmalloc-", r"^BUG kmalloc-\d++ \([^)]*+\): (?P<what>.{1,80})",
         "BUG: slab corruption: {what}", guilty="stack", skip="slab_|check_|free_|kfree|kmem"),
    Oops("oom-panic", "oom-panic", "Out of memory", r"Kernel panic - not syncing: (?P<why>(?:System is "
         r"deadlocked on memory|Out of memory)[^\n]{0,80})", "Kernel panic - not syncing: {why}",
         guilty="none", by_function=False),
    # --- filesystems / net ------------------------------------------------------------------
    Oops("dentry-in-use",
         "dentry-in-use", "still in use", r"BUG: Dentry \S++ ++still in use.*?\[(?P<func>unmount)",
         "BUG: Dentry still in use", guilty="header"),
    Oops("vfs", "vfs", "VFS: ", r"^VFS: (?P<what>Busy inodes after unmount|Close: file count is (?:zero|0))",
         "VFS: {what}", guilty="stack", skip="generic_shutdown|kill_|deactivate|cleanup_mnt"),
    Oops("netdev-unregister", "netdev-unregister", "unregister_netdevice: waiting for",
         r"unregister_netdevice: waiting for \S++ to become free",
         "unregister_netdevice: waiting for DEV to become free", guilty="none",
         by_function=False),
    # --- hardware -------------------------------------------------------------------------
    Oops("mce-exception", "machine-check", "Hardware Error]", r"\[Hardware Error\]: (?:CPU \d++: )?Machine "
         r"[Cc]heck(?: Exception)?:", "Machine check", guilty="none", by_function=False,
         classify="mce"),
    Oops("mce-panic", "machine-check", "achine check", r"Kernel panic - not syncing: (?:Fatal )?(?:local )?"
         r"[Mm]achine check", "Machine check", guilty="none", by_function=False, classify="mce"),
    Oops("mce-broadcast-timeout",
         "machine-check", "broadcast exception handler", r"Timeout: Not all CPUs entered "
         r"broadcast exception handler", "Machine check", guilty="none", by_function=False,
         classify="mce"),
    Oops("mce-bank", "machine-check", "Hardware Error]", r"\[Hardware Error\]: (?:CPU \d++: )?Machine "
         r"Check: \d++ Bank", "Machine check", guilty="none", by_function=False,
         classify="mce"),
    Oops("aer-fatal", "pcie-aer", "AER:", r"AER: (?:Multiple )?Uncorrect(?:ed|able) \(Fatal\) error "
         r"(?:message )?received",
         "PCIe AER", guilty="none", by_function=False, classify="aer"),
    Oops("edac-ue", "edac", "EDAC ", r"EDAC (?:\w++ )?MC\d++: \d++ (?P<sev>UE) (?P<what>[\w ]+?)(?: on|$)",
         "EDAC: uncorrected {what}", guilty="none", by_function=False),
    Oops("aer-corrected",
         "pcie-aer", "AER:", r"AER: (?:Multiple )?(?:Correct(?:ed|able)|Uncorrect(?:ed|able) "
         r"\(Non-Fatal\)) error (?:message )?received", "PCIe AER", guilty="none",
         by_function=False, classify="aer", rank=WEAK),
    Oops("edac-ce", "edac", "EDAC ", r"EDAC (?:\w++ )?MC\d++: \d++ (?P<sev>CE) (?P<what>[\w ]+?)(?: on|$)",
         "EDAC: corrected {what}", guilty="none", by_function=False, rank=WEAK),
    Oops("mce-logged",
         "machine-check", "Machine check events logged", r"Hardware Error\]: Machine check events "
         r"logged",
         "Machine check", guilty="none", by_function=False, classify="mce", rank=WEAK),
    Oops("gpu-xid", "gpu-xid", "NVRM: Xid", r"NVRM: Xid \([^)]*+\): (?P<xid>\d++)", "NVRM: Xid {xid}",
         guilty="none", by_function=False, rank=WEAK),
    # --- panics (after everything that may precede them in one report) -------------------
    Oops("stack-protector",
         "stack-corruption", "stack-protector", r"Kernel panic - not syncing: stack-protector: "
         r"Kernel stack is corrupted in: (?:(?:0x)?[0-9a-f]{8,}+\b|" + _FUNC + ")",
         "kernel panic: stack is corrupted", guilty="header", skip="stack_chk"),
    Oops("stack-end-corrupted",
         "stack-corruption", "corrupted stack end", r"Kernel panic - not syncing: corrupted "
         r"stack end", "kernel panic: corrupted stack end", guilty="stall",
         skip="schedule|retint_kernel|preempt_schedule"),
    Oops("panic-hard-lockup", "hard-lockup", "Hard LOCKUP", r"Kernel panic - not syncing: Hard LOCKUP",
         "watchdog: hard LOCKUP", guilty="stall", rank=CONTINUATION),
    Oops("panic-softlockup", "soft-lockup", "softlockup", r"Kernel panic - not syncing: softlockup",
         "BUG: soft lockup", guilty="stall", rank=CONTINUATION),
    Oops("panic-hung-task", "hung-task", "hung_task", r"Kernel panic - not syncing: hung_task",
         "INFO: task hung", guilty="hung", rank=CONTINUATION),
    Oops("panic", "panic", "Kernel panic - not syncing", r"Kernel panic - not syncing: ?(?P<why>.{0,120})",
         "Kernel panic - not syncing: {why}", guilty="stack", rank=CONTINUATION,
         by_function=False),
    Oops("bug-generic", "bug", "BUG: ", r"^BUG: (?P<what>[^\n]{1,100})", "BUG: {what}", guilty="stack"),
    Oops("bare-marker", "corrupted", ":", r"^(?P<what>BUG|WARNING|INFO):\s*+$", "{what}: corrupted report",
         guilty="stack", rank=CONTINUATION),
    Oops("trusty-assert", "trusty-assert", "ASSERT FAILED", r"trusty: panic .*?ASSERT FAILED at \([^)]*+\): "
         r"(?P<what>.{0,80})", "trusty: ASSERT FAILED: {what}", guilty="none",
         by_function=False),
    Oops("rust-panic", "rust-panic", "panicked at", r"panicked at (?P<what>.{0,120})", "Rust panic: {what}",
         guilty="stack", skip=r"_R\w*?panic|rust_begin_unwind|rust_panic|core\w*?panicking"),
)

# Kinds whose signature names a failing part rather than a bug in code.
HARDWARE_KINDS = frozenset({"machine-check", "edac", "pcie-aer", "gpu-xid"})
HARDWARE_LABEL = "hardware-error"

# Header fields that are free text and need normalising before they enter a title.
FREE_TEXT_FIELDS = frozenset({"why", "what"})

# Lines that contain a needle but are known not to be crashes.
IGNORED_LINES = re.compile(
    r"WARNING: /etc/ssh/moduli|WARNING: workqueue cpumask|INFO: lockdep is turned off"
    r"|INFO: Stall ended before state dump|INFO: NMI handler|took too long to run"
    r"|INFO: recovery required|BUG: no syscalls can create|INFO: no syscalls"
    r"|is not present in /proc/kallsyms|ODEBUG: Out of memory|_INFO::|Boot_DEBUG:"
    r"|Kernel panic - not syncing: Fatal exception in interrupt\s*$"
)

# Frames that are never the bug: reporting, tracing, locking, allocation, string helpers,
# scheduling and interrupt entry. Matched at the start of a name after leading underscores;
# a leading ".*" makes an entry match anywhere in the name.
SKIP_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # reporting and trap paths
    ("reporting", (
        "dump_stack", "show_stack", "show_regs", "show_trace", "print_", ".*printk", ".*printf",
        ".*panic", "warn_", "warn$", "assertfail", "phys_addr", "format_decode", ".*string",
        "pointer", "handle_overflow", "report_bug", "fixup_bug", "handle_bug",
        "do_error_trap", "do_trap", "do_invalid_op", "exc_", "asm_exc_", "invalid_op", "do_int3",
        "die", "oops_", "bad_area", "no_context", "page_fault_oops", "kernelmode_fixup",
        "do_page_fault", "do_user_addr_fault", "do_kern_addr_fault", "handle_page_fault",
        "spurious_kernel_fault", "do_general_protection", "general_protection", "do_divide_error",
        "do_double_fault", "handle_stack_overflow", "fail_dump", "should_fail", "bug_handler",
        "check_panic_on_warn", "nmi_cpu_backtrace", "nmi_trigger_cpumask_backtrace",
        "arch_trigger_cpumask_backtrace", "trigger_", "watchdog_", "__pfx_", "sched_show_task",
        "show_", "unwind_", "dump_backtrace", "arch_stack_walk", "stack_trace_", "save_stack",
    )),
    # sanitizers and debugging runtimes
    ("sanitizer", (
        ".*kasan", ".*kmsan", ".*kcsan", ".*ubsan", ".*kfence", "asan_", "msan_", "tsan_",
        "sanitizer", "check_memory_region", "check_memory_region_inline", "memory_is_",
        "print_address_description", "print_report", "kmem_cache_debug", ".*lockdep",
        ".*lock_class", "mark_lock", "mark_usage", "mark_held_locks", "check_noncircular",
        "check_prev_add", "validate_chain", "check_deadlock", "check_irq_usage", "hlock_class",
        ".*_indirect_thunk_", "perf_trace", "trace_", "kcov_",
        "debug_object", "timer_is_static_object", "work_is_static_object",
    )),
    # locking primitives
    ("locking", (
        "lock_acquire", "lock_release", "lock_is_held", "lock_class", "reacquire_held_locks",
        "raw_spin_", "spin_", "_raw_", "do_raw_", "queued_spin", "native_queued_spin",
        "pv_queued_spin", "read_lock", "write_lock", "read_unlock", "write_unlock", "mutex_",
        "rt_mutex", "down$", "down_", "up$", "up_read", "up_write", "rwsem_", "osq_lock",
        "osq_unlock", "lock_timer_base", "local_bh_", "preempt_count", "seqcount_",
        "refcount_", "atomic_", "arch_atomic", "kref_",
    )),
    # allocators
    ("allocator", (
        ".*kmalloc", "kzalloc", "kcalloc", "krealloc", "kmem_cache_", "kvmalloc", "kvfree", "kfree",
        "slab_", "slub_", "__slab", "new_slab", "allocate_slab", "alloc_debug_processing",
        "free_debug_processing", "setup_object", "vmalloc", "vfree", "vzalloc", "vmap",
        "__vmalloc", "alloc_pages", "__alloc_pages", "get_free_pages", "free_pages",
        "free_unref_page", "memdup", "kmemdup", "kstrdup",
    )),
    # string and copy helpers
    ("string-copy", (
        "memcpy", "memmove", "memset", "memcmp", "memchr", "strcmp", "strncmp", "strcpy",
        "strncpy", "strlcpy", "strscpy", "strlen", "strnlen", "strchr", "strrchr", "strstr",
        "strnstr", "copy_to_user", "copy_from_user", "_copy_to_user", "_copy_from_user",
        "copy_user", "raw_copy_", "rep_movs", "clear_user", "put_user", "get_user",
        "might_fault", "might_sleep", "might_resched", "check_object_size",
        "kasprintf", "kvasprintf",
    )),
    # list helpers
    ("list-helper", (
        "list_add", "list_del", "list_replace", "list_move", "list_splice", "hlist_", "rb_",
    )),
    # core APIs that warn or wait on behalf of their caller: the caller is the bug
    ("core-api", (
        "rollback_registered", "unregister_netdev", "device_del", "device_unregister",
        "device_destroy", "device_add", "kobject_del", "kobject_put", "kobject_uevent",
        "add_uevent_var", "get_device_parent", "sysfs_remove", "device_remove_file",
        "del_timer", "flush_work", "cancel_work_sync", "cancel_delayed_work_sync",
        "drain_workqueue", "destroy_workqueue", "kthread_stop", "finish_wait",
        "try_to_grab_pending", "wait_for_completion", "usb_kill_urb", "usb_kill_anchored_urbs",
        "cancel_work_timer", "hwrng_unregister", ".*sysfs_remove", "klist_", "skb_put$",
        "skb_push$", "skb_over_panic", "skb_under_panic", "hex_dump", "print_hex_dump", "crc",
        "dev_info", "dev_warn", "dev_err", "dev_notice", "dev_printk", "dev_alert", "dev_crit",
        "dev_emerg", "copy_to_iter", "copy_from_iter", "copy_page_to_iter", "copy_page_from_iter",
        "alloc_page", "divide_error", "error_entry", "asm_call_", "call_on_stack",
        "call_on_irqstack", "run_on_irqstack", "arch_timer_", "gic_handle_irq",
        "handle_domain_irq", "handle_percpu_devid_irq", "el1_irq", "el1h_64_irq", "el1_interrupt",
        "do_DataAbort", "do_translation_fault", "do_bad_area", "do_kernel_fault", "do_mem_abort",
        "el1_abort", "el1_da", "el1h_64_sync", "el1_sync", "do_sea", "die_kernel_fault",
        "do_alignment", ".*_noprof", ".*del_timer", "timer_delete", "do_tag_check_fault",
        "do_tag_recovery", "el1_dbg", "jhash", "devres_", "unregister_client", "i2c_del_adapter",
        "device_for_each_child", ".*wake_up", "kobject_", "generic_handle_irq",
        "generic_handle_domain_irq", "handle_irq_desc", "irq_svc", "irq_usr", "device_release",
        "rhashtable_", "sk_stop_timer", "sk_reset_timer", "iput$", "evict$", ".*dput$",
        "mark_buffer_dirty", "unlock_page", "folio_unlock", "ida_free", "ida_alloc", "idr_",
        "usb_control_msg", "usb_submit_urb", "usb_hcd_submit_urb", "dummy_urb_enqueue",
    )),
    # scheduler and irq entry
    ("scheduling-irq", (
        "schedule$", "schedule_", "context_switch", "finish_task_switch", "switch_to",
        "irq_exit", "do_IRQ", "common_interrupt", "asm_common_interrupt", "sysvec_",
        "asm_sysvec_", ".*apic_timer_interrupt", "tick_", "handle_irq",
        "handle_edge_irq", "handle_fasteoi_irq", "handle_irq_event", "irq_exit_rcu",
        "do_softirq", "handle_softirqs", "softirq", "ret_from_intr", "irq_enter",
        "hrtimer_interrupt", "hrtimer_run_queues", "__hrtimer_run_queues", "tick_sched_",
        "update_process_times", "rcu_sched_clock_irq", "rcu_check_callbacks", "rcu_dump_",
        "print_cpu_stall", "check_cpu_stall", "rcu_pending",
        "entry_SYSCALL", "entry_SYSENTER", "ret_from_fork", "kthread$",
        "nmi_handle", "default_do_nmi", "exc_nmi", "do_nmi", "end_repeat_nmi",
        "watchdog_overflow_callback", "perf_event_overflow", "handle_pmi_common",
        "intel_pmu_handle_irq", "perf_event_nmi_handler", "perf_ibs_nmi_handler",
        "native_safe_halt", "native_write_msr", "native_read_msr", "delay_tsc", "udelay",
        "cpu_relax",
    )),
)
GENERIC_SKIP: tuple[str, ...] = tuple(entry for _, entries in SKIP_CLASSES for entry in entries)

# Stalls loop across many functions; the bug is named after the frame *above* the first of
# these dispatch points (the driver's ioctl, the protocol's handler), not the top of stack.
# Entries match anywhere in a name, or at its start when they begin with "^".
STALL_ANCHORS: tuple[str, ...] = (
    "process_one_work", "do_syscall_", "do_fast_syscall_", "sysenter_dispatch",
    "tracesys_phase2", ".*netif_receive_skb", ".*do_softirq", "call_timer_fn", ".*_run_timers",
    "run_timer_softirq", "run_ksoftirqd", "smpboot_thread_fn", "kthread$", "start_secondary",
    "ksys_ioctl", "compat_ioctl", "tasklet_action", "netlink_dump", "rtnetlink_rcv_msg",
    "genl_family_rcv_msg", "genl_rcv_msg", "netlink_rcv_skb",
    "cpu_startup_entry", "ret_from_fork", "vfs_write", "vfs_read", "vfs_iter_read",
    "vfs_iter_write", "do_iter_read", "do_iter_write", ".*vfs_ioctl", "blkdev_driver_ioctl",
    "blkdev_ioctl", "call_read_iter", "call_write_iter", "do_iter_readv_writev", "call_mmap",
    "mmap_region", "do_mmap", "do_dentry_open", "vfs_open", "sock_sendmsg", "sock_recvmsg",
    "sock_release", "sys_setsockopt", "kernel_setsockopt", "sock_common_setsockopt",
    "sys_listen", "kernel_listen", "sk_common_release", "sock_mmap", "sys_accept",
    "kernel_accept", "sock_do_ioctl", "sock_ioctl", "compat_sock_ioctl", "nfnetlink_rcv_msg",
    r"^(?:k?sys_)?(?:socketpair|connect|ioctl)$",  # syscall wrappers, prefixes stripped
    "^do_fault$", "handle_mm_fault", "do_page_fault", "^page_fault$", "^fput$", "task_work_run",
    "exit_to_usermode", "exit_to_user_mode",
)

# Syscall wrappers trimmed from a stall's representative frame.
SYSCALL_PREFIXES = re.compile(r"^(?:__x64_|__ia32_|__arm64_|__se_sys_|__do_sys_|SYSC_|SyS_"
                              r"|compat_SYSC_|compat_SyS_)")

# Stalls whose top frame waits on other CPUs: one bucket whichever variant is on top.
STALL_BUCKETS: tuple[tuple[str, str], ...] = (("smp_call_function", "smp_call_function"),)

# Hung tasks: hangs on these are symptoms of one shared problem; group them by the anchor.
HUNG_ANCHORS: tuple[tuple[str, str], ...] = (
    ("rtnl_lock", "rtnl_lock"),
    ("synchronize_rcu", "synchronize_rcu"),
    ("synchronize_srcu", "synchronize_rcu"),
    ("synchronize_net", "synchronize_rcu"),
    ("synchronize_sched", "synchronize_rcu"),
)
HUNG_SKIP: tuple[str, ...] = (
    ".*sched", ".*_lock", ".*_slowlock", ".*down", ".*completion", ".*kthread", ".*wait",
    ".*synchronize", ".*context_switch", ".*switch_to", ".*cancel_delayed_work", ".*rwsem",
    ".*io_schedule", ".*bit_wait", ".*folio_wait", ".*wait_on_page",
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
    (r"\bkworker/u?\d++:\d++H?\b", "kworker"),
    (r"\b0x[0-9a-fA-F]++\b", "X"),
    (r"\b[0-9a-fA-F]{8,}+\b", "X"),
    (r"(?<![\w.])\d++(?![\w])", "N"),
    (r"(?<=[a-zA-Z_.-])\d++(?!\w)", "N"),  # task names: syz-executor.3, cpu7
)

# Function-name suffixes compilers add to clones; one function, one name.
CLONE_SUFFIX = re.compile(r"(?:\.(?:isra|constprop|part|cold|lto_priv|llvm|localalias|specialized)"
                          r"(?:\.\d++)?+|\.\d++)++$")

# --- userspace ----------------------------------------------------------------------------

# Frames of the runtime rather than the program: signal delivery, abort, unwinding.
USERSPACE_SKIP: tuple[str, ...] = (
    "__restore_rt", "__kernel_rt_sigreturn", "_sigtramp", "__sigreturn", "sigreturn",
    "raise$", "__GI_raise", "gsignal", "abort$", "__GI_abort", "__pthread_kill",
    "pthread_kill", "__libc_message", "__fortify_fail", "__chk_fail", "__stack_chk_fail",
    "__assert_fail", "__assert_fail_base", "__GI___assert_fail", "malloc_printerr",
    "_Unwind_", "__gxx_personality", "__cxa_throw", "__cxa_rethrow", "std::terminate",
    "__cxxabiv1::", "__gnu_cxx::__verbose_terminate_handler", "std::__terminate",
    "backtrace$", "__libc_start_main", "__libc_start_call_main", "_start$", "start_thread",
    "clone$", "clone3$", "__clone", "runtime.sigpanic", "runtime.raise", "runtime.crash",
    "runtime.dieFromSignal", "runtime.fatalpanic", "runtime.gopanic", "core::panicking::",
    "std::panicking::", "rust_panic", "__rust_start_panic", "__rust_begin_short_backtrace",
)

USERSPACE_LABELS = ("return-to-null", "bad-return", "misaligned-stack")

# Register names: instruction and stack pointers per architecture.
IP_REGISTERS = ("rip", "eip", "pc", "ip")
SP_REGISTERS = ("rsp", "esp", "sp")

# The ABIs (x86-64 SysV, i386 SysV as compilers use it, AArch64) keep the stack pointer
# 16-byte aligned in function bodies; SSE spills fault when it is not.
STACK_ALIGNMENT: tuple[tuple[str, int], ...] = (("rsp", 16), ("esp", 16), ("sp", 16))
