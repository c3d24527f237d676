"""Symcaches: a debug file's functions, inlined calls and source lines, looked up by address.

Made with Sentry's `symbolic` (chosen by measurement, bench/README.md "Symbolication"): a
symcache is built once per build-id from the ELF/DWARF debug file (seconds for 100 MB of
DWARF) and then opened by mmap, so a lookup costs microseconds and a process holds no parsed
DWARF. Each symcache is a file of its own under the registry's symbol cache, written
atomically; beside it, the image base its addresses are relative to (symbolic counts from the
ELF's first PT_LOAD, the link-time offsets in a report count from 0).
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import symbolic

from registry.build_ids import BUILD_ID
from registry.symbols.cache import used

PT_LOAD = 1
PAGE = 0x1000
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class SourceFrame:
    """One function at an address: the innermost inlined call first, the real function last."""

    symbol: str  # as the debug info names it (mangled for C++ and Rust)
    file: str | None
    line: int | None
    inlined: bool  # called inline: the next SourceFrame is its caller, at the same address


def image_base(path: Path) -> int:
    """The lowest PT_LOAD address of an ELF file (0 for a PIE or a shared object), page-aligned:
    what symbolic's addresses are relative to."""
    with path.open("rb") as elf:
        head = elf.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # ELFCLASS64
            raise ValueError(f"{path} is not a 64-bit ELF file")
        order = "<" if head[5] == 1 else ">"
        phoff, = struct.unpack_from(order + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
        elf.seek(phoff)
        table = elf.read(phentsize * phnum)
    loads = [struct.unpack_from(order + "IIQQ", table, at * phentsize)
             for at in range(phnum)]
    addresses = [vaddr for kind, _, _, vaddr in loads if kind == PT_LOAD]
    return (min(addresses) & ~(PAGE - 1)) if addresses else 0


def meta_path(symcache: Path) -> Path:
    """The file beside a symcache holding its image base and architecture."""
    return symcache.with_name(symcache.name + ".json")


class Recent(Generic[K, V]):
    """The `size` most recently used values by key, shared by threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, which: Callable[[K], bool]) -> None:
        with self._lock:
            for key in [key for key in self._items if which(key)]:
                del self._items[key]


class Symcaches:
    """The symcaches under `directory`, one per build-id: the few most used held open, and the
    answers to the addresses most asked (a crash storm asks the same few, report after report)."""

    def __init__(self, directory: Path, held: int = 128, answers: int = 65536,
                 made: Callable[[], object] = lambda: None) -> None:
        self.directory = directory
        self.made = made  # told after a symcache is written (the cache makes room)
        self._open: Recent[str, tuple[symbolic.SymCache, int]] = Recent(held)
        self._answers: Recent[tuple[str, int], tuple[SourceFrame, ...]] = Recent(answers)

    def path(self, build_id: str) -> Path:
        if not BUILD_ID.fullmatch(build_id):
            raise ValueError(f"not a build-id: {build_id[:140]!r}")
        return self.directory / build_id[:2] / f"{build_id}.symc"

    def has(self, build_id: str) -> bool:
        path = self.path(build_id)
        return path.is_file() and meta_path(path).is_file()

    def build(self, build_id: str, debug_file: Path) -> bool:
        """Make the build-id's symcache from its debug file (atomically: a reader sees all of
        it or none); False when the file holds no function of that build-id."""
        target = self.path(build_id)
        archive = symbolic.Archive.open(str(debug_file))
        objects = [obj for obj in archive.iter_objects() if (obj.code_id or "") == build_id]
        if not objects:
            return False
        cache = objects[0].make_symcache()
        target.parent.mkdir(parents=True, exist_ok=True)
        meta = {"image_base": image_base(debug_file), "arch": cache.arch,
                "lines": "debug" in objects[0].features}
        for final, write in ((meta_path(target), lambda f: f.write(json.dumps(meta).encode())),
                             (target, cache.dump_into)):
            partial = final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}")
            with partial.open("wb") as out:
                write(out)
            partial.replace(final)
        self.forget(build_id)
        self.made()
        return True

    def forget(self, build_id: str) -> None:
        """Drop this process's open symcache and answers of the build-id (its file was made again)."""
        self._open.forget(lambda key: key == build_id)
        self._answers.forget(lambda key: key[0] == build_id)

    def lines(self, build_id: str) -> bool | None:
        """Whether the build-id's symcache was made from DWARF (source lines) rather than a symbol
        table alone (False too for one made before that was noted); None: there is none."""
        try:
            return bool(json.loads(meta_path(self.path(build_id)).read_text()).get("lines", False))
        except (OSError, ValueError, AttributeError):
            return None

    def opened(self, build_id: str) -> tuple[symbolic.SymCache, int] | None:
        """The build-id's symcache and image base, opened (mmap) once and kept while used."""
        found = self._open.get(build_id)
        if found is not None:
            return found
        path = self.path(build_id)
        try:
            meta = json.loads(meta_path(path).read_text())
            found = (symbolic.SymCache.open(str(path)), int(meta["image_base"]))
        except (OSError, ValueError, KeyError, symbolic.SymbolicError):
            return None
        used(path, meta_path(path))
        self._open.put(build_id, found)
        return found

    def lookup(self, build_id: str, address: int) -> tuple[SourceFrame, ...] | None:
        """What the debug info says is at `address` (link-time, as a report's `offset`):
        None when there is no symcache for the build-id, () when no function is there."""
        answer = self._answers.get((build_id, address))
        if answer is None:
            answer = self._looked_up(build_id, address)
            if answer is not None:
                self._answers.put((build_id, address), answer)
        return answer

    def _looked_up(self, build_id: str, address: int) -> tuple[SourceFrame, ...] | None:
        found = self.opened(build_id)
        if found is None:
            return None
        cache, base = found
        if address < base:
            return ()
        try:
            locations = cache.lookup(address - base)
        except symbolic.SymbolicError:  # a damaged symcache names nothing rather than fail a report
            return ()
        return tuple(SourceFrame(symbol=location.symbol, file=location.full_path,
                                 line=location.line or None, inlined=at < len(locations) - 1)
                     for at, location in enumerate(locations))
