"""Database plumbing shared by every domain: the declarative base, UTC time, engines, sessions."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Connection, DateTime, MetaData, create_engine, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.pool import QueuePool
from sqlalchemy.types import TypeDecorator

from registry.config import ReadReplicaSettings
from registry.replica import ReadReplica, wal_position

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on both databases: timestamptz on PostgreSQL, UTC text on SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime refused: store timezone-aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSONType, list[Any]: JSONType}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names (relative to the working directory), None for memory or
    another database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).resolve()


UPGRADE_HINT = "run `crashreg db upgrade`"


def missing_sqlite_file(url: str) -> Path | None:
    """The SQLite file a URL names when it is not there (None: it is, or another database):
    opening it would create an empty one, which only `db upgrade` should."""
    path = sqlite_path(url)
    return path if path is not None and not path.exists() else None


def no_database(where: str) -> str:
    return f"no database at {where}: {UPGRADE_HINT} to create it, or point CRASHREG_DATABASE_URL at yours"


def make_engine(url: str, lock_wait_s: float = 0, **kwargs: Any) -> Engine:
    """An engine for either database; SQLite gets WAL, foreign keys and a busy timeout. A
    failed statement's error (and so its log line) leaves out its parameters: a report's
    console log, a caller's token hash. `lock_wait_s`: its connections give up waiting for a
    lock after so long (0: they wait as long as it is held; SQLite: its busy timeout)."""
    kwargs.setdefault("hide_parameters", True)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        # pysqlite's implicit BEGIN handling breaks SAVEPOINT; take control of transactions.
        # Again at each checkout: a connection for reads (AUTOCOMMIT) comes back reset to it.
        event.listen(engine, "connect", _sqlite_autocommit_off)
        event.listen(engine, "checkout", _sqlite_autocommit_off)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        kwargs.setdefault("pool_size", 5)
        kwargs.setdefault("max_overflow", 10)
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _stamp_idle)
        event.listen(engine, "checkin", _stamp_idle)
        event.listen(engine, "checkout", _ping_if_idle)
    if lock_wait_s:
        milliseconds = max(1, round(lock_wait_s * 1000))  # 0 would mean no bound on either
        bound = LOCK_WAIT[engine.dialect.name].format(milliseconds)
        event.listen(engine, "connect", _bounded_lock_waits(bound))
    return engine


# What makes a connection give up waiting for a lock after so many milliseconds, run once when
# it is made (not in each transaction): PostgreSQL's lock_timeout (a table's lock or a row's),
# SQLite's busy timeout (the database's one write lock, which BEGIN IMMEDIATE takes first).
LOCK_WAIT = {"postgresql": "SET lock_timeout = {}", "sqlite": "PRAGMA busy_timeout = {}"}
# The SQLSTATE of a statement whose lock_timeout ran out (SQLite's: SQLITE_BUSY).
LOCK_NOT_AVAILABLE = "55P03"


def _bounded_lock_waits(statement: str) -> Callable[[Any, Any], None]:
    def bound(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(statement)
        cursor.close()
        dbapi_connection.commit()  # PostgreSQL: kept past the transaction the driver began for it

    return bound


# A pooled connection is pinged before use only when it has sat idle: a connection used a
# moment ago is alive unless the database restarted in that moment, and pinging every checkout
# (pool_pre_ping) costs a round trip and ~3% of a crash storm's CPU. A connection killed while
# the pool was busy fails its statement instead: the pool is invalidated, the request answers
# the contract's retryable 503, and ingest retries its transaction once by itself.
PING_AFTER_IDLE_S = 1.0
# Ingest's kept connections plan every statement generically, once: its statements are key
# lookups that a custom plan gains nothing on, and the foreign key check of a report into the
# partitioned events (docs/partitioning.md) was planned afresh for each report (0.07 ms of
# PostgreSQL's CPU against 0.03 ms). Reset before a connection goes back to the pool.
PLAN_GENERICALLY, PLAN_AS_DEFAULT = "SET plan_cache_mode = force_generic_plan", "RESET plan_cache_mode"


def _stamp_idle(_dbapi_connection: Any, record: Any) -> None:
    record.info["idle_since"] = time.monotonic()


def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    if time.monotonic() - record.info["idle_since"] < PING_AFTER_IDLE_S:
        return
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        dbapi_connection.rollback()  # leave no transaction open: a lookup turns on autocommit next
    except Exception as error:  # any failure: the pool replaces the connection and checks out again
        raise DisconnectionError(f"idle connection is gone: {error}") from error


def _sqlite_autocommit_off(dbapi_connection: Any, *_: Any) -> None:
    dbapi_connection.isolation_level = None


# A connection option: its transactions only read (Database.read_only).
READS_ONLY = "crashreg_reads_only"


def _sqlite_begin(conn: Any) -> None:
    # IMMEDIATE takes the write lock up front: no SQLITE_BUSY on a read-to-write upgrade,
    # which busy_timeout cannot resolve. WAL readers still proceed beside a writer: a connection
    # for reads alone outside transactions (AUTOCOMMIT, Database.autocommit_reads), or in one
    # that only reads (a deferred BEGIN: one snapshot, no write lock, Database.read_only).
    options = conn.get_execution_options()
    if options.get("isolation_level") != "AUTOCOMMIT":
        conn.exec_driver_sql("BEGIN" if options.get(READS_ONLY) else "BEGIN IMMEDIATE")


def dialect_name(engine_or_session: Engine | Session) -> str:
    """"postgresql" or "sqlite": what each domain's dialect module is chosen by."""
    bind = engine_or_session.get_bind() if isinstance(engine_or_session, Session) else engine_or_session
    return bind.dialect.name


