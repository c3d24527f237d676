"""Userspace cores: read a Linux x86-64 ELF core (or a dumping process through /proc), unwind
and symbolize its crashing thread, and build the `source: userspace` report.

Standard library only; zipped into crashreg-report.pyz with the engine. The pieces, for the
two modes that use them (file mode: filemode.py; pipe mode builds on the same API):

    head, consumed = read_core_head(stream)         # ELF header, program headers, notes only
    memory = CoreMemory(path, head.segments)        # or ProcMemory(pid)
    analysis = analyse(head, memory, opener)        # file_opener(exe, path) / proc_opener(pid)
    report = userspace_report(analysis, CrashFacts(hostname=..., crashed_at=...))
"""

from .core import CoreHead, CoreMemory, Memory, ProcMemory, read_core_file, read_core_head
from .filemode import core_file_analysis, core_file_report
from .modules import file_opener, proc_opener
from .report import Analysis, CrashFacts, analyse, close, userspace_report

__all__ = ["Analysis", "CoreHead", "CoreMemory", "CrashFacts", "Memory", "ProcMemory", "analyse", "close",
           "core_file_analysis", "core_file_report", "file_opener", "proc_opener", "read_core_file",
           "read_core_head", "userspace_report"]
