"""crashreg symbols upload | list: the symbol store from the registry's own machine."""

from __future__ import annotations

import getpass
from pathlib import Path

import click
from sqlalchemy import select

from registry.cli_support import CliContext, pass_cli
from registry.storage.store import open_store
from registry.symbols.elf import NotASymbolFile, normal_build_id
from registry.symbols.keep import Origin, keep_file
from registry.symbols.models import SymbolFile


@click.group("symbols")
def symbols() -> None:
    """Debug info and executables by build-id (docs/symbols.md)."""


@symbols.command("upload")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_cli
def upload(cli: CliContext, files: tuple[Path, ...]) -> None:
    """Keep FILES (debug files, executables) in the symbol store, each under its own ELF
    build-id note; a file without one is refused (exit status 1 when any was)."""
    settings = cli.settings
    database = cli.database()
    store = open_store(settings.dump_store, settings.public_url)
    limit = settings.symbols.max_file_mb << 20
    origin = Origin("upload", f"cli:{getpass.getuser()}")
    refused = 0
    for path in files:
        try:
            if path.stat().st_size > limit:
                raise NotASymbolFile("too_large", f"larger than {limit} bytes (CRASHREG_SYMBOL_MAX_FILE_MB)")
            kept = keep_file(database, store, path, origin)
        except NotASymbolFile as problem:
            click.echo(f"{path}: refused: {problem}", err=True)
            refused += 1
            continue
        what = f"stored as {', '.join(kept.new_kinds)}" if kept.new_kinds else "already held"
        click.echo(f"{kept.facts.build_id} {path}: {what}")
    if refused:
        raise SystemExit(1)


@symbols.command("list")
@click.option("--build-id", help="only this build-id")
@pass_cli
def list_files(cli: CliContext, build_id: str | None) -> None:
    """The symbol files held, newest first."""
    query = select(SymbolFile).order_by(SymbolFile.id.desc())
    if build_id is not None:
        normal = normal_build_id(build_id)
        if normal is None:
            raise click.BadParameter("not a build-id (hex)", param_hint="--build-id")
        query = query.where(SymbolFile.build_id == normal)
    with cli.database().session() as session:
        for row in session.scalars(query.limit(1000)):
            click.echo(f"{row.build_id} {row.kind:10} {row.bytes:>12} {row.source:10} {row.origin} "
                       f"{row.stored_at.isoformat()}")
