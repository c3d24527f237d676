"""A PostgreSQL primary and its streaming replica, both temporary clusters of this machine's
PostgreSQL binaries on free ports (the main cluster's configuration is never touched): the
replica made with `pg_basebackup -R -X stream`, as an operator would. Run as the `postgres`
user when the tests run as root (initdb refuses root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

PG_BIN = Path(os.environ.get("CRASHREG_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
READY_TIMEOUT_S = 60  # a deadline for conditions waited on, never a measured time
# Cheap, quiet temporary clusters: no fsync, small memory, no autovacuum writing WAL unasked.
CLUSTER_SETTINGS = (
    "listen_addresses = '127.0.0.1'", "fsync = off",
    "full_page_writes = off", "shared_buffers = 16MB", "max_connections = 40",
    "autovacuum = off", "wal_level = replica", "max_wal_senders = 4", "hot_standby = on",
    # every statement in the server's log, with the client's application_name: what ran where
    "log_statement = 'all'", "log_line_prefix = '[%a] '",
)


def binaries_missing() -> str | None:
    """Why the pair cannot be made here, or None."""
    missing = [name for name in ("initdb", "pg_ctl", "pg_basebackup") if not (PG_BIN / name).exists()]
    return f"PostgreSQL binaries missing in {PG_BIN}: {', '.join(missing)}" if missing else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def as_postgres(*command: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [str(part) for part in command]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "postgres", "--", *argv]
    return subprocess.run(argv, check=True, capture_output=True, text=True)


@dataclass
class Cluster:
    data: Path
    port: int

    def url(self, database: str, **query: str) -> str:
        suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}{suffix}"

    def start(self) -> None:
        as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-l", self.data / "server.log", "-w", "start")

    def stop(self) -> None:
        as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def log_size(self) -> int:
        return (self.data / "server.log").stat().st_size

    def statements_since(self, offset: int, application_name: str) -> list[str]:
        """The statements clients named `application_name` ran since the log was `offset` long."""
        with (self.data / "server.log").open(encoding="utf-8", errors="replace") as log:
            log.seek(offset)
            prefix = f"[{application_name}] LOG:  statement: "
            return [line.removeprefix(prefix) for line in log if line.startswith(prefix)]

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(database), autocommit=True) as connection:
            cursor = connection.execute(sql)
            return cursor.fetchall() if cursor.description else []


@dataclass
class ReplicaPair:
    primary: Cluster
    replica: Cluster

    def primary_position(self) -> int:
        return int(self.primary.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0][0])

    def wait_replayed(self, position: int | None = None) -> None:
        """Until the replica has replayed `position` (default: the primary's position now)."""
        target = self.primary_position() if position is None else position
        self.wait_for(f"SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= {target}")

    def wait_streaming(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.primary.execute("SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'"):
            assert time.monotonic() < deadline, "the replica never started streaming"
            time.sleep(0.05)

    def wait_for(self, condition: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.replica.execute(condition)[0][0]:
            assert time.monotonic() < deadline, f"the replica never met: {condition}"
            time.sleep(0.02)

    def pause_replay(self) -> None:
        self.replica.execute("SELECT pg_wal_replay_pause()")
        self.wait_for("SELECT pg_get_wal_replay_pause_state() = 'paused'")

    def resume_replay(self) -> None:
        self.replica.execute("SELECT pg_wal_replay_resume()")


@contextmanager
def replica_pair() -> Iterator[ReplicaPair]:
    """A primary and its streaming replica, stopped and deleted afterwards."""
    root = Path(tempfile.mkdtemp(prefix="crashreg-replica-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    primary = Cluster(root / "primary", free_port())
    replica = Cluster(root / "replica", free_port())
    started: list[Cluster] = []
    try:
        as_postgres(PG_BIN / "initdb", "-D", primary.data, "-U", "postgres", "--auth=trust", "--no-sync")
        configure(primary, root)
        primary.start()
        started.append(primary)
        as_postgres(PG_BIN / "pg_basebackup", "-h", "127.0.0.1", "-p", primary.port, "-U", "postgres",
                    "-D", replica.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
        configure(replica, root)
        replica.start()
        started.append(replica)
        pair = ReplicaPair(primary, replica)
        pair.wait_streaming()
        yield pair
    finally:
        for cluster in reversed(started):
            subprocess.run([*(["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []),
                            str(PG_BIN / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "stop"],
                           capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def configure(cluster: Cluster, root: Path) -> None:
    """Its port and settings, appended to postgresql.auto.conf (pg_basebackup -R wrote the
    replica's primary_conninfo there; the last setting wins)."""
    lines = [*CLUSTER_SETTINGS, f"port = {cluster.port}", f"unix_socket_directories = '{root}'"]
    script = f"cat >> '{cluster.data}/postgresql.auto.conf' <<'EOF'\n" + "\n".join(lines) + "\nEOF\n"
    as_postgres("sh", "-c", script)
