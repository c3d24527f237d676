"""The local symbol cache's size: past its cap, the least recently used files go first.

The cache (CRASHREG_SYMBOL_CACHE_DIR) holds copies of the store's files (when the store is not
a local directory), servers' answers and sources, and symbolication's symcaches: all of it can
be made again from the store or the servers. A file's last use is its mtime, which readers
refresh (`used`). Each process makes room after it adds a file; two doing so at once only
delete a little more than needed. A file deleted while another process has it open or mapped
stays readable there.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress
from pathlib import Path

IN_USE_S = 60  # a file used this recently stays, whatever the cap: it is being read or was just made


def used(*paths: Path) -> None:
    """Mark files as just used (a missing one is no error: another process made room)."""
    for path in paths:
        with suppress(OSError):
            os.utime(path)


def _files(root: Path) -> list[tuple[float, int, Path]]:
    """Every file under `root`: (last use, size, path)."""
    found = []
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            try:
                facts = path.stat()
            except OSError:  # gone meanwhile
                continue
            found.append((facts.st_mtime, facts.st_size, path))
    return found


def make_room(root: Path, max_bytes: int) -> int:
    """Delete the least recently used files under `root` until it holds at most `max_bytes`
    (0: no cap), none used within IN_USE_S; the bytes freed. Directories left empty go too."""
    if max_bytes <= 0 or not root.is_dir():
        return 0
    files = sorted(_files(root))
    excess = sum(size for _, size, _ in files) - max_bytes
    freed, in_use = 0, time.time() - IN_USE_S
    for last_used, size, path in files:
        if freed >= excess or last_used > in_use:
            break
        path.unlink(missing_ok=True)
        freed += size
        for parent in path.parents:
            if parent == root:
                break
            try:
                parent.rmdir()
            except OSError:  # not empty
                break
    return freed
