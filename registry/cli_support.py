"""What every CLI command shares: settings and the database from the environment, passed to each
command in its Click context (`@pass_cli`).

A command says which database it uses (on stderr, so stdout stays machine-readable), and a
database that is missing, unreachable or not migrated stops it with one line saying what to do:
never a traceback, and never an empty SQLite file created as a side effect of looking.
"""

from __future__ import annotations

import sys

import click
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from registry.config import Settings
from registry.db import UPGRADE_HINT, Database, missing_sqlite_file, no_database, sqlite_path


def database_label(settings: Settings) -> str:
    """How a command names its database: the file or the URL without its password, and where
    the setting came from (the default surprises people who run a command from another folder)."""
    url = settings.database_url
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    path = sqlite_path(url)
    where = f"SQLite file {path}" if path else parsed.render_as_string(hide_password=True)
    source = (
        "CRASHREG_DATABASE_URL"
        if settings.database_url_from_env
        else "the default; set CRASHREG_DATABASE_URL to change it"
    )
    return f"{where} ({source})"


def schema_problem(current: set[str], heads: frozenset[str], known: set[str]) -> str | None:
    """Why a database at revisions `current` cannot serve code whose heads are `heads`."""
    if current == set(heads):
        return None
    if not current:
        return f"has no crashreg schema (not migrated): {UPGRADE_HINT}"
    unknown = current - known
    if unknown:
        return (
            f"is at revision {', '.join(sorted(unknown))}, which this crashreg does not know: a newer "
            "release migrated it (run that release, or a newer one), or a build that was never released "
            "(its migrations may have been renumbered since: restore the backup taken before it)"
        )
    return (
        f"is at revision {', '.join(sorted(current))}, this crashreg needs {', '.join(sorted(heads))}: "
        + UPGRADE_HINT
    )


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory  # Alembic: only once a command opens its database

    from registry.migrate import alembic_config

    return {script.revision for script in ScriptDirectory.from_config(alembic_config("sqlite://")).walk_revisions()}


def first_line(error: SQLAlchemyError) -> str:
    original = getattr(error, "orig", None) or error
    return (str(original).strip().splitlines() or [type(original).__name__])[0]


def open_database(settings: Settings, migrated: bool = True) -> Database:
    """The database of CRASHREG_DATABASE_URL, checked before any command touches it; `migrated`
    False accepts any schema (for `db current`)."""
    from registry.migrate import current_revisions, head_revisions  # Alembic: only once it is used

    url, label = settings.database_url, database_label(settings)
    try:
        missing = missing_sqlite_file(url)
    except ArgumentError:
        raise click.ClickException(
            f"CRASHREG_DATABASE_URL {url!r} is not a database URL (postgresql://user@host/db or sqlite:///path)"
        ) from None
    if missing is not None:
        raise click.ClickException(no_database(label))
    try:
        database = Database(url, settings.read_replica)
        current = current_revisions(database.engine)
    except SQLAlchemyError as error:
        raise click.ClickException(f"cannot open database {label}: {first_line(error)}") from None
    problem = schema_problem(current, head_revisions(), known_revisions()) if migrated else None
    if problem:
        database.dispose()
        raise click.ClickException(f"database {label} {problem}")
    click.echo(f"database: {label}", err=True)
    return database


class CliContext:
    """A command's settings, read from the environment on first use (a bad value is one clear
    line), and its database, opened and checked on first use and disposed of when the command
    ends. Tests may pass their own: `CliRunner().invoke(main, args, obj=CliContext(settings))`."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings
        self._database: Database | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = Settings.from_env()
            except ValueError as error:
                raise click.ClickException(str(error)) from error
        return self._settings

    def database(self, migrated: bool = True) -> Database:
        if self._database is None:
            self._database = open_database(self.settings, migrated)
            click.get_current_context().call_on_close(self._database.dispose)
        return self._database


# A command taking the context as its first argument; made on first use when none was given.
pass_cli = click.make_pass_decorator(CliContext, ensure=True)


class CountingProgress:
    """A long command's progress on stderr: a bar on a terminal; in a log (no terminal) a line
    each `every` items and at the end, for a bar would show nothing there until it is done."""

    def __init__(self, total: int, label: str, every: int = 10_000) -> None:
        self.total, self.label, self.every = total, label, every
        self.done = 0
        stream = sys.stderr  # as the command runs: a test runner's, where one captures it
        self.in_log = not stream.isatty()
        self.bar = click.progressbar(length=total, label=label, file=stream)

    def __enter__(self) -> CountingProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)
        if self.in_log and exc[0] is None:
            click.echo(f"{self.label}: {self.done} of {self.total} (done)", err=True)

    def update(self, items: int) -> None:
        before, self.done = self.done, self.done + items
        self.bar.update(items)
        if self.in_log and before // self.every != self.done // self.every:
            share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
            click.echo(f"{self.label}: {self.done} of {self.total}{share}", err=True)
