"""DirectStatement (registry.direct) answers what Connection.execute answers, on each database.

The ingest path's statements run through it; these pin what SQLAlchemy would have done for
them: types both ways, Python-side defaults, SQLAlchemy's exceptions, cursor events.
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy
from sqlalchemy import (
    Column,
    Connection,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    event,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from registry.core.hosts import Host
from registry.db import Database, UTCDateTime, utcnow
from registry.direct import DirectStatement
from registry.upsert import insert_ignore_statement

HOSTS = Host.__table__.c  # type: ignore[attr-defined]
CRASHED = datetime(2026, 11, 30, 23, 59, 58, 123456, tzinfo=UTC)
# SQLAlchemy's private Connection methods DirectStatement calls, with the parameters it passes
# (positionally, in this order): a SQLAlchemy release that renames, drops or reorders them must
# fail here, by name, before ingest fails in production.
PRIVATE_METHODS_CALLED = {
    "_cursor_execute": ("cursor", "statement", "parameters", "context"),
    "_handle_dbapi_exception": ("e", "statement", "parameters", "cursor", "context"),
}


@pytest.mark.parametrize("name", sorted(PRIVATE_METHODS_CALLED))
def test_the_private_sqlalchemy_methods_it_calls_are_as_it_calls_them(name: str) -> None:
    method = getattr(Connection, name, None)
    assert callable(method), f"SQLAlchemy {sqlalchemy.__version__} has no Connection.{name}"
    parameters = list(inspect.signature(method).parameters.values())[1:]  # after self
    passed = PRIVATE_METHODS_CALLED[name]
    assert tuple(p.name for p in parameters[: len(passed)]) == passed, (
        f"SQLAlchemy {sqlalchemy.__version__} changed Connection.{name}{inspect.signature(method)}")
    assert all(p.default is not inspect.Parameter.empty for p in parameters[len(passed):]), (
        f"SQLAlchemy {sqlalchemy.__version__}: Connection.{name} needs more than registry/direct.py passes")


def test_rows_are_what_connection_execute_returns(database: Database) -> None:
    with database.engine.begin() as connection:
        connection.execute(
            insert(Host.__table__),
            {"hostname": "gpu-1", "labels": {"rack": "r7", "ids": [1, 2]}, "booted_at": CRASHED,
             "memory_gb": 2048, "in_inventory": True},
        )
        read = select(
            HOSTS.id, HOSTS.hostname, HOSTS.labels, HOSTS.booted_at, HOSTS.first_seen, HOSTS.memory_gb,
            HOSTS.in_inventory, HOSTS.region, literal(7).label("seven"),
        ).where(HOSTS.hostname == bindparam("hostname"))
        direct = DirectStatement(read)
        expected = [tuple(row) for row in connection.execute(read, {"hostname": "gpu-1"})]
        assert direct.execute(connection, {"hostname": "gpu-1"}) == expected
        (row,) = direct.mappings(connection, {"hostname": "gpu-1"})
    assert row["labels"] == {"rack": "r7", "ids": [1, 2]}
    assert row["booted_at"] == CRASHED and row["booted_at"].tzinfo is not None
    assert (row["in_inventory"], row["memory_gb"], row["region"], row["seven"]) == (True, 2048, None, 7)
    assert direct.keys == (
        "id", "hostname", "labels", "booted_at", "first_seen", "memory_gb", "in_inventory", "region", "seven",
    )


def test_inserts_fill_python_side_defaults_and_return_the_new_id(database: Database) -> None:
    dialect = database.engine.dialect.name
    statement = DirectStatement(insert_ignore_statement(dialect, Host.__table__, ("hostname",), None))
    before = datetime.now(UTC)
    with database.engine.begin() as connection:
        created = statement.scalar(connection, {"hostname": "gpu-2", "labels": {}})
        again = statement.scalar(connection, {"hostname": "gpu-2", "labels": {"other": "1"}})
        columns = (HOSTS.id, HOSTS.labels, HOSTS.in_inventory, HOSTS.first_seen)
        row = connection.execute(select(*columns).where(HOSTS.hostname == "gpu-2")).one()
    assert isinstance(created, int) and again is None  # ON CONFLICT DO NOTHING: no row back
    assert row.id == created and row.labels == {}
    assert row.in_inventory is False  # Host's scalar default
    assert before - timedelta(seconds=1) <= row.first_seen <= datetime.now(UTC)  # utcnow, per execution


def test_updates_fill_onupdate_defaults(database: Database) -> None:
    stamped = Table(
        "stamped", MetaData(), Column("id", Integer, primary_key=True), Column("name", String(16)),
        Column("updated_at", UTCDateTime(), default=utcnow, onupdate=utcnow), prefixes=["TEMPORARY"],
    )
    long_ago = datetime(2001, 1, 1, tzinfo=UTC)
    rename = DirectStatement(update(stamped).where(stamped.c.id == bindparam("row")).values(name="b"))
    with database.engine.begin() as connection:
        stamped.create(connection)
        DirectStatement(insert(stamped)).execute(connection, {"id": 1, "name": "a", "updated_at": long_ago})
        rename.execute(connection, {"row": 1})
        name, updated_at = connection.execute(select(stamped.c.name, stamped.c.updated_at)).one()
        stamped.drop(connection)  # a pooled PostgreSQL connection keeps its temporary tables
    assert name == "b" and updated_at > long_ago


def test_a_bind_whose_value_a_callable_gives_is_computed_on_each_run(database: Database) -> None:
    """As Connection.execute calls a bindparam's callable on each execution (the latest
    plausible crash time is one: now plus a margin), not once when the statement compiles."""
    runs = iter(range(1, 100))
    statement = DirectStatement(select(bindparam("run", callable_=lambda: next(runs), type_=Integer())))
    with database.engine.connect() as connection:
        first, second, third = (statement.scalar(connection, {}) for _ in range(3))
    assert second == first + 1 and third == second + 1


def test_parameters_of_another_shape_get_a_statement_of_their_own(database: Database) -> None:
    statement = DirectStatement(insert(Host.__table__))
    with database.engine.begin() as connection:
        statement.execute(connection, {"hostname": "gpu-3", "labels": {}})
        statement.execute(connection, {"hostname": "gpu-4", "labels": {}, "region": "us-east"})
        regions = dict(connection.execute(select(HOSTS.hostname, HOSTS.region)).all())
    assert regions == {"gpu-3": None, "gpu-4": "us-east"}


def test_errors_are_sqlalchemys_and_leave_the_transaction_to_its_owner(database: Database) -> None:
    statement = DirectStatement(insert(Host.__table__))
    with database.engine.connect() as connection:
        with connection.begin():
            statement.execute(connection, {"hostname": "gpu-5", "labels": {}})
        transaction = connection.begin()
        with pytest.raises(IntegrityError):
            statement.execute(connection, {"hostname": "gpu-5", "labels": {}})
        transaction.rollback()
        assert connection.execute(select(HOSTS.hostname)).scalars().all() == ["gpu-5"]


def test_cursor_events_see_every_statement(database: Database) -> None:
    seen: list[str] = []
    named = update(Host.__table__).where(HOSTS.hostname == bindparam("name"))
    statement = DirectStatement(named.values(sku="a"))

    def record(_conn, _cursor, sql, _parameters, _context, _many) -> None:  # type: ignore[no-untyped-def]
        seen.append(sql)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        with database.engine.begin() as connection:
            assert statement.execute(connection, {"name": "nobody"}) == []
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    assert [sql.split()[0] for sql in seen if sql != "BEGIN IMMEDIATE"] == ["UPDATE"]


def test_what_it_cannot_run_is_refused_when_compiled(database: Database) -> None:
    names = bindparam("names", expanding=True)
    expanding = DirectStatement(select(HOSTS.id).where(HOSTS.hostname.in_(names)))
    with database.engine.connect() as connection, pytest.raises(ValueError, match="IN lists"):
        expanding.execute(connection, {"names": ["a", "b"]})
