"""`crashreg signature` and `crashreg signatures rebuild`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import click

from registry.cli_support import CliContext, CountingProgress, pass_cli
from registry.core.wiring import cli_wiring, load
from registry.fingerprint import CrashSignature, ExplanationRecord, analyse_report
from registry.signatures.explanation import explanation_lines
from registry.signatures.rebuild import event_count, rebuild


def read_input(path: Path) -> tuple[str | None, dict[str, Any] | None, dict[str, Any] | None]:
    """(console log, stack, whole report) of a file: a contract JSON report or a console log."""
    data = path.read_bytes()
    if data.lstrip()[:1] == b"{":
        try:
            report = json.loads(data)
        except ValueError:
            report = None
        if isinstance(report, dict):
            stack = report.get("stack")
            return report.get("console_log"), stack if isinstance(stack, dict) else None, report
    return data.decode("utf-8", "replace"), None, None


class SignatureLine(TypedDict):
    """One file's line of `crashreg signature --json` (docs/contract.md, "Command line")."""

    file: str
    fingerprint: str | None
    title: str | None
    kind: str | None
    function: str | None
    frames: list[str]
    labels: list[str]
    module: NotRequired[str | None]  # with a crash only
    algorithm_version: NotRequired[int]  # with a crash only
    explanation: NotRequired[ExplanationRecord | None]  # with --explain


def signature_line(name: str, signature: CrashSignature | None) -> SignatureLine:
    """The contract's `crashreg signature --json` object for one file."""
    if signature is None:
        return {"file": name, "fingerprint": None, "title": None, "kind": None, "function": None,
                "frames": [], "labels": []}
    return {"file": name, "fingerprint": signature.fingerprint, "title": signature.title,
            "kind": signature.kind, "function": signature.function,
            "frames": list(signature.frames), "labels": list(signature.labels),
            "module": signature.module, "algorithm_version": signature.algorithm_version}


@click.command("signature")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="one JSON object per file, one per line")
@click.option("--explain", is_flag=True,
              help="show how each fingerprint was made (with --json: an `explanation` object)")
def signature_command(files: tuple[Path, ...], as_json: bool, explain: bool) -> None:
    """Fingerprint console logs and JSON report files offline."""
    for path in files:
        console_log, stack, _ = read_input(path)
        signature = analyse_report(console_log, stack)
        if as_json:
            line = signature_line(str(path), signature)
            if explain:
                line["explanation"] = signature.explanation if signature else None
            click.echo(json.dumps(line))
        elif signature is None:
            click.echo(f"{path}: no crash")
        else:
            click.echo(f"{path}: {signature.fingerprint} {signature.title}")
            if explain:
                click.echo("\n".join(explanation_lines(signature.explanation)))


@click.group("signatures")
def signatures() -> None:
    """Signature maintenance."""


@signatures.command("rebuild")
@click.option("--dry-run", is_flag=True, help="show what would change, change nothing")
@click.option("--allow-symbols-elsewhere", is_flag=True,
              help="rebuild even though symbol files are recorded in another store than this "
                   "command's (refused otherwise: the events they named would lose those names)")
@pass_cli
def rebuild_command(cli: CliContext, dry_run: bool, allow_symbols_elsewhere: bool) -> None:
    """Re-fingerprint all history from the stored raw reports with the current engine, userspace
    stacks symbolicated with every symbol the registry's sources can give (run it with the
    server's settings: its database and its dump store)."""
    database = cli.database()
    with database.session() as session:
        total = event_count(session)
    wired = cli_wiring()
    engine = load(wired.engine)
    if wired.symbolication_on_demand:  # symbols the sources have, waited for
        try:
            engine = load(wired.symbolication_on_demand)(cli.settings, database, wired.signatures, engine,
                                                         CountingProgress, allow_symbols_elsewhere)
        except ValueError as refused:  # symbols recorded in another store than the settings'
            raise click.ClickException(str(refused)) from None
    with CountingProgress(total, "re-fingerprinting events") as bar:
        summary = rebuild(database, wired.signatures, bar.update, dry_run, engine)
    for line in summary.lines():
        click.echo(line)
    if dry_run:
        click.echo("dry run: the lines above say what a rebuild would do; nothing was written")
