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


def test_a_read_only_session_holds_no_writer_back_and_reads_one_snapshot(database: Database) -> None:
    """Database.read_only (the epidemiology view, the signature list, the pages' reads): a
    writer goes on while it reads (on SQLite its transaction took the write lock, so one view of
    seconds held every report back, and a third request waited out the busy timeout: a 503). On
    SQLite what it reads is one snapshot; PostgreSQL's READ COMMITTED gives each statement its own."""
    with database.session() as first:
        first.add(host("before"))
    with database.read_only() as reading:
        assert reading.scalar(select(func.count()).select_from(Host)) == 1  # its snapshot starts
        with database.session() as writer:
            writer.add(host("meanwhile"))
        seen = 1 if database.engine.dialect.name == "sqlite" else 2
        assert reading.scalar(select(func.count()).select_from(Host)) == seen
    assert hosts(database) == 2
    with database.reads() as reads:  # reads() with no replica: the same on the primary
        assert reads.scalar(select(func.count()).select_from(Host)) == 2
