"""A userspace core's stack as reporters send it, with any field changed, and the evidence a
core reader adds for each failure mode."""

from __future__ import annotations

import copy

MAPPINGS = [
    {"start": "0x555555554000", "end": "0x555555600000", "perms": "r-xp", "path": "/usr/bin/trainer"},
    {"start": "0x7ffff7a00000", "end": "0x7ffff7bc0000", "perms": "r-xp",
     "path": "/usr/lib/x86_64-linux-gnu/libc.so.6"},
    {"start": "0x7ffff7dc0000", "end": "0x7ffff7de0000", "perms": "rw-p", "path": "[heap]"},
]
FRAMES = [
    {"function": "__restore_rt", "module": "libc.so.6", "offset": "0x42520"},
    {"function": "raise", "module": "libc.so.6"},
    {"function": "abort", "module": "libc.so.6"},
    {"function": "nccl_proxy_progress.isra.0", "module": "libnccl.so.2", "offset": "0x1a2b"},
    {"function": "proxy_service", "module": "libnccl.so.2"},
    {"function": "start_thread", "module": "libc.so.6"},
]
# A call the returning function made: its return address, left in the red zone.
CALL_INTO_SCHEDULER = {"offset": -40, "value": "0x7ffff7d01234", "function": "nccl_schedule",
                       "module": "/usr/lib/libnccl.so.2", "call": True}
CALL_INTO_CALLER = {"offset": 0, "value": "0x7ffff7d05678", "function": "proxy_service",
                    "module": "/usr/lib/libnccl.so.2", "call": True}


def stack(**changes) -> dict:
    base = {"executable": "/usr/bin/trainer", "signal": "SIGSEGV", "frames": FRAMES,
            "registers": {"rip": "0x555555560123", "rsp": "0x7fffffffe3a0"},
            "mappings": MAPPINGS}
    base = copy.deepcopy(base)
    base.update(changes)
    return base


def evidence(**changes) -> dict:
    """An ordinary fault's evidence: pc in code, SEGV_MAPERR, nothing popped that matters."""
    base = {"si_code": 1, "si_addr": "0x0", "pc_perms": "r-xp", "pc_bytes": "8b0083c0015dc3",
            "pc_entry": False, "cfa": "0x7fffffffe3b0",
            "slots": [{"offset": -8, "value": "0x7fffffffe3c0"}, CALL_INTO_CALLER]}
    base.update(changes)
    return base


def returned_to(pc: str, perms: str, slot_value: str | None = None) -> dict:
    """A stack whose `ret` popped `slot_value` (default: the pc) into a mapping with `perms`."""
    slots = [{"offset": -8, "value": slot_value or pc}, CALL_INTO_SCHEDULER,
             {"offset": 0, "value": "0x1"}]
    return stack(registers={"rip": pc, "rsp": "0x7fffffffe3a0"},
                 frames=[{"address": pc}, *FRAMES[3:]],
                 evidence=evidence(si_addr=pc, pc_perms=perms, pc_bytes=None, cfa=None, slots=slots))
