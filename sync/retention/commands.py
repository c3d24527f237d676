"""`crashreg storage gc [--dry-run] [--json]`: retention's gc, now (docs/retention.md); `crashreg storage
rotate-key`: the local store's URL key replaced (docs/storage.md)."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from registry.cli_support import CliContext, pass_cli
from registry.retention.gc import DoomedDump
from registry.storage.local import KEY_FILE, SigningKey
from registry.storage.store import local_root
from sync.retention.run import GcBusy, run_gc


@click.group("storage")
def storage() -> None:
    """The dump store: retention's garbage collection, the local store's signing key."""


DOOMED_COLUMNS = (  # (heading, width, DoomedDump attribute), the key last and unpadded
    ("DUMP", 10, "dump_id"), ("CAPTURE", 10, "capture_id"), ("EVENT", 10, "event_id"),
    ("SIGNATURE", 10, "signature_id"), ("BYTES", 15, "bytes"), ("RULE", 9, "rule"), ("KEY", 0, "key"),
)


def doomed_line(values: list[object]) -> str:
    return " ".join(f"{'' if value is None else value!s:<{width}}"
                    for value, (_, width, _) in zip(values, DOOMED_COLUMNS, strict=True)).rstrip()


@storage.command("gc")
@click.option("--dry-run", is_flag=True,
              help="Say what would be deleted (each dump: id, capture, event, signature, size, rule, "
                   "key) and trimmed; change nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: the dumps a dry run would delete, with the rule's reason, "
                   "and the run's figures.")
@pass_cli
def gc(cli: CliContext, dry_run: bool, as_json: bool) -> None:
    """Delete the dumps retention lets go and trim old console logs. Safe to interrupt: the
    next run finishes what this one started."""
    doomed: list[dict[str, object]] = []  # for --json; the table is printed as the run goes

    def tell(dump: DoomedDump) -> None:
        if as_json:
            doomed.append(asdict(dump))
        else:
            click.echo(doomed_line([getattr(dump, name) for _, _, name in DOOMED_COLUMNS]))

    if dry_run and not as_json:
        click.echo(doomed_line([heading for heading, _, _ in DOOMED_COLUMNS]))
    try:
        outcome = run_gc(
            cli.settings, cli.database(), dry_run=dry_run, doomed=tell,
            progress=lambda line: click.echo(line, err=True),
        )
    except GcBusy as busy:
        raise click.ClickException(str(busy)) from None
    if as_json:
        summary = asdict(outcome)
        click.echo(json.dumps({"dry_run": dry_run, "dumps": doomed, "summary": summary}, indent=2))
    else:
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
