"""A drgn script: what to read first in a kernel dump (run as AGENTS.md says, in the bundle):

    drgn -q -c dumps/<event>-<capture>.vmcore -s debug/<kernel_version>/vmlinux inspect-dump.py [LINES]

Prints the kernel release, the panicking task and its stack, and the last LINES (default 100)
lines of the kernel log. Debug info of modules in debug/<kernel_version>/modules/ (what setup.sh
fetched from the registry's debuginfod by the build-ids a DPU report named, or .ko files with
debug info put there by hand) is loaded too, so their frames have names.
"""

import sys
from pathlib import Path

from drgn.helpers.linux.printk import get_dmesg

prog = globals()["prog"]  # drgn runs this with the program opened on the dump
release = prog["init_uts_ns"].name.release.string_().decode()
modules = sorted((Path(__file__).resolve().parent / "debug" / release / "modules").glob("*.ko"))
if modules:
    prog.load_debug_info([str(module) for module in modules])
print(f"kernel release: {release}")
thread = prog.crashed_thread()
task = thread.object
print(f"panicking task: pid {task.pid.value_()} ({task.comm.string_().decode()})")
print(thread.stack_trace())
lines = int(sys.argv[1]) if len(sys.argv) > 1 else 100  # an x86 oops with its trace: ~60
print(f"kernel log, last {lines} lines:")
print("\n".join(get_dmesg(prog).decode("utf-8", "replace").splitlines()[-lines:]))
