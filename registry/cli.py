"""The `crashreg` command (contract: docs/contract.md, "Command line: `crashreg`")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from registry.cli_support import (
    CliContext,
    database_label,
    first_line,
    known_revisions,
    pass_cli,
    schema_problem,
)
from registry.core.wiring import CLI_WIRING, load
from registry.domains import wiring


class Main(click.Group):
    """The `crashreg` group: its own commands (db, serve) and the wiring's, each of those imported
    only when it runs or `crashreg --help` lists it, so one command imports only its own domain."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *wiring().commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = wiring().commands.get(cmd_name)
        return load(target) if target else super().get_command(ctx, cmd_name)


@click.group(cls=Main)
@click.version_option(package_name="crashreg")
@click.pass_context
def main(ctx: click.Context) -> None:
    """crashreg: historical crash registry for large Linux fleets."""
    ctx.meta[CLI_WIRING] = wiring()


@main.group()
def db() -> None:
    """Schema migrations (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
@pass_cli
def db_upgrade(cli: CliContext, revision: str) -> None:
    """Apply migrations up to REVISION (default head): the release step."""
    from alembic.util.exc import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from registry.db import make_engine
    from registry.migrate import current_revisions, upgrade

    label = database_label(cli.settings)
    try:
        engine = make_engine(cli.settings.database_url)
        try:
            current = current_revisions(engine)
        finally:
            engine.dispose()
        if current - known_revisions():  # Alembic would say "Can't locate revision" in a traceback
            raise click.ClickException(f"database {label} {schema_problem(current, frozenset(), set())}")
        upgrade(cli.settings.database_url, revision)
    except (SQLAlchemyError, CommandError) as error:
        raise click.ClickException(f"cannot migrate database {label}: {first_line(error)}") from None
    click.echo(f"database {label} at {revision}", err=True)


@db.command("downgrade", context_settings={"ignore_unknown_options": True})
@click.argument("revision")
@pass_cli
def db_downgrade(cli: CliContext, revision: str) -> None:
    """Revert migrations down to REVISION (e.g. -1, base)."""
    from registry.migrate import downgrade

    cli.database(migrated=False)  # a missing database is one line, not a new empty file
    downgrade(cli.settings.database_url, revision)


@db.command("current")
@pass_cli
def db_current(cli: CliContext) -> None:
    """Show the database's revision and the code's head."""
    from registry.migrate import current_revisions, head_revisions

    current = current_revisions(cli.database(migrated=False).engine)
    click.echo(f"current: {', '.join(sorted(current)) or 'none'}")
    click.echo(f"head:    {', '.join(sorted(head_revisions()))}")


@db.command("partitions")
@click.option("--ensure", is_flag=True, help="Add the partitions missing ahead of each table's next id.")
@pass_cli
def db_partitions(cli: CliContext, ensure: bool) -> None:
    """PostgreSQL: the partitions of events and reports (docs/partitioning.md), and how many
    empty ones lie ahead of each table's next id."""
    from registry.partitions import maintain, partitions, room

    database = _partitioned(cli, "partitions")
    if ensure:
        maintain(database.engine, lambda line: click.echo(line, err=True))
    with database.engine.connect() as connection:
        found = partitions(connection)
        rooms = room(connection, found)
    for partition in found:
        lower = "MINVALUE" if partition.lower is None else partition.lower
        click.echo(f"{partition.table:<8} {partition.name:<16} [{lower}, {partition.upper})")
    for table, r in rooms.items():
        click.echo(f"{table}: {r.ahead} empty partition(s) ahead, {max(r.ids_left, 0)} id(s) left", err=True)
    if any(r.ids_left <= 0 for r in rooms.values()):
        raise click.ClickException(
            "the next id has no partition (is the scheduler's partitions job running?): ingest makes "
            "one when a report needs it; `crashreg db partitions --ensure` makes them now")


def _partitioned(cli: CliContext, what: str) -> Any:
    database = cli.database()
    if database.engine.dialect.name != "postgresql":
        raise click.ClickException(f"{what}: PostgreSQL only, SQLite's tables are not partitioned")
    return database


@db.command("archive")
@click.option("--before", "before", required=True, type=click.DateTime(["%Y-%m-%d"]),
              help="Archive partitions whose newest event was received before this UTC day.")
@click.option("--dry-run", is_flag=True, help="Say what would be archived and skipped; change nothing.")
@pass_cli
def db_archive(cli: CliContext, before: datetime, dry_run: bool) -> None:
    """PostgreSQL: write old partitions of events and reports to the dump store, then detach and
    drop them (docs/partitioning.md, "Archive")."""
    from registry.retention.archive import archive
    from registry.storage.store import open_store

    database = _partitioned(cli, "archiving")
    store = open_store(cli.settings.dump_store, cli.settings.public_url)
    done = archive(database.engine, store, before.replace(tzinfo=UTC), dry_run,
                   lambda line: click.echo(line, err=True), timedelta(days=cli.settings.capture_window_days))
    verb = "would archive" if dry_run else "archived"
    for partition in done.archive:
        click.echo(f"{verb} {partition.name}")
    for name, why in sorted(done.skipped.items()):
        click.echo(f"kept {name}: {why}")


@db.command("restore-archive")
@click.argument("manifest")
@click.option("--into", "table", required=True, help="The side table to make and load (it must not exist).")
@pass_cli
def db_restore_archive(cli: CliContext, manifest: str, table: str) -> None:
    """PostgreSQL: load an archived partition (MANIFEST: its manifest's key in the dump store,
    e.g. archive/events/events_p0000.manifest.json) into a side table for reading."""
    from registry.retention.archive import restore
    from registry.storage.store import open_store

    if not table.isidentifier():
        raise click.BadParameter(f"{table!r} is not a table name", param_hint="--into")
    database = _partitioned(cli, "restoring an archive")
    store = open_store(cli.settings.dump_store, cli.settings.public_url)
    try:
        rows = restore(database.engine, store, manifest, table)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{rows} rows loaded into {table}", err=True)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@pass_cli
def serve(cli: CliContext, host: str, port: int) -> None:
    """Run the registry for development (production: gunicorn registry.wsgi:app)."""
    from registry.app import create_app

    app = create_app(cli.settings, cli.database())
    click.echo(f"crashreg serving on http://{host}:{port}", err=True)
    app.run(host=host, port=port, threaded=True)
