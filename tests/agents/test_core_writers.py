"""The pipe handler's pieces on their own: the core_pattern line, its values, the sinks' caps,
holes and compression, and how a bounded core splits the original mappings."""

from __future__ import annotations

import gzip
import lzma
import os
from pathlib import Path

import pytest

from agents.coredump.core import CoreHead, FileMapping, Thread
from agents.coredump.pipe import CORE_PATTERN, SPECIFIERS, Dumping
from agents.coredump.writers import PAGE, DirectorySink, Limits, OverLimit, capture_key_of, pieces
from agents.reporter.elf import PF_R, PF_W, PT_LOAD, Segment

UNCAPPED = 1 << 40


def test_the_core_pattern_line_fits_the_kernels_limit_and_passes_every_specifier() -> None:
    assert len(CORE_PATTERN) < 128  # CORENAME_MAX_SIZE, the terminating NUL included
    assert CORE_PATTERN.split()[-len(SPECIFIERS) :] == [f"%{s}" for s in SPECIFIERS]


def test_the_values_are_named_by_their_specifiers_and_expand_a_chained_command() -> None:
    dumping = Dumping.from_argv(
        ["4242", "4243", "11", "1764633600", "0", "1000", "100", "1", "web-7", "!usr!bin!x"]
    )
    assert (dumping.number("P"), dumping.number("I"), dumping.executable) == (4242, 4243, "/usr/bin/x")
    assert dumping.expand("%P-%s-%%-%F-100%") == "4242-11-%-%F-100%"  # %F: not ours, kept as it is
    with pytest.raises(ValueError, match="takes 10 values"):
        Dumping.from_argv(["4242"])


def pages(*contents: bytes) -> bytes:
    return b"".join(content.ljust(PAGE, b"\0") for content in contents)


def test_uncompressed_zero_pages_become_holes_and_the_bytes_are_the_cores(tmp_path: Path) -> None:
    core = pages(b"ELF", b"", b"", b"stack") + pages(b"")  # two zero pages inside, one at the end
    sink = DirectorySink(str(tmp_path), "c", Limits(UNCAPPED, 0, "none"))
    for at in range(0, len(core), 1000):  # writes that do not fall on page boundaries
        sink.write(core[at : at + 1000])
    stored = sink.commit()
    path = Path(stored.target)
    assert path.read_bytes() == core and (stored.stored_bytes, stored.core_bytes) == (2 * PAGE, len(core))
    assert path.stat().st_blocks * 512 < len(core)
    assert [p.name for p in tmp_path.iterdir()] == ["c.core"]


@pytest.mark.parametrize(("compression", "decompress"), [("gzip", gzip.decompress), ("xz", lzma.decompress)])
def test_compressed_cores_decompress_to_the_core(tmp_path: Path, compression: str, decompress) -> None:
    core = pages(b"ELF", b"", b"data" * 500)
    sink = DirectorySink(str(tmp_path), "c", Limits(UNCAPPED, 0, compression))
    sink.write(core)
    stored = sink.commit()
    assert decompress(Path(stored.target).read_bytes()) == core and stored.stored_bytes < len(core)


def test_a_core_over_its_cap_leaves_nothing_behind(tmp_path: Path) -> None:
    sink = DirectorySink(str(tmp_path), "c", Limits(PAGE, 0, "none"))
    sink.write(pages(b"one"))
    with pytest.raises(OverLimit):
        sink.write(pages(b"two"))
    sink.discard()
    assert list(tmp_path.iterdir()) == []


def test_the_free_space_floor_refuses_a_core_before_a_byte_is_written(tmp_path: Path) -> None:
    with pytest.raises(OverLimit, match="to keep free"):
        DirectorySink(str(tmp_path), "c", Limits(UNCAPPED, 1 << 62, "none"))
    assert list(tmp_path.iterdir()) == []


