"""A symbol file's facts come from the file: its build-id note and what it can serve; anything
else (damaged, truncated, not ELF) is NotASymbolFile, never another exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from registry.symbols.elf import (
    NotASymbolFile,
    normal_build_id,
    read_alt_build_id,
    read_facts,
    section_extent,
)
from tests.support.symbols import Program, dwz_shared


def test_the_kinds_follow_the_sections(symbol_programs: dict[str, Program]) -> None:
    program = symbol_programs["uploaded"]
    assert read_facts(program.debug).kinds == ("debuginfo",)
    assert read_facts(program.stripped).kinds == ("executable",)
    assert read_facts(program.unstripped).kinds == ("debuginfo", "executable")
    assert {read_facts(p).build_id for p in (program.debug, program.stripped, program.unstripped)} == {
        program.build_id}


def test_a_dwz_debug_file_links_to_its_supplementary_file_by_build_id(
        symbol_programs: dict[str, Program], tmp_path: Path) -> None:
    shared = dwz_shared(tmp_path)
    for program in shared.programs:
        assert read_facts(program.debug).alt_build_id == shared.common_build_id
        assert read_alt_build_id(program.debug) == shared.common_build_id
    assert read_facts(shared.common).alt_build_id is None
    assert read_facts(symbol_programs["uploaded"].debug).alt_build_id is None
    assert read_alt_build_id(shared.common) is None


def test_every_truncation_of_a_real_file_is_refused_by_name(symbol_programs: dict[str, Program],
                                                             tmp_path: Path) -> None:
    data = symbol_programs["uploaded"].unstripped.read_bytes()
    cut = tmp_path / "cut"
    for length in [*range(0, 256, 7), *range(256, len(data), max(1, len(data) // 200))]:
        cut.write_bytes(data[:length])
        try:
            facts = read_facts(cut)
        except NotASymbolFile as problem:
            assert problem.code in ("not_elf", "bad_elf", "no_build_id", "no_symbols")
        else:  # the note and a section with contents survived the cut
            assert facts.build_id == symbol_programs["uploaded"].build_id


def test_a_section_lies_in_the_file_with_contents_or_is_not_there(symbol_programs: dict[str, Program],
                                                                   tmp_path: Path) -> None:
    """A debug file's .text is SHT_NOBITS: not there (debuginfod then asks the executable); a
    section past the end of a cut file, or any part of a file that is no ELF, is not there
    either, never an exception."""
    program = symbol_programs["uploaded"]
    data = program.unstripped.read_bytes()
    offset, size = section_extent(program.unstripped, ".text") or (0, 0)
    assert size and data[offset:offset + size] in program.stripped.read_bytes()
    assert section_extent(program.debug, ".text") is None
    assert section_extent(program.debug, ".no_such_section") is None
    cut = tmp_path / "cut"
    for length in [*range(0, 256, 7), *range(256, len(data), max(1, len(data) // 200))]:
        cut.write_bytes(data[:length])
        extent = section_extent(cut, ".debug_info")
        assert extent is None or sum(extent) <= length
    # A header saying .debug_info runs past the end of the file (its Elf64_Shdr's sh_size, at
    # byte 32 of the header, made huge): not there.
    with program.unstripped.open("rb") as file:
        elf = ELFFile(file)
        index = next(n for n, section in enumerate(elf.iter_sections()) if section.name == ".debug_info")
        at = elf["e_shoff"] + index * elf["e_shentsize"] + 32
    lying = bytearray(data)
    lying[at:at + 8] = (len(data) * 2).to_bytes(8, "little")
    cut.write_bytes(lying)
    assert section_extent(cut, ".debug_info") is None


@pytest.mark.parametrize(("text", "normal"), [("ABcd", "abcd"), (" abcd ", "abcd"), ("abc", None), ("", None),
                                              ("zz", None), ("ab" * 64, "ab" * 64), ("ab" * 65, None)])
def test_build_ids_are_even_hex_up_to_64_bytes(text: str, normal: str | None) -> None:
    assert normal_build_id(text) == normal
