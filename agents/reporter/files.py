"""The one atomic write: a reader (a kdump hook, a restarted watcher, the post-boot agent, a
running reporter) sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, data: bytes | str, durable: bool = False, mode: int | None = None) -> Path:
    """Write beside `path`, then rename over it. `durable`: fsync before the rename (a state
    that must survive a power cut, not only a crash of the writer). `mode`: the file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as out:
        out.write(data.encode() if isinstance(data, str) else data)
        if durable:
            out.flush()
            os.fsync(out.fileno())
    if mode is not None:
        temporary.chmod(mode)
    temporary.replace(path)
    return path
