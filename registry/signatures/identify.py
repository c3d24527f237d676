"""The one seam between ingest and fingerprinting: a report in, a crash signature (or None) out."""

from __future__ import annotations

from typing import Any

from registry.fingerprint import ALGORITHM_VERSION, CrashSignature, analyse_report

__all__ = ["ALGORITHM_VERSION", "CrashSignature", "identify"]


def identify(console_log: str | None, stack: dict[str, Any] | None) -> CrashSignature | None:
    """The signature engine on a report's raw input: its console log first, else its stack."""
    return analyse_report(console_log, stack)
