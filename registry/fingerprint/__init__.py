"""The signature engine: one fingerprint per bug, from kernel console logs and userspace stacks.

Pure functions over plain data, standard library only: the same code runs in the registry's
ingest path and, built into dist/crashreg-report.pyz by agents/build_reporter.py (`make
reporter`), in the reporter on a crashing machine.

The package imports its parts on first use (PEP 562): a core handler that only needs
`registry.fingerprint.demangle` does not pay for the console parser's patterns.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .signature import (
        ALGORITHM_VERSION,
        CrashSignature,
        ExplanationRecord,
        analyse_console_log,
        analyse_report,
        analyse_stack,
    )

__all__ = ["ALGORITHM_VERSION", "CrashSignature", "ExplanationRecord", "analyse_console_log",
           "analyse_report", "analyse_stack"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(import_module(".signature", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