def is_postgresql(engine_or_session: Engine | Session) -> bool:
    return dialect_name(engine_or_session) == "postgresql"


# How the replica's connections show in pg_stat_activity (unless its URL names another), and
# how long a connection attempt may take before its reads go to the primary.
REPLICA_APPLICATION_NAME = "crashreg-reads"
REPLICA_CONNECT_TIMEOUT_S = 3


def replica_engine(url: str) -> Engine:
    connect_args: dict[str, Any] = {"connect_timeout": REPLICA_CONNECT_TIMEOUT_S}
    if "application_name" not in make_url(url).query:
        connect_args["application_name"] = REPLICA_APPLICATION_NAME
    return make_engine(url, connect_args=connect_args)


def on_replica(session: Session) -> bool:
    """Whether `session` reads the read replica (a hot standby: no writes, no temporary tables)."""
    return bool(session.info.get("replica"))


class Database:
    """One engine and its session factory; the Flask app and the CLI each hold one. With a read
    replica (`read.url`), `reads()` may serve from it (registry/replica.py says when).

    With `lock_wait_s` (the app's: CRASHREG_INGEST_LOCK_WAIT_S), reporters' work (ingest's
    `autocommit()` connections, `session(bounded=True)`) runs on an engine of its own whose
    connections give up waiting for a lock after so long, set once as each is made: no
    statement a report. Every other connection (pages, jobs, migrations, the CLI) waits as long
    as a lock is held: a bound there would cut the waits they mean to make."""

    def __init__(
        self,
        url: str,
        read: ReadReplicaSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        lock_wait_s: float = 0,
        **engine_kwargs: Any,
    ) -> None:
        self.url = url
        self.engine = make_engine(url, **engine_kwargs)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.bounded_engine = make_engine(url, lock_wait_s, **engine_kwargs) if lock_wait_s else self.engine
        self.bounded_sessions = sessionmaker(self.bounded_engine, expire_on_commit=False)
        self.replica = (
            ReadReplica(replica_engine(read.url), self.engine, read, clock) if read and read.url else None
        )
        # Idle autocommit connections and when each was last used (`autocommit`): fewer than
        # the pool holds, so that sessions always find one (a report needing `store`'s
        # transaction takes a session after its autocommit connection is kept).
        self._autocommit_idle: list[tuple[Connection, float]] = []
        pool = self.bounded_engine.pool
        self._autocommit_kept = max(1, pool.size() - 1) if isinstance(pool, QueuePool) else 1

    @contextmanager
    def session(self, bounded: bool = False) -> Iterator[Session]:
        """A unit of work: commit on success, roll back on any error. `bounded`: a reporter's,
        whose lock waits are bounded (the class's docstring)."""
        session = (self.bounded_sessions if bounded else self.sessions)()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @contextmanager
    def reads(
        self, on_primary: bool = False, replayed: int | None = None, primary: Session | None = None
    ) -> Iterator[Session]:
        """Reads that may be up to the replica's lag bound stale: a session on the replica when
        there is one in use (and, given `replayed`, it has replayed that WAL position), else on
        the primary: `primary` when given (a job's writing session: one SQLite writer), else a
        new one. A session on the replica says so (`on_replica`); nothing it does is
        committed. Reads that must see a write just made use `session()`."""
        connection = None if on_primary else self._replica_connection(replayed)
        if connection is None and primary is not None:
            yield primary
            return
        if connection is None:
            with self.session() if on_primary else self.read_only() as session:
                yield session
            return
        session = Session(bind=connection, expire_on_commit=False, info={"replica": True})
        try:
            yield session
        finally:
            session.close()
            connection.close()

    def _replica_connection(self, replayed: int | None) -> Connection | None:
        if self.replica is None or not self.replica.health().in_use:
            return None
        try:
            connection = self.replica.engine.connect()
        except DBAPIError as error:
            self.replica.failed(error)
            return None
        try:
            if replayed is None or self.replica.replayed(connection, replayed):
                return connection
        except DBAPIError as error:
            self.replica.failed(error)
        connection.close()
        return None

    def wal_position(self) -> int:
        """PostgreSQL: the primary's WAL position now (what a replica must replay to show it)."""
        with self.engine.connect() as connection:
            return wal_position(connection)

    @contextmanager
    def lookup(self, bounded: bool = False) -> Iterator[Session]:
        """For single-row lookups on hot paths (a token's, which stamps its last use now and
        then): on PostgreSQL each statement commits on its own, saving the BEGIN and COMMIT
        round trips of a unit of work; on SQLite a transaction (its write lock taken first).
        `bounded`: a reporter's, whose lock waits are bounded (the class's docstring)."""
        if self.engine.dialect.name != "postgresql":
            with self.session(bounded) as session:
                yield session
            return
        with self.autocommit_reads(bounded) as session:
            yield session

    @contextmanager
    def read_only(self) -> Iterator[Session]:
        """A session that only reads, in one snapshot: on SQLite a WAL reader's transaction (a
        deferred BEGIN), which neither waits for the write lock nor holds it, so a read of
        seconds (an epidemiology view, a long list) does not hold every report back; on
        PostgreSQL a session as any. Nothing it does is committed."""
        if self.engine.dialect.name != "sqlite":
            with self.session() as session:
                yield session
            return
        with self._reading(**{READS_ONLY: True}) as session:
            yield session

    @contextmanager
    def autocommit_reads(self, bounded: bool = False) -> Iterator[Session]:
        """For reads alone: each statement on its own, outside any transaction on both
        databases, so on SQLite it neither waits for the write lock nor holds it (a command
        reading the symbols' records beside its own transaction)."""
        with self._reading(bounded, isolation_level="AUTOCOMMIT") as session:
            yield session

    @contextmanager
    def _reading(self, bounded: bool = False, **options: Any) -> Iterator[Session]:
        """A session on a connection of its own with these execution options; nothing committed."""
        engine = self.bounded_engine if bounded else self.engine
        with engine.connect().execution_options(**options) as connection:
            session = Session(bind=connection, expire_on_commit=False)
            try:
                yield session
            finally:
                session.close()

    @contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """PostgreSQL, for a hot path whose statements each commit by themselves (ingest's): a
        connection kept checked out and in autocommit mode between uses. A report then takes no
        pool checkout and return, no isolation-level switch and reset: about 5% of its CPU in a
        crash storm (bench/README.md). Idle ones wait in a stack, one per concurrent user (a
        sync worker keeps one), up to one less than the pool's size; one idle past
        PING_AFTER_IDLE_S is pinged first, as the pool pings its own, and one invalidated by a
        lost server is dropped. Its lock waits are bounded (the class's docstring)."""
        connection = self._idle_autocommit_connection()
        try:
            yield connection
        finally:
            if not connection.invalidated and not connection.closed:
                if connection.in_transaction():
                    connection.commit()  # a Core transaction's marker: autocommit wrote it already
                if len(self._autocommit_idle) < self._autocommit_kept:
                    self._autocommit_idle.append((connection, time.monotonic()))
                else:  # more at once than it keeps: back to the pool, for sessions
                    try:
                        connection.exec_driver_sql(PLAN_AS_DEFAULT)
                    except DBAPIError:  # lost meanwhile: the pool replaces it
                        connection.invalidate()
                    connection.close()

    def _idle_autocommit_connection(self) -> Connection:
        while self._autocommit_idle:
            try:
                connection, idle_since = self._autocommit_idle.pop()
            except IndexError:  # another thread took the last one
                break
            if time.monotonic() - idle_since < PING_AFTER_IDLE_S:
                return connection
            try:
                connection.exec_driver_sql("SELECT 1")
                return connection
            except DBAPIError:
                connection.invalidate()
                connection.close()
        connection = self.bounded_engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        connection.exec_driver_sql(PLAN_GENERICALLY)
        return connection

    def dispose(self) -> None:
        while self._autocommit_idle:
            self._autocommit_idle.pop()[0].close()
        for engine in {self.engine, self.bounded_engine}:
            engine.dispose()
        if self.replica is not None:
            self.replica.engine.dispose()
