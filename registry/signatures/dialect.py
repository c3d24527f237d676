"""The SQL that differs between PostgreSQL and SQLite in the signatures domain, one row per
database, chosen from the engine's dialect name."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from registry.db import dialect_name


@dataclass(frozen=True)
class Dialect:
    name: str
    # what a rebuild runs to hold the signatures until it commits (None: beginning SQLite's
    # IMMEDIATE transaction holds them already)
    hold_signatures: str | None


DIALECTS = {
    dialect.name: dialect
    for dialect in (
        Dialect("postgresql", hold_signatures="LOCK TABLE signatures IN SHARE ROW EXCLUSIVE MODE"),
        Dialect("sqlite", hold_signatures=None),
    )
}


def dialect_of(session: Session) -> Dialect:
    return DIALECTS[dialect_name(session)]
