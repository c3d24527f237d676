"""Retention's gc as it runs: against moto's S3 server with the network to it lost mid-run and
the rerun finishing the work; `crashreg storage gc [--dry-run]`; the scheduler's job; one
run at a time. Both databases."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from botocore.exceptions import EndpointConnectionError
from click.testing import CliRunner
from sqlalchemy import select

from registry.cli import main
from registry.cli_support import CliContext
from registry.config import DumpStoreSettings, Settings
from registry.db import Database, utcnow
from registry.retention.gc import collect
from registry.storage.models import Dump
from registry.storage.store import open_store
from sync.leader import leader_lock
from sync.retention.jobs import storage_gc
from sync.retention.run import GC_LOCK
from sync.scheduler import JobContext
from testkit.s3 import S3Gate
from tests.support.retention import LATER, Fleet
from tests.support.s3 import S3_ENV, S3Server


class Proxy:
    """A TCP relay to the S3 server: the network path the registry reaches the store by."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def cut(self) -> None:
        """The network to the store goes: no new connection, the open ones reset."""
        for connection in [self.listener, *self.open]:
            with contextlib.suppress(OSError):  # shutdown wakes a blocked accept()/recv(): close() does not
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


def test_s3_lost_mid_run_then_the_rerun_finishes_without_touching_kept_dumps(
    client, make_token, database, settings, s3_server: S3Server, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    bucket = s3_server.bucket()
    host, port = s3_server.endpoint.removeprefix("http://").split(":")
    proxy = Proxy((host, int(port)))
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint)
    gc_settings = replace(settings, dump_store=DumpStoreSettings(url=f"s3://{bucket}/crashreg"))
    store = open_store(gc_settings.dump_store, settings.public_url)
    fleet = Fleet(client, make_token, database, store)
    exemplars = fleet.crash("s3_bug", 3)
    doomed = fleet.crash("s3_bug", 6)
    later = utcnow() + LATER
    progress: list[str] = []

    def cut_after_first_batch(line: str) -> None:
        progress.append(line)
        if line.startswith("deleted"):
            proxy.cut()

    with pytest.raises(EndpointConnectionError):
        collect(database, store, gc_settings, now=later, progress=cut_after_first_batch, batch=2)
    assert progress == ["dumps: 6 to delete, 0 to restore, 3 kept",
                        "deleted 2 dumps so far (2000 bytes freed)"]
    states = fleet.states()
    assert [states[c] for c in doomed] == ["deleted", "deleted", "deleting", "deleting", "stored", "stored"]

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)  # the network is back
    store = open_store(gc_settings.dump_store, settings.public_url)
    fleet.store = store
    assert fleet.present() == set(exemplars) | set(doomed[2:])
    outcome = collect(database, store, gc_settings, now=later, batch=2)
    assert (outcome.dumps_deleted, outcome.bytes_freed) == (4, 4000)
    assert fleet.states() == {c: "stored" if c in exemplars else "deleted" for c in fleet.captures}
    assert fleet.present() == set(exemplars)
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="crashreg/")["Contents"]
    assert len(listed) == len(exemplars)


@pytest.fixture
def local_settings(settings: Settings, tmp_path: Path) -> Settings:
    return replace(settings, dump_store=DumpStoreSettings(url=str(tmp_path / "dumps")))


