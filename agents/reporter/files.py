"""The one atomic write: a reader (a kdump hook, a restarted watcher, the post-boot agent, a
running reporter) sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_file(path: Path, durable: bool = False, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file to write beside `path`, renamed over it once the block ends (removed if the block
    raises). `durable`: fsync before the rename (a state that must survive a power cut, not
    only a crash of the writer). `mode`: the file's mode, from its creation on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    created = 0o666 if mode is None else mode
    try:
        with open(temporary, "wb", opener=lambda name, flags: os.open(name, flags, created)) as out:
            yield out
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if mode is not None:
            temporary.chmod(mode)
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


def write_atomically(path: Path, data: bytes | str, durable: bool = False, mode: int | None = None) -> Path:
    """`data` into `path`, atomically (atomic_file)."""
    with atomic_file(path, durable, mode) as out:
        out.write(data.encode() if isinstance(data, str) else data)
    return path
