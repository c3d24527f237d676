"""What a domain declares when it registers itself (registry/domains.py lists the domains).

Each domain package has a `wiring.py` whose `register(wiring)` adds the domain's blueprints,
CLI commands, /metrics collectors, table modules, scheduler job modules and listeners to one
Wiring; the app, the CLI, Alembic's table list and the scheduler read it instead of naming the
domains themselves. Domains affect one another's rows only through the listeners declared
here, which run inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click
from flask import Blueprint, current_app
from sqlalchemy.orm import Session

from registry.metrics import DatabaseCollector

CLI_WIRING = "crashreg.wiring"  # where the `crashreg` group keeps the Wiring (click's Context.meta)
APP_LISTENERS = "crashreg.signature_listeners"  # where create_app keeps them (Flask's extensions)
APP_ENGINE = "crashreg.engine"  # where create_app keeps the wiring's signature engine


@dataclass(frozen=True)
class Carried:
    """What a listener carried from a merged-away signature to the signature it merged into."""

    done: str = ""  # for the rebuild summary's line, e.g. "Jira ABC-1 carried; "
    note: str = ""  # what stayed behind and why, for the operator


# (session, merged-away signature id, survivor id) -> what was carried
SignatureFolded = Callable[[Session, int, int], Carried]
# (session, event ids, signature id): those events now belong to that signature
EventsMoved = Callable[[Session, Sequence[int], int], None]


@dataclass
class SignatureListeners:
    """Told by signatures (a rebuild) when signatures fold into others and events move."""

    folded: list[SignatureFolded] = field(default_factory=list)
    events_moved: list[EventsMoved] = field(default_factory=list)

    def fold(self, session: Session, loser_id: int, survivor_id: int) -> list[Carried]:
        return [listener(session, loser_id, survivor_id) for listener in self.folded]

    def move_events(self, session: Session, event_ids: Sequence[int], signature_id: int) -> None:
        for listener in self.events_moved:
            listener(session, event_ids, signature_id)


# The signature engine as ingest calls it: (console_log, stack) -> a CrashSignature or None.
Engine = Callable[[str | None, dict[str, Any] | None], Any]


@dataclass
class Wiring:
    blueprints: list[Blueprint] = field(default_factory=list)
    commands: list[click.Command] = field(default_factory=list)
    collectors: list[DatabaseCollector] = field(default_factory=list)
    table_modules: list[str] = field(default_factory=list)
    job_modules: list[str] = field(default_factory=list)
    signatures: SignatureListeners = field(default_factory=SignatureListeners)
    engine: Engine | None = None  # the signatures domain sets it (registry.signatures.identify)


def app_listeners() -> SignatureListeners:
    """The signature listeners of the running app (create_app keeps its wiring's)."""
    listeners: SignatureListeners = current_app.extensions[APP_LISTENERS]
    return listeners


def app_engine() -> Engine:
    """The signature engine of the running app (create_app keeps its wiring's)."""
    engine: Engine = current_app.extensions[APP_ENGINE]
    return engine


def cli_wiring() -> Wiring:
    """The Wiring of the running `crashreg` command."""
    wiring: Wiring = click.get_current_context().meta[CLI_WIRING]
    return wiring