def test_the_command_and_the_job_run_gc_one_at_a_time(
    client, make_token, database: Database, local_settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    store = open_store(local_settings.dump_store, local_settings.public_url)
    fleet = Fleet(client, make_token, database, store)
    fleet.crash("cli_bug", 4)  # 3 exemplars and one "N more" dump: young, so kept
    runner = CliRunner()
    dry = runner.invoke(main, ["storage", "gc", "--dry-run"], obj=CliContext(local_settings))
    assert dry.exit_code == 0, dry.output
    assert "dumps: would delete 0 (0 bytes), restored 0, kept by rule: exemplar 3, recent 1" in dry.output

    aged = replace(local_settings, retention=replace(local_settings.retention, dump_days=0))
    lock = leader_lock(database.engine, GC_LOCK)
    assert lock.try_acquire()
    try:
        busy = runner.invoke(main, ["storage", "gc"], obj=CliContext(aged))
        assert busy.exit_code == 1 and "another retention gc is running" in busy.output
        assert storage_gc(JobContext(aged, database)) == {
            "skipped": "another retention gc is running (the scheduler's storage-gc job or a command)"
        }
    finally:
        lock.release()
    assert set(fleet.states().values()) == {"stored"}
    done = storage_gc(JobContext(aged, database, clock=lambda: utcnow() + timedelta(days=1)))
    assert done == {"dumps_deleted": 1, "bytes_freed": 1000, "logs_trimmed": 0, "log_bytes_freed": 0}
    again = runner.invoke(main, ["storage", "gc"], obj=CliContext(aged))
    assert again.exit_code == 0 and "dumps: deleted 0 (0 bytes)" in again.output
    with database.session() as session:
        assert sorted(session.scalars(select(Dump.state))) == ["deleted", "stored", "stored", "stored"]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'crashreg_dump_store_objects{state="deleted"} 1.0' in metrics
    assert 'crashreg_dump_store_bytes{state="stored"} 3000.0' in metrics
    assert "crashreg_retention_dump_bytes_freed_total 1000.0" in metrics
    assert "crashreg_retention_dumps_deleted_total 1.0" in metrics


def run_gc(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`crashreg storage gc` as its own process, as cron or an operator runs it."""
    command = [str(Path(sys.executable).with_name("crashreg")), "storage", "gc", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def output(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.read()


def test_gc_killed_mid_deletion_then_rerun_ends_as_one_run_would_and_keeps_referenced_dumps(
    client, make_token, database, settings, s3_server: S3Server, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A real `crashreg storage gc` is SIGKILLed while it deletes: the store in front of moto
    (testkit.s3.S3Gate) holds its third DELETE and kills the process then, so exactly two
    objects went, every doomed row is `deleting` and none is recorded. Meanwhile a pin or an
    RCA on a dump being deleted is refused. The rerun deletes and records the rest: the end
    state is what the dry run before predicted, and the pinned, cited and exemplar dumps stay."""
    bucket = s3_server.bucket()
    gate = S3Gate(s3_server.endpoint)
    env = os.environ | S3_ENV | {
        "AWS_ENDPOINT_URL_S3": gate.endpoint,
        "AWS_MAX_ATTEMPTS": "1",
        "CRASHREG_DATABASE_URL": settings.database_url,
        "CRASHREG_DUMP_STORE": f"s3://{bucket}/crashreg",
        "CRASHREG_RETENTION_DUMP_DAYS": "0",
    }
    for name, value in (S3_ENV | {"AWS_ENDPOINT_URL_S3": s3_server.endpoint}).items():
        monkeypatch.setenv(name, value)
    store = open_store(DumpStoreSettings(url=f"s3://{bucket}/crashreg"), settings.public_url)
    try:
        fleet = Fleet(client, make_token, database, store)
        exemplars = fleet.crash("killed_gc_bug", 3)
        extra = fleet.crash("killed_gc_bug", 7)
        pinned, cited, cited_event = extra[1], extra[2], extra[3]
        assert fleet.pin(pinned).status_code == 201
        assert fleet.propose_rca(cited).status_code == 201
        assert fleet.propose_rca(cited_event, by_event=True).status_code == 201
        doomed = [c for c in extra if c not in (pinned, cited, cited_event)]

        dry = run_gc(env, "--dry-run")
        assert dry.wait(timeout=120) == 0
        assert f"would delete {len(doomed)} ({len(doomed) * 1000} bytes)" in output(dry)

        killed: list[subprocess.Popen[str]] = []
        started = threading.Event()
        gate.hold = lambda method, path: method == "DELETE" and gate.count("DELETE") >= 2

        def kill() -> None:
            started.wait(120)
            os.kill(killed[0].pid, signal.SIGKILL)

        gate.on_hold = kill
        killed.append(run_gc(env))
        started.set()
        assert killed[0].wait(timeout=120) == -signal.SIGKILL
        gate.hold = lambda method, path: False
        assert [method for method, _ in gate.held] == ["DELETE"]
        states = fleet.states()
        assert {states[c] for c in doomed} == {"deleting"}
        assert {states[c] for c in [*exemplars, pinned, cited, cited_event]} == {"stored"}
        assert len(set(doomed) - fleet.present()) == 2  # two went before the kill, none since
        assert fleet.pin(doomed[-1]).status_code == 409
        refused = fleet.propose_rca(doomed[-1], by_event=True)
        assert refused.status_code == 409 and "being deleted by retention" in refused.json["error"]["message"]

        rerun = run_gc(env)
        assert rerun.wait(timeout=120) == 0
        assert f"dumps: deleted {len(doomed)} ({len(doomed) * 1000} bytes)" in output(rerun)
        assert fleet.states() == {c: "deleted" if c in doomed else "stored" for c in fleet.captures}
        assert fleet.present() == set(fleet.captures) - set(doomed)
        listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="crashreg/")["Contents"]
        assert len(listed) == len(fleet.captures) - len(doomed)
    finally:
        gate.stop()
