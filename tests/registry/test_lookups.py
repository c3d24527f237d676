"""Database.autocommit_reads(): reads on a connection of their own, outside any transaction, on both
databases."""

from __future__ import annotations

from sqlalchemy import func, select

from registry.core.hosts import Host
from registry.db import Database, utcnow


def host(name: str) -> Host:
    return Host(hostname=name, first_seen=utcnow(), updated_at=utcnow(), in_inventory=False, labels={})


def hosts(database: Database) -> int:
    with database.autocommit_reads() as reading:
        return reading.scalar(select(func.count()).select_from(Host)) or 0


def test_reads_go_on_beside_a_write_and_hand_their_connection_back_as_it_was(database: Database) -> None:
    """Reads go on while a session of the same process writes (on SQLite they waited 30 s for
    the write lock that session held, then failed: a command reading the registry's symbols
    inside its own transaction), see only what is committed, and their connection serves the
    next sessions as before: a savepoint rolls back its part alone."""
    with database.session() as writer:
        writer.add(host("written"))
        writer.flush()  # SQLite's write lock, PostgreSQL's row: held until the commit
        assert hosts(database) == 0
    assert hosts(database) == 1
    with database.session() as first, database.session() as second:  # the connections reads used
        for at, session in enumerate((first, second)):
            if database.engine.dialect.name == "sqlite":  # the registry begins its transactions itself
                assert session.connection().connection.dbapi_connection.isolation_level is None
            session.add(host(f"kept-{at}"))
            nested = session.begin_nested()
            session.add(host(f"dropped-{at}"))
            session.flush()
            nested.rollback()
            session.commit()
    assert hosts(database) == 3
