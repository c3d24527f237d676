"""`crashreg storage gc [--dry-run]`: retention's gc, now (docs/retention.md); `crashreg storage
rotate-key`: the local store's URL key replaced (docs/storage.md)."""

from __future__ import annotations

import click

from registry.cli_support import CliContext, pass_cli
from registry.storage.local import KEY_FILE, SigningKey
from registry.storage.store import local_root
from sync.retention.run import GcBusy, run_gc


@click.group("storage")
def storage() -> None:
    """The dump store: retention's garbage collection, the local store's signing key."""


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


@storage.command("rotate-key")
@pass_cli
def rotate_key(cli: CliContext) -> None:
    """Replace the local store's URL signing key: every upload and download URL signed before
    stops working at once, in running registries too (reporters ask for new part URLs, as for
    expired ones). Also the way out when the key may have been read by someone else."""
    root = local_root(cli.settings.dump_store.url)
    if root is None:
        raise click.ClickException(
            "the dump store is S3: its URLs are signed with the store's credentials, which the "
            "registry does not own; rotate those at the store"
        )
    key = SigningKey(root.resolve() / KEY_FILE)
    key.rotate()
    click.echo(f"rotated {key.path}: URLs signed before no longer work")
