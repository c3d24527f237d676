"""crashreg symbols upload | list: the symbol store from the registry's own machine."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import click
import requests
from sqlalchemy import select

from registry.build_ids import normal_build_id
from registry.cli_support import CliContext, CountingProgress, pass_cli
from registry.storage.store import open_store, store_location
from registry.symbols.client import UPLOADS_PATH, send
from registry.symbols.elf import NotASymbolFile, read_facts
from registry.symbols.keep import Origin, keep_file
from registry.symbols.models import SymbolFile


@click.group("symbols")
def symbols() -> None:
    """Debug info and executables by build-id (docs/symbols.md)."""


@symbols.command("upload")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--registry", "registry_url", metavar="URL",
              help="send the files to this registry over its API (a build pipeline's way); "
                   "default: into this machine's store and database")
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="with --registry: a file holding a token of scope symbols")
@pass_cli
def upload(cli: CliContext, files: tuple[Path, ...], registry_url: str | None,
           token_file: Path | None) -> None:
    """Keep FILES (debug files, executables) in the symbol store, each under its own ELF
    build-id note; a file without one is refused (exit status 1 when any was)."""
    if registry_url and token_file is None:
        raise click.UsageError("--registry needs --token-file (a token of scope symbols)")
    if token_file is not None and not registry_url:
        raise click.UsageError("--token-file is for --registry: without it the files go into this "
                               "machine's store and database")
    keep = (_sender(registry_url, token_file.read_text().strip()) if registry_url and token_file
            else _keeper(cli))
    refused = 0
    for path in sorted(files, key=_lines_first):
        try:
            build_id, new_kinds = keep(path)
        except NotASymbolFile as problem:
            click.echo(f"{path}: refused: {problem}", err=True)
            refused += 1
            continue
        what = f"stored as {', '.join(new_kinds)}" if new_kinds else "already held"
        click.echo(f"{build_id} {path}: {what}")
    if refused:
        raise SystemExit(1)


Keep = Callable[[Path], tuple[str, tuple[str, ...]]]  # a file -> its build-id and the kinds it brought


def _lines_first(path: Path) -> bool:
    """Files with DWARF go first: a program stripped of its DWARF alone (strip -g) brings a
    symbol table as debuginfo, which the DWARF file would then replace (both stored, and the
    build's events symbolicated twice). (False sorts first; a file that is not a symbol file
    keeps its place.)"""
    try:
        return not read_facts(path).lines
    except (NotASymbolFile, OSError):
        return False


def _keeper(cli: CliContext) -> Keep:
    """Into this machine's store and database."""
    settings = cli.settings
    database = cli.database()
    store = open_store(settings.dump_store, settings.public_url)
    limit = settings.symbols.max_file_bytes
    origin = Origin("upload", f"cli:{getpass.getuser()}")
    # Said first: a registry serving from another store (another directory's crashreg-dumps, a
    # bucket) does not see what goes here; --registry sends to the one that serves.
    click.echo(f"store: {store_location(store)} (set CRASHREG_DUMP_STORE to the server's)", err=True)

    def keep(path: Path) -> tuple[str, tuple[str, ...]]:
        if path.stat().st_size > limit:
            raise NotASymbolFile("too_large", f"larger than {limit} bytes (CRASHREG_SYMBOL_MAX_FILE_MB)")
        kept = keep_file(database, store, path, origin, serving=False)
        return kept.facts.build_id, kept.new_kinds

    return keep


# A line of progress in a log (no terminal) each this many bytes sent: a debug file of a few GB
# over a slow link shows it is moving, a small one shows only its last line.
PROGRESS_EVERY_BYTES = 64 << 20


def _sender(registry_url: str, token: str) -> Keep:
    """To a registry over its API; checked here first, so a refused file sends nothing. The
    parts' progress goes to stderr once the first is in the store (none for a file held already)."""

    def keep(path: Path) -> tuple[str, tuple[str, ...]]:
        facts = read_facts(path)
        progress: CountingProgress | None = None
        with ExitStack() as shown:  # the bar, once the first part is in the store

            def sent(part: int, whole: int) -> None:
                nonlocal progress
                if progress is None:
                    label = f"{path.name}: bytes sent"
                    progress = shown.enter_context(CountingProgress(whole, label, PROGRESS_EVERY_BYTES))
                progress.update(part)

            try:
                answer = send(registry_url, token, path, facts.build_id, sent=sent, kinds=facts.kinds,
                              lines=facts.lines)
            except requests.RequestException as error:
                raise click.ClickException(f"{registry_url}: {error}") from None
        if answer.status_code != 200:
            if answer.status_code == 404 and answer.url.endswith(UPLOADS_PATH):  # no such route there
                raise click.ClickException(f"{registry_url} has no symbol upload API (404 for {answer.url}): "
                                           "give the registry's base URL, its CRASHREG_PUBLIC_URL")
            try:
                problem = answer.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                problem = answer.text[:300]
            if answer.status_code == 422:
                raise NotASymbolFile(answer.json()["error"]["code"], problem)
            raise click.ClickException(f"{registry_url} answered {answer.status_code}: {problem}")
        return facts.build_id, tuple(answer.json()["new_kinds"])

    return keep


def _content(row: SymbolFile) -> str:
    if row.kind != "debuginfo":
        return "-"
    return {True: "dwarf", False: "symtab", None: "?"}[row.lines]


@symbols.command("list")
@click.option("--build-id", help="only this build-id")
@pass_cli
def list_files(cli: CliContext, build_id: str | None) -> None:
    """The symbol files held, newest first: build-id, kind, what debuginfo holds (dwarf: source
    lines; symtab: a symbol table alone, which a DWARF file of the build replaces; ?: stored
    before the registry noted it), bytes, source, origin, when."""
    query = select(SymbolFile).order_by(SymbolFile.id.desc())
    if build_id is not None:
        normal = normal_build_id(build_id)
        if normal is None:
            raise click.BadParameter("not a build-id (hex)", param_hint="--build-id")
        query = query.where(SymbolFile.build_id == normal)
    listed = 0
    with cli.database().session() as session:
        for row in session.scalars(query.limit(1000)):
            if not listed:  # the columns' names, above the first row
                click.echo(f"{'build-id':{len(row.build_id)}} {'kind':10} {'holds':6} {'bytes':>12} "
                           f"{'source':10} origin stored")
            click.echo(f"{row.build_id} {row.kind:10} {_content(row):6} {row.bytes:>12} {row.source:10} "
                       f"{row.origin} {row.stored_at.isoformat()}")
            listed += 1
    if not listed:
        click.echo(f"no symbol files for {build_id}" if build_id else "no symbol files", err=True)
