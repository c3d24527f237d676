"""CLI: `crashreg epidemiology refresh`, `hosts` and `program-label`."""

from __future__ import annotations

import json

import click

from registry.cli_support import CliContext, pass_cli


@click.group()
def epidemiology() -> None:
    """Crash epidemiology: verdicts per signature and fleet-wide suspect hosts."""


@epidemiology.command("refresh")
@pass_cli
def refresh_command(cli: CliContext) -> None:
    """Recompute and store every signature's epidemiology (what Grafana shows)."""
    from .service import refresh

    database = cli.database()
    with (
        database.session() as session,
        database.reads(primary=session) as reads,
        click.progressbar(length=0, label="Analysing signatures", show_pos=True) as bar,
    ):

        def progress(done: int, total: int) -> None:
            bar.length = total
            bar.update(1)

        outcome = refresh(session, progress, cli.settings.epidemiology_program_label, reads)
    click.echo(
        json.dumps(
            {"signatures": outcome.signatures, "suspects": outcome.suspects, "verdicts": outcome.verdicts}
        )
    )


@epidemiology.command("hosts")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200))
@pass_cli
def hosts_command(cli: CliContext, limit: int) -> None:
    """Fleet-wide suspect hosts, as JSON lines."""
    from .service import suspects

    with cli.database().session() as session:
        for suspect in suspects(session, limit):
            click.echo(json.dumps(suspect))


@epidemiology.command("program-label")
@click.argument("label", required=False)
@click.option("--clear", is_flag=True, help="store no label: programs' hosts are known from crash reports")
@pass_cli
def program_label_command(cli: CliContext, label: str | None, clear: bool) -> None:
    """Show or store the inventory label whose value names the program a host runs.

    Stored in the database, so the server, the scheduler and `crashreg demo` on it analyse
    userspace crashes alike; CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL overrides it."""
    from .service import store_program_label, stored_program_label

    if label and clear:
        raise click.UsageError("give a LABEL or --clear, not both")
    with cli.database().session() as session:
        if label or clear:
            store_program_label(session, label)
        stored = stored_program_label(session)
    override = cli.settings.epidemiology_program_label
    click.echo(f"stored: {stored or '(none: known from crash reports)'}")
    if override:
        click.echo(f"CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL={override} overrides it in this environment")
