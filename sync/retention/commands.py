"""`crashreg storage gc [--dry-run]`: retention's gc, now (docs/retention.md)."""

from __future__ import annotations

import click

from registry.cli_support import CliContext, pass_cli
from sync.retention.run import GcBusy, run_gc


@click.group("storage")
def storage() -> None:
    """The dump store: retention's garbage collection."""


@storage.command("gc")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted and trimmed; change nothing.")
@pass_cli
def gc(cli: CliContext, dry_run: bool) -> None:
    """Delete the dumps retention lets go and trim old console logs. Safe to interrupt: the
    next run finishes what this one started."""
    try:
        outcome = run_gc(
            cli.settings, cli.database(), dry_run=dry_run, progress=lambda line: click.echo(line, err=True)
        )
    except GcBusy as busy:
        raise click.ClickException(str(busy)) from None
    click.echo(outcome.summary())
