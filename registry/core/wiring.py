"""What a domain declares when it registers itself (registry/domains.py lists the domains).

Each domain package has a `wiring.py` whose `register(wiring)` adds the domain's blueprints,
CLI commands, /metrics collectors, table modules, scheduler job modules and listeners to one
Wiring; the app, the CLI, Alembic's table list and the scheduler read it instead of naming the
domains themselves. Domains affect one another's rows only through the listeners declared
here, which run inside the caller's transaction.

Objects are declared by where they are (a Target), not imported: every `crashreg` command reads
the whole wiring, and one command must not import every domain's API, services and libraries
(`tests/foundation/test_cli_imports.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

CLI_WIRING = "crashreg.wiring"  # where the `crashreg` group keeps the Wiring (click's Context.meta)
APP_LISTENERS = "crashreg.signature_listeners"  # where create_app keeps them (Flask's extensions)
APP_ENGINE = "crashreg.engine"  # where create_app keeps the wiring's signature engine
APP_FRAME_NAMES = "crashreg.frame_names"  # where the app keeps its FrameNames (registry.symbolication)

# Where a declared object is, "package.module:attribute" (the entry points' form), imported by
# load() when it is first used.
Target = str


def load(target: Target) -> Any:
    """The object a Target names, its module imported on first use."""
    module, attribute = target.split(":")
    return getattr(import_module(module), attribute)


@dataclass(frozen=True)
class Carried:
    """What a listener carried from a merged-away signature to the signature it merged into."""

    done: str = ""  # for the rebuild summary's line, e.g. "Jira ABC-1 carried; "
    note: str = ""  # what stayed behind and why, for the operator


# (session, merged-away signature id, survivor id) -> what was carried
SignatureFolded = Callable[["Session", int, int], Carried]
# (session, event ids, signature id): those events now belong to that signature
EventsMoved = Callable[["Session", Sequence[int], int], None]
# (session, signature id, survivor id): merged into the survivor by hand (its row stays, for an unmerge)
SignatureMerged = Callable[["Session", int, int], None]


@dataclass
class SignatureListeners:
    """Told by signatures (a rebuild, a merge) when signatures fold into others, are merged by
    hand and events move: Targets of SignatureFolded, SignatureMerged and EventsMoved functions."""

    folded: list[Target] = field(default_factory=list)
    events_moved: list[Target] = field(default_factory=list)
    merged: list[Target] = field(default_factory=list)

    def fold(self, session: Session, loser_id: int, survivor_id: int) -> list[Carried]:
        listeners: list[SignatureFolded] = [load(target) for target in self.folded]
        return [listener(session, loser_id, survivor_id) for listener in listeners]

    def merge(self, session: Session, merged_id: int, survivor_id: int) -> None:
        listeners: list[SignatureMerged] = [load(target) for target in self.merged]
        for listener in listeners:
            listener(session, merged_id, survivor_id)

    def move_events(self, session: Session, event_ids: Sequence[int], signature_id: int) -> None:
        listeners: list[EventsMoved] = [load(target) for target in self.events_moved]
        for listener in listeners:
            listener(session, event_ids, signature_id)


# The signature engine as ingest calls it: (console_log, stack) -> a CrashSignature or None.
Engine = Callable[[str | None, dict[str, Any] | None], Any]
# A userspace stack -> for each frame sent, what the registry's symbols name there now (its
# inlined calls, then itself; [] where they know nothing): for reading an event's frames.
FrameNames = Callable[[dict[str, Any]], list[list[dict[str, Any]]]]


@dataclass
class Wiring:
    """Targets: of Flask blueprints, of click commands by the name `crashreg` gives them, of
    /metrics collectors (registry.metrics.DatabaseCollector), of the Engine."""

    blueprints: list[Target] = field(default_factory=list)
    commands: dict[str, Target] = field(default_factory=dict)
    collectors: list[Target] = field(default_factory=list)
    table_modules: list[str] = field(default_factory=list)
    job_modules: list[str] = field(default_factory=list)
    signatures: SignatureListeners = field(default_factory=SignatureListeners)
    engine: Target = ""  # the signatures domain sets it (registry.signatures.identify:identify)
    # The step before the engine (registry.symbolication sets it): a target called as
    # (app, engine) by create_app, giving ingest's engine; and as (settings, database, listeners,
    # engine) by `crashreg signatures rebuild`, giving the rebuild's.
    symbolication: Target = ""
    symbolication_on_demand: Target = ""
    # Called as (settings, database, listeners, engine) by a command that reads stored stacks
    # (`crashreg triage-bundle`): its FrameNames, each stack's symbols made ready first.
    frame_names_on_demand: Target = ""


def app_listeners() -> SignatureListeners:
    """The signature listeners of the running app (create_app keeps its wiring's)."""
    from flask import current_app  # not at the top: a `crashreg` command may need no Flask

    listeners: SignatureListeners = current_app.extensions[APP_LISTENERS]
    return listeners


def app_engine() -> Engine:
    """The signature engine of the running app (create_app keeps its wiring's)."""
    from flask import current_app  # not at the top: a `crashreg` command may need no Flask

    engine: Engine = current_app.extensions[APP_ENGINE]
    return engine


def app_frame_names() -> FrameNames | None:
    """The running app's FrameNames, if there is an app and it symbolicates."""
    from flask import current_app, has_app_context

    return current_app.extensions.get(APP_FRAME_NAMES) if has_app_context() else None


def cli_wiring() -> Wiring:
    """The Wiring of the running `crashreg` command."""
    wiring: Wiring = click.get_current_context().meta[CLI_WIRING]
    return wiring
