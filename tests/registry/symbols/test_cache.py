"""The local symbol cache within its cap: the least recently used files go first, never one
used within the last minute, and the directories they leave empty go with them."""

from __future__ import annotations

import os
import time
from pathlib import Path

from registry.symbols.cache import make_room, used

DAY = 86400


def cached(root: Path, name: str, size: int, days_ago: float) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    then = time.time() - days_ago * DAY
    os.utime(path, (then, then))
    return path


def test_the_least_recently_used_files_go_until_the_cache_is_within_its_cap(tmp_path: Path) -> None:
    oldest = cached(tmp_path, "aa11/debuginfo", 400, days_ago=30)
    source = cached(tmp_path, "aa11/sources/src/main.c", 100, days_ago=20)
    symcache = cached(tmp_path, "symcache/bb/bb22.symc", 300, days_ago=10)
    fresh = cached(tmp_path, "cc33/debuginfo", 500, days_ago=1)

    assert make_room(tmp_path, 0) == 0 and make_room(tmp_path, 2000) == 0  # no cap; within it
    assert make_room(tmp_path, 800) == 500  # 1,300 bytes held: the two oldest go
    assert not oldest.exists() and not source.exists() and not (tmp_path / "aa11").exists()
    assert symcache.exists() and fresh.exists()

    used(symcache)  # read just now: the older one goes instead
    assert make_room(tmp_path, 400) == 500
    assert symcache.exists() and not fresh.exists() and not (tmp_path / "cc33").exists()


def test_a_file_used_within_the_minute_stays_whatever_the_cap(tmp_path: Path) -> None:
    just_made = cached(tmp_path, "dd44/debuginfo", 1000, days_ago=0)
    older = cached(tmp_path, "ee55/debuginfo", 10, days_ago=2)
    assert make_room(tmp_path, 1) == 10
    assert just_made.exists() and not older.exists()
    used(tmp_path / "gone-meanwhile")  # another process made room first: no error
