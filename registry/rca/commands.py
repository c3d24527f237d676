"""crashreg triage-bundle SIG --out DIR, and crashreg rca recheck."""

from __future__ import annotations

import getpass
import json
import shutil
import sys
from pathlib import Path

import click
from sqlalchemy import select

from registry.cli_support import CliContext, pass_cli
from registry.core.signatures import Signature
from registry.core.wiring import cli_wiring, load
from registry.rca.bundle import WORKSPACE, triage_bundle
from registry.rca.models import Rca
from registry.rca.service import recheck
from registry.signatures.service import canonical, find_signature
from registry.storage.service import link_maker
from registry.storage.store import open_store

# The triage workspace, by the signature's kind: a kernel's (each dump beside its kernel's
# debug info, for drgn), a userspace program's (its cores, for gdb) -> the files written.
WORKSPACES = {
    "kernel": {name: name for name in ("setup.sh", "inspect-dump.py", "Containerfile")},
    "userspace": {"setup.sh": "setup-cores.sh"},
}


def write_bundle(bundle: dict, out: Path) -> list[Path]:
    """bundle.json, AGENTS.md, console/<event_id>.log and the workspace (WORKSPACES); returns
    the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    events = bundle["events"]
    with click.progressbar(events, label="console logs", file=sys.stderr) as progress:
        for event in progress:
            log = event.pop("console_log")
            event["console_log_file"] = None
            if log is not None:
                path = out / "console" / f"{event['id']}.log"
                path.parent.mkdir(exist_ok=True)
                path.write_text(log, encoding="utf-8")
                event["console_log_file"] = str(path.relative_to(out))
                written.append(path)
    userspace = bundle["signature"]["kind"] == "userspace"
    for name, template in WORKSPACES["userspace" if userspace else "kernel"].items():
        shutil.copyfile(WORKSPACE / template, out / name)
        written.append(out / name)
    agents = out / "AGENTS.md"
    agents.write_text(bundle.pop("agents_md"), encoding="utf-8")
    data = out / "bundle.json"
    data.write_text(json.dumps(bundle, indent=2) + "\n", encoding="utf-8")
    return [agents, data, *written]


@click.command("triage-bundle")
@click.argument("signature")
@click.option(
    "--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="directory to write"
)
@pass_cli
def triage_bundle_command(cli: CliContext, signature: str, out: Path) -> None:
    """Write SIGNATURE's triage bundle (id or fingerprint) for an agent container into --out."""
    with cli.database().session() as session:
        found = find_signature(session, signature)
        if found is None:
            raise click.ClickException(f"no signature with id or fingerprint {signature!r}")
        settings = cli.settings
        link = link_maker(session, open_store(settings.dump_store, settings.public_url),
                          settings.dump_store.download_ttl_s, f"cli:{getpass.getuser()}", None, "bundle")
        wired = cli_wiring()  # the registry's symbols, for the frames outside the engine's window
        names = None
        if wired.frame_names_on_demand and found.kind == "userspace":  # a kernel's frames need none
            names_for = load(wired.frame_names_on_demand)
            names = names_for(settings, cli.database(), wired.signatures, load(wired.engine))
        bundle = triage_bundle(session, found, settings.public_url, settings.epidemiology_program_label, link,
                               names)
    written = write_bundle(bundle, out)
    click.echo(f"wrote {len(written)} files to {out} ({len(bundle['events'])} events sampled)", err=True)


@click.group("rca")
def rca() -> None:
    """Root-cause analyses."""


@rca.command("recheck")
@click.argument("signatures", nargs=-1)
@pass_cli
def recheck_command(cli: CliContext, signatures: tuple[str, ...]) -> None:
    """Re-run evidence checks of proposed and confirmed RCAs (all signatures with RCAs by default).

    New crashes can contradict an RCA after it was posted, e.g. a crash on its fix kernel.
    """
    with cli.database().session() as session:
        if signatures:
            found = [find_signature(session, key) for key in signatures]
            missing = [key for key, sig in zip(signatures, found, strict=True) if sig is None]
            if missing:
                raise click.ClickException(f"no signature {', '.join(missing)}")
            targets = [sig for sig in found if sig is not None]
        else:
            ids = select(Rca.signature_id).distinct()
            targets = list(session.scalars(select(Signature).where(Signature.id.in_(ids))))
        # A merged signature's RCAs are checked as its survivor's, against the survivor's events.
        standing = (canonical(session, sig) for sig in targets)
        targets = list({sig.id: sig for sig in standing}.values())
        flagged = 0
        with click.progressbar(targets, label="rechecking", file=sys.stderr) as progress:
            for signature in progress:
                flagged += recheck(session, signature, cli.settings.public_url)
    click.echo(f"rechecked RCAs of {len(targets)} signatures; {flagged} newly flagged", err=True)
