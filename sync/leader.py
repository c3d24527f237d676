"""Leader election for the scheduler: only one crashreg process runs the jobs at a time.

PostgreSQL: a session advisory lock held on a dedicated connection (released by the
server if the process dies). SQLite: an exclusive flock on a file beside the database
(released by the kernel if the process dies). Both are non-blocking: a standby keeps
trying at every tick and takes over when the leader goes away.
"""

from __future__ import annotations

import fcntl
import os
import zlib
from pathlib import Path
from typing import IO, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

LOCK_NAME = "crashreg-scheduler"


class LeaderLock(Protocol):
    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...


class AdvisoryLock:
    """pg_try_advisory_lock on a connection of its own; lost if that connection drops."""

    def __init__(self, engine: Engine, name: str = LOCK_NAME) -> None:
        self.engine = engine
        self.key = zlib.crc32(name.encode())
        self.connection: Connection | None = None

    def try_acquire(self) -> bool:
        if self.connection is not None:
            try:  # still leader only while the session holding the lock is alive
                self.connection.execute(text("SELECT 1"))
                return True
            except SQLAlchemyError:
                self.connection = None
        connection = self.engine.connect()
        try:
            got = connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key}).scalar()
            connection.commit()
        except SQLAlchemyError:
            connection.close()
            return False
        if not got:
            connection.close()
            return False
        self.connection = connection
        return True

    def release(self) -> None:
        if self.connection is not None:
            try:
                self.connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
                self.connection.commit()
            except SQLAlchemyError:
                pass  # the lock went with the session
            self.connection.close()
            self.connection = None


class FileLock:
    """An exclusive, non-blocking flock on `<database>.scheduler.lock`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle: IO[str] | None = None

    def try_acquire(self) -> bool:
        if self.handle is not None:
            return True
        handle = open(self.path, "a+")  # noqa: SIM115 - held open for as long as we lead
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self.handle = handle
        return True

    def release(self) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


def leader_lock(engine: Engine, purpose: str = "scheduler") -> LeaderLock:
    """The lock one process holds for `purpose`: the scheduler's leadership, or one job's run
    (e.g. `storage-gc`, taken by the job and by its command alike)."""
    if engine.dialect.name == "postgresql":
        return AdvisoryLock(engine, f"crashreg-{purpose}")
    database = make_url(str(engine.url)).database
    if not database or database == ":memory:":
        raise ValueError(f"the {purpose} lock needs a SQLite file (or PostgreSQL), not an in-memory database")
    return FileLock(Path(database).with_name(Path(database).name + f".{purpose}.lock"))
