"""`crashreg symbols upload FILE...` and `crashreg symbols list` on the registry's machine."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import select

from registry.cli import main
from registry.cli_support import CliContext
from registry.config import Settings
from registry.db import Database
from registry.storage.store import local_root
from registry.symbols.elf import read_facts
from registry.symbols.models import SymbolFile
from tests.support.symbols import Program, compile_program


def run(settings: Settings, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["symbols", *args], obj=CliContext(settings))


def test_upload_keeps_each_file_under_its_own_build_id_and_refuses_the_rest(
    settings: Settings, database: Database, symbol_programs: dict[str, Program], tmp_path: Path,
) -> None:
    uploaded, upstream = symbol_programs["uploaded"], symbol_programs["upstream"]
    text = tmp_path / "notes.txt"
    text.write_text("not a program")
    done = run(settings, "upload", str(uploaded.debug), str(upstream.unstripped), str(text),
               str(symbol_programs["no_build_id"].unstripped))
    assert done.exit_code == 1, done.output
    root = local_root(settings.dump_store.url)
    assert root is not None
    assert f"\nstore: {root.as_uri()} (set CRASHREG_DUMP_STORE to the server's)\n" in done.output
    assert f"{uploaded.build_id} {uploaded.debug}: stored as debuginfo" in done.output
    assert f"{upstream.build_id} {upstream.unstripped}: stored as debuginfo, executable" in done.output
    assert f"{text}: refused: the file is not ELF" in done.output
    assert "no GNU build-id note" in done.output
    with database.session() as session:
        rows = session.scalars(select(SymbolFile).order_by(SymbolFile.build_id, SymbolFile.kind)).all()
        kept = {(r.build_id, r.kind): r.key for r in rows}
    assert set(kept) == {(uploaded.build_id, "debuginfo"), (upstream.build_id, "debuginfo"),
                         (upstream.build_id, "executable")}
    assert (root / kept[(uploaded.build_id, "debuginfo")]).read_bytes() == uploaded.debug.read_bytes()

    again = run(settings, "upload", str(uploaded.debug), str(uploaded.stripped))
    assert again.exit_code == 0, again.output
    assert f"{uploaded.build_id} {uploaded.debug}: already held" in again.output
    assert f"{uploaded.build_id} {uploaded.stripped}: stored as executable" in again.output

    listed = run(settings, "list", "--build-id", uploaded.build_id.upper())
    assert listed.exit_code == 0, listed.output
    assert [line.split()[:3] for line in listed.output.splitlines() if not line.startswith("database")] == [
        ["build-id", "kind", "holds"], [uploaded.build_id, "executable", "-"],
        [uploaded.build_id, "debuginfo", "dwarf"]]
    assert run(settings, "list", "--build-id", "xyz").exit_code == 2
    unknown = run(settings, "list", "--build-id", "ab" * 20)
    assert unknown.exit_code == 0 and f"no symbol files for {'ab' * 20}" in unknown.output
    # a token file without --registry would go unused: the files would land here
    alone = run(settings, "upload", "--token-file", str(text), str(uploaded.debug))
    assert alone.exit_code == 2 and "--token-file is for --registry" in alone.output


def test_upload_to_a_registry_over_its_api(
    settings: Settings, database: Database, live_server: str, make_token: Callable[..., str],
    symbol_programs: dict[str, Program], tmp_path: Path,
) -> None:
    uploaded = symbol_programs["uploaded"]
    token_file = tmp_path / "token"
    token_file.write_text(make_token("symbols", name="ci-nightly") + "\n")
    remote = ("upload", "--registry", live_server, "--token-file", str(token_file))
    done = run(settings, *remote, str(uploaded.debug), str(symbol_programs["no_build_id"].debug))
    assert done.exit_code == 1, done.output
    assert "store:" not in done.output  # the registry's store takes it
    assert f"{uploaded.build_id} {uploaded.debug}: stored as debuginfo" in done.output
    size = uploaded.debug.stat().st_size  # its progress, as a log shows it (no terminal here)
    assert f"{uploaded.debug.name}: bytes sent: {size} of {size} (done)" in done.output
    assert "no GNU build-id note" in done.output
    with database.session() as session:
        assert [(r.build_id, r.origin) for r in session.scalars(select(SymbolFile))] == [
            (uploaded.build_id, "ci-nightly")]
    again = run(settings, *remote, str(uploaded.debug))
    held = f"{uploaded.build_id} {uploaded.debug}: already held"
    assert (again.exit_code, again.output.strip()) == (0, held)
    # another file of the build bringing nothing new (the unstripped program's debug info is
    # held; it also brings the executable, then the stripped one brings nothing) is not sent
    run(settings, *remote, str(uploaded.unstripped))
    nothing_new = run(settings, *remote, str(uploaded.stripped))
    assert nothing_new.output.strip() == f"{uploaded.build_id} {uploaded.stripped}: already held"
    token_file.write_text(make_token("read"))
    refused = run(settings, *remote, str(uploaded.stripped))
    assert refused.exit_code == 1 and "answered 403" in refused.output
    assert run(settings, "upload", "--registry", live_server, str(uploaded.debug)).exit_code == 2
    token_file.write_text(make_token("symbols"))
    elsewhere = run(settings, "upload", "--registry", f"{live_server}/debuginfod/", "--token-file",
                    str(token_file), str(uploaded.debug))
    assert elsewhere.exit_code == 1 and "has no symbol upload API" in elsewhere.output, elsewhere.output



def test_upload_keeps_the_file_with_source_lines_as_a_build_ids_debuginfo_whatever_the_order(
    settings: Settings, database: Database, tmp_path: Path,
) -> None:
    """A program stripped of its DWARF alone (strip -g) still brings its symbol table as
    debuginfo, without source lines; given on the command line before the unstripped program of
    the same build, the unstripped one is kept for debuginfo all the same."""
    program = compile_program(tmp_path / "lines", "lines")
    symtab_only = tmp_path / "lines.symtab"
    subprocess.run(["strip", "-g", "-o", str(symtab_only), str(program.unstripped)], check=True, timeout=60)
    facts = read_facts(symtab_only)
    assert (facts.kinds, facts.lines) == (("debuginfo", "executable"), False)
    assert read_facts(program.unstripped).lines and read_facts(program.debug).lines

    done = run(settings, "upload", str(symtab_only), str(program.unstripped))
    assert done.exit_code == 0, done.output
    assert f"{program.build_id} {program.unstripped}: stored as debuginfo, executable" in done.output
    assert f"{program.build_id} {symtab_only}: already held" in done.output
    with database.session() as session:
        kept = session.scalar(select(SymbolFile.sha256).where(SymbolFile.build_id == program.build_id,
                                                               SymbolFile.kind == "debuginfo"))
    assert kept == hashlib.sha256(program.unstripped.read_bytes()).hexdigest()
