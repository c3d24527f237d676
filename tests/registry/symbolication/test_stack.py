"""The symbolication step on its own: a real program's symcache (gcc -O2, a function inlined at
the fault), which address each frame is looked up at, the budget, and hostile frames."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from registry.symbolication.stack import lookup_address, symbolicate
from registry.symbolication.symcache import SourceFrame, Symcaches
from registry.symbols.elf import read_facts
from tests.support.symbols import build_id_of, compile_program, function_start

PROGRAM = r"""
#include <stdio.h>
struct slot { int *value; };
static inline __attribute__((always_inline)) int read_slot(const struct slot *s) { return *s->value; }
__attribute__((noinline)) int replay(const struct slot *s) { return read_slot(s) * 2; }
int main(int argc, char **argv) {
    struct slot s = { argc > 5 ? &argc : 0 }; printf("%d\n", replay(&s)); return 0; }
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """(the program, its build-id, replay's first instruction: gcc's debug info puts it in the
    inlined read_slot, as eu-addr2line -i reads it too)."""
    root = tmp_path_factory.mktemp("inline")
    (root / "replay.c").write_text(PROGRAM)
    binary = root / "replay"
    subprocess.run(["gcc", "-g", "-O2", "-o", str(binary), str(root / "replay.c")], check=True, timeout=120)
    return binary, build_id_of(binary), function_start(binary, "replay")


@pytest.fixture
def symcaches(program: tuple[Path, str, int], tmp_path: Path) -> Symcaches:
    binary, build_id, _ = program
    caches = Symcaches(tmp_path / "symcache")
    assert caches.build(build_id, binary)
    return caches


def test_a_fault_in_inlined_code_names_the_inlined_function_then_its_caller(
        program: tuple[Path, str, int], symcaches: Symcaches) -> None:
    binary, build_id, load = program
    stack = {"executable": str(binary), "build_id": build_id,
             "frames": [{"module": str(binary), "offset": hex(load)}]}
    done = symbolicate(stack, symcaches.lookup)
    named = [(f["function"], Path(f["file"]).name, f.get("inlined", False)) for f in done.stack["frames"]]
    assert named == [("read_slot", "replay.c", True), ("replay", "replay.c", False)]
    assert done.missing == [] and done.named == 1


def test_a_return_address_is_looked_up_at_the_call_the_fault_at_itself() -> None:
    frames = [{"offset": "0x1010"}, {"offset": "0x2020"}, {"offset": "0x3030", "signal_frame": True},
              {"offset": "0x4040"}, {"offset": "0x5050"}]
    looked_up = [lookup_address(frames, at) for at in range(len(frames))]
    assert looked_up == [0x1010, 0x201f, 0x302f, 0x4040, 0x504f]


def test_past_the_budget_frames_stay_as_reported_and_their_build_ids_are_missing(
        program: tuple[Path, str, int], symcaches: Symcaches) -> None:
    binary, build_id, load = program
    frame = {"module": str(binary), "offset": hex(load), "build_id": build_id, "function": "hint"}
    stack = {"frames": [frame]}
    done = symbolicate(stack, symcaches.lookup, deadline=0.0)
    assert done.stack == stack and done.missing == [build_id]


def test_frames_that_cannot_be_looked_up_are_left_alone() -> None:
    asked: list[tuple[str, int]] = []

    def lookup(build_id: str, address: int) -> tuple[SourceFrame, ...] | None:
        asked.append((build_id, address))
        return None

    good = "ab" * 20
    frames = [{"module": "/opt/app", "offset": "0x" + "f" * 30, "build_id": good},  # past 64 bits
              {"module": "/opt/app", "offset": "0x10", "build_id": "../../etc/passwd"},
              {"module": "/usr/lib/x86_64-linux-gnu/libc.so.6", "offset": "0x10", "build_id": good},
              {"module": "/opt/app", "offset": "-0x10", "build_id": good},
              "not a frame", None, {"module": "/opt/app", "offset": "0x20", "build_id": good.upper()}]
    done = symbolicate({"frames": frames}, lookup)
    assert asked == [(good, 0x1f)]  # only the last: a return address, its build-id read lower-case
    assert done.stack["frames"] == frames and done.missing == [good]
    assert symbolicate({"frames": "x"}, lookup).stack == {"frames": "x"}


def test_a_program_built_without_g_is_named_from_its_symbol_table(tmp_path: Path) -> None:
    """No DWARF (no -g): its --only-keep-debug file holds the symbol table alone, which elfutils'
    debuginfod serves as debuginfo; the registry keeps it so and names functions from it, with
    no source line to give."""
    program = compile_program(tmp_path / "nodwarf", "nodwarf", dwarf=False)
    assert read_facts(program.debug).kinds == ("debuginfo",)
    assert read_facts(program.unstripped).kinds == ("debuginfo", "executable")
    assert read_facts(program.stripped).kinds == ("executable",)
    start = function_start(program.unstripped, program.function)
    caches = Symcaches(tmp_path / "symcache")
    assert caches.build(program.build_id, program.debug)
    stack = {"frames": [{"module": "nodwarf", "build_id": program.build_id, "offset": hex(start + 4)}]}
    [named] = symbolicate(stack, caches.lookup).stack["frames"]
    assert named["function"] == program.function and "file" not in named and "line" not in named


@pytest.mark.parametrize("compression", ["zlib", "zstd"])
def test_a_debug_file_with_compressed_sections_names_the_frame_and_its_line(
        tmp_path: Path, compression: str) -> None:
    """Distributions ship debug files with compressed DWARF (Debian's dh_strip passes
    objcopy --compress-debug-sections): read as the plain one."""
    program = compile_program(tmp_path / "packed", "packed")
    packed = tmp_path / f"packed.{compression}.debug"
    subprocess.run(["objcopy", f"--compress-debug-sections={compression}", str(program.debug), str(packed)],
                   check=True, timeout=60)
    assert read_facts(packed).kinds == ("debuginfo",)
    start = function_start(program.unstripped, program.function)
    caches = Symcaches(tmp_path / "symcache")
    assert caches.build(program.build_id, packed)
    stack = {"frames": [{"module": "packed", "build_id": program.build_id, "offset": hex(start + 4)}]}
    [named] = symbolicate(stack, caches.lookup).stack["frames"]
    assert (named["function"], Path(named["file"]).name) == (program.function, "packed.c")
    assert named["line"] > 0
