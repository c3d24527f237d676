"""A userspace core's stack as reporters send it, with any field changed."""

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


def stack(**changes) -> dict:
    base = {"executable": "/usr/bin/trainer", "signal": "SIGSEGV", "frames": FRAMES,
            "registers": {"rip": "0x555555560123", "rsp": "0x7fffffffe3a0"},
            "mappings": MAPPINGS}
    base = copy.deepcopy(base)
    base.update(changes)
    return base