def test_the_directory_cap_deletes_our_oldest_cores_never_the_new_one_nor_others(tmp_path: Path) -> None:
    """Like ABRT's MaxCrashReportsSize: once a core is in, the handler's oldest cores go until
    its cores fit under the directory's cap; files that are not its cores stay and do not count."""
    cap = Limits(UNCAPPED, 0, "none", directory_max_bytes=5 * PAGE)
    names = ["core-01", "core-02.filtered", "core-03"]
    for age, name in enumerate(names):  # two pages each, oldest first
        sink = DirectorySink(str(tmp_path), name, Limits(UNCAPPED, 0, "none"))
        sink.write(pages(b"a", b"b"))
        os.utime(sink.commit().target, (1_000_000 + age, 1_000_000 + age))
    (tmp_path / "notes.txt").write_bytes(b"x" * 4 * PAGE)  # not ours: never counted, never deleted
    sink = DirectorySink(str(tmp_path), "core-04", cap)
    sink.write(pages(b"new", b"data"))
    stored = sink.commit()
    # 8 pages of ours: the two oldest cores go, the new one and the third stay (4 pages)
    assert [name for name, _ in stored.removed] == ["core-01.core", "core-02.filtered.core"]
    assert all(size == 2 * PAGE for _, size in stored.removed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["core-03.core", "core-04.core", "notes.txt"]


def test_one_core_larger_than_the_directory_cap_is_not_kept_and_deletes_nothing(tmp_path: Path) -> None:
    old = DirectorySink(str(tmp_path), "core-01", Limits(UNCAPPED, 0, "none"))
    old.write(pages(b"old"))
    old.commit()
    sink = DirectorySink(str(tmp_path), "core-02", Limits(UNCAPPED, 0, "none", directory_max_bytes=2 * PAGE))
    with pytest.raises(OverLimit):
        sink.write(pages(b"1", b"2", b"3"))
    sink.discard()
    assert [p.name for p in tmp_path.iterdir()] == ["core-01.core"]


class Memory:
    """Every address reads as its own low byte, except where nothing is mapped."""

    def __init__(self, readable: list[tuple[int, int]]) -> None:
        self.readable = readable

    def read(self, address: int, size: int) -> bytes | None:
        if any(start <= address and address + size <= end for start, end in self.readable):
            return bytes((address + i) & 0xFF for i in range(size))
        return None


def test_a_bounded_core_keeps_stacks_headers_and_data_as_prefixes_of_the_original_mappings() -> None:
    text, data, bss, stack = 0x400000, 0x600000, 0x601000, 0x7FF000000
    head = CoreHead(
        [
            Segment(PT_LOAD, PF_R, 0, text, PAGE, 4 * PAGE, PAGE),  # the kernel kept the ELF header page
            Segment(PT_LOAD, PF_R | PF_W, 0, data, PAGE, PAGE, PAGE),  # written data, dumped
            Segment(PT_LOAD, PF_R | PF_W, 0, bss, 2 * PAGE, 2 * PAGE, PAGE),  # .bss right after
            Segment(PT_LOAD, PF_R | PF_W, 0, stack, 8 * PAGE, 8 * PAGE, PAGE),
        ],
        threads=[Thread(1, 11, {"rsp": stack + 5 * PAGE + 64})],
        files=[
            FileMapping(text, text + 4 * PAGE, 0, "/bin/x"),
            FileMapping(data, data + PAGE, 0x2000, "/bin/x"),
        ],
    )
    memory = Memory([(text, text + PAGE), (data, bss + 2 * PAGE), (stack, stack + 8 * PAGE)])
    found = [(p.vaddr, p.size, p.data is not None and len(p.data)) for p in pieces(head, memory, 2 * PAGE)]
    assert found == [
        (text, 4 * PAGE, PAGE),  # the page the kernel kept, as the piece's first bytes
        (data, PAGE, PAGE),
        (bss, 2 * PAGE, 2 * PAGE),
        (stack, 4 * PAGE, False),  # below the red zone: left out
        (stack + 4 * PAGE, 4 * PAGE, 2 * PAGE),  # from the page holding rsp - 128, at most 2 pages
    ]


def test_a_core_files_name_gives_the_capture_key_it_was_recorded_under() -> None:
    assert capture_key_of("core-00c0ffee.core") == "core-00c0ffee-core"
    assert capture_key_of("core-00c0ffee.core.gz") == "core-00c0ffee-core"
    assert capture_key_of("core-00c0ffee.filtered.core.xz") == "core-00c0ffee-core_filtered"
    assert capture_key_of("core.1234") is None and capture_key_of("README") is None
