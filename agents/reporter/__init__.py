"""The reporters' toolkit: small modules, each with one reason to change, that the commands
(agents/crashreg_report.py), the kernel log watcher and pstore reader (agents/kernellog), the
core handler (agents/coredump) and the DPU agent (agents/dpu) import. Standard library only.

    log       the log line            config    the one configuration (and table of defaults)
    files     the one atomic write    report    skeleton, hostname, time format, console log
    client    HTTP to the registry    spool     bodies kept for a resend or a replay
    bundle    the offline bundle      decide    the capture decision and kdump's view of it
    captures  captures recorded       upload    a dump's upload to the dump store
    kernel    the crash kernel's report and core collector
    postboot  the post-boot resend
    elf       ELF64 headers and notes   vmcoreinfo  a vmcore's VMCOREINFO (release, build-id)
    debuginfod  debug info by build-id from debuginfod servers

Modules are imported where they are needed: a core handler's time to its answer is mostly
imports (bench/README.md, core handler).
"""

EXIT_DUMP = 0
EXIT_SKIP = 10
EXIT_UNSENT = 3
EXIT_NO_DEBUG_INFO = 4  # the DPU agent: no debug info for the host's kernel, nothing reported
EXIT_UNREADABLE = 5  # the DPU agent: the host's memory is not a core drgn opens, nothing reported
