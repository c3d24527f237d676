"""What a symbol file is, read from the file itself: its GNU build-id note and what it can serve.

A file is accepted under a build-id only when its own NT_GNU_BUILD_ID note says so: a debug
file for another build would name the wrong functions for every frame. What it serves follows
its sections, as debuginfod decides: `debuginfo` when it carries DWARF (`.debug_info` with
contents), `executable` when it carries code (an executable section with contents, which
`objcopy --only-keep-debug` leaves empty). An unstripped program serves both.

A debug file `dwz -m` made refers to a supplementary file (the DWARF several builds share) by
its build-id: without that file it has no types and no source lines. The link is the
`.gnu_debugaltlink` section, a NUL-terminated path then the build-id's bytes; elfutils looks
the file up by that build-id. (`dwz --dwarf-5` links by DWARF 5's `.debug_sup` instead, to a
file without a build-id note, which the store refuses.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from registry.build_ids import normal_build_id

KINDS = ("debuginfo", "executable")  # also the order debuginfod looks for a section in
DWARF_SECTIONS = (".debug_info", ".zdebug_info")
ELF_MAGIC = b"\x7fELF"
# What pyelftools raises on a damaged file, besides construct's own errors (from elftools too).
ELF_READ_ERRORS = (ELFError, ValueError, KeyError, IndexError, OverflowError, EOFError)


class NotASymbolFile(Exception):
    """Why a file cannot be kept as symbols: `code` for the API's answer, the message for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SymbolFileFacts:
    build_id: str
    kinds: tuple[str, ...]  # of KINDS
    lines: bool = False  # DWARF: source lines, not a symbol table alone
    alt_build_id: str | None = None  # the supplementary debug file it links to (dwz -m)


def _build_id_note(elf: ELFFile) -> str | None:
    for section in elf.iter_sections():
        if section["sh_type"] != "SHT_NOTE":
            continue
        for note in section.iter_notes():
            if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                return str(note["n_desc"]).lower()
    return None


def _kinds(elf: ELFFile) -> tuple[tuple[str, ...], bool]:
    """debuginfo: DWARF, or a symbol table (a program built without -g still names its
    functions: elfutils' debuginfod serves such a file as debuginfo too); executable: code.
    And whether it has DWARF (source lines)."""
    held = [s for s in elf.iter_sections() if s["sh_type"] != "SHT_NOBITS" and s["sh_size"]]
    dwarf = any(s.name in DWARF_SECTIONS for s in held)
    symbols = dwarf or any(s["sh_type"] == "SHT_SYMTAB" for s in held)
    code = any(s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and s["sh_type"] == "SHT_PROGBITS" for s in held)
    return tuple(kind for kind, has in zip(KINDS, (symbols, code), strict=True) if has), dwarf


def _alt_build_id(elf: ELFFile) -> str | None:
    """The build-id of the supplementary file the debug file links to, if any."""
    altlink = elf.get_section_by_name(".gnu_debugaltlink")
    if altlink is None or altlink["sh_type"] == "SHT_NOBITS":
        return None
    _, nul, identity = altlink.data().partition(b"\0")
    return normal_build_id(identity.hex()) if nul else None


def read_facts(path: Path) -> SymbolFileFacts:
    """The file's build-id and kinds; NotASymbolFile when it is not ELF, has no build-id note,
    or serves nothing."""
    with path.open("rb") as file:
        if file.read(4) != ELF_MAGIC:
            raise NotASymbolFile("not_elf", "the file is not ELF (no \\x7fELF magic)")
        file.seek(0)
        try:
            elf = ELFFile(file)
            build_id = _build_id_note(elf)
            kinds, lines = _kinds(elf)
            alt_build_id = _alt_build_id(elf)
        except Exception as error:
            if not _is_damage(error):
                raise
            raise NotASymbolFile("bad_elf", f"the ELF file is damaged: {error}") from None
    if build_id is None or normal_build_id(build_id) is None:
        raise NotASymbolFile(
            "no_build_id", "the ELF file has no GNU build-id note (NT_GNU_BUILD_ID): link with --build-id"
        )
    if not kinds:
        raise NotASymbolFile(
            "no_symbols",
            "the ELF file has neither debug info (DWARF, a symbol table) nor code: nothing to serve",
        )
    return SymbolFileFacts(build_id, kinds, lines, alt_build_id)


def read_alt_build_id(path: Path) -> str | None:
    """The build-id of the supplementary file `path` links to; None also when it is not ELF or
    is damaged (it was checked when kept: such a file changed in the store, and serves nothing)."""
    with path.open("rb") as file:
        if file.read(4) != ELF_MAGIC:
            return None
        file.seek(0)
        try:
            return _alt_build_id(ELFFile(file))
        except Exception as error:
            if not _is_damage(error):
                raise
            return None


def section_extent(path: Path, name: str) -> tuple[int, int] | None:
    """Where section `name` lies in the file, (offset, size): its raw contents as debuginfod
    serves them (compressed if the file keeps it compressed). None when the file has no such
    section or holds none of its contents (SHT_NOBITS, as a debug file's copy of the code; or
    empty), as elfutils' server decides before it tries the executable."""
    with path.open("rb") as file:
        try:
            section = ELFFile(file).get_section_by_name(name)
        except Exception as error:
            if not _is_damage(error):
                raise
            return None
        if section is None or section["sh_type"] == "SHT_NOBITS" or not section["sh_size"]:
            return None
        offset, size = section["sh_offset"], section["sh_size"]
        file.seek(0, 2)
        return (offset, size) if offset + size <= file.tell() else None


def _is_damage(error: Exception) -> bool:
    """Is this what pyelftools raises on a damaged ELF file (construct's errors on truncated
    headers come from elftools' own copy of construct)?"""
    return isinstance(error, ELF_READ_ERRORS) or type(error).__module__.split(".")[0] == "elftools"
