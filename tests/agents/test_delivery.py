"""How the Python reporters deliver: draining the spool with other drainers at work, name
lookups, the one deadline per delivery, Retry-After and jitter; against real HTTP servers on
loopback (tests/support/agents.py), never a mocked HTTP path."""

from __future__ import annotations

import fcntl
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.kernellog.watch import Watcher
from agents.reporter import client
from agents.reporter.config import Config
from agents.reporter.spool import resend
from tests.support.agents import CREATED, Answer, ScriptedServer, closed_port_url

BOOT_ID = "2b4f8d1e-6c3a-4f5e-9d7b-0a1c2e3f4a5b"
REPORT = b'{"report_id": "live-x", "source": "live_kernel"}'


def spool_config(tmp_path: Path, url: str, **values: object) -> Config:
    settings = {"url": url, "token_file": str(tmp_path / "no-token"), "spool_dir": str(tmp_path / "spool"),
                "retries": 0, "retry_delay": 0.0} | values
    return Config(**settings)  # type: ignore[arg-type]


def spooled(tmp_path: Path, name: str = "live-x.json") -> Path:
    path = tmp_path / "spool" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(REPORT)
    return path


# --- several drainers at once ------------------------------------------------------------


def test_a_spool_file_gone_before_it_is_read_is_skipped(tmp_path: Path) -> None:
    """Listed, then sent and moved by another drainer before this one reads it: skipped, not a
    FileNotFoundError."""
    config = spool_config(tmp_path, closed_port_url())
    assert resend(config, tmp_path / "spool" / "live-gone.json") == ("skipped", None)


def test_a_spool_file_another_drainer_is_sending_is_not_sent_again_meanwhile(tmp_path: Path) -> None:
    path = spooled(tmp_path)
    with ScriptedServer([CREATED]) as server, path.open("rb") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # another drainer has it
        outcome = resend(spool_config(tmp_path, server.url), path)
    assert outcome == ("skipped", None) and server.seen == []
    assert path.exists()  # left to the drainer that has it


def test_a_spool_file_moved_by_another_drainer_while_it_was_sent_is_sent_not_a_crash(tmp_path: Path) -> None:
    """The other drainer moved it to sent/ while this one's request was in flight (the same
    report_id twice: the registry replays it); the watcher, which promises never to die, goes on."""
    path = spooled(tmp_path)
    moved = tmp_path / "spool" / "sent" / path.name

    def other_drainer() -> None:
        moved.parent.mkdir(exist_ok=True)
        path.replace(moved)

    with ScriptedServer([CREATED], before_answer=other_drainer) as server:
        outcome, answer = resend(spool_config(tmp_path, server.url), path)
        assert outcome == "sent" and answer is not None and answer["event_id"] == "1"
        assert moved.read_bytes() == REPORT

        path.write_bytes(REPORT)  # the same, through the watcher's delivery
        (tmp_path / "boot_id").write_text(BOOT_ID + "\n")
        config = spool_config(tmp_path, server.url, boot_id_file=str(tmp_path / "boot_id"), hostname="h")
        watcher = Watcher(config, tmp_path / "state.json", 60.0)
        watcher.deliver()
    assert server.seen == ["/api/v1/reports"] * 2 and not watcher.pending()


def test_the_watcher_survives_a_spool_file_it_cannot_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "spool" / "live-a.json").mkdir(parents=True)  # not a file: IsADirectoryError
    (tmp_path / "boot_id").write_text(BOOT_ID + "\n")
    config = spool_config(tmp_path, closed_port_url(), boot_id_file=str(tmp_path / "boot_id"), hostname="h")
    watcher = Watcher(config, tmp_path / "state.json", 60.0)
    watcher.deliver()
    assert "live-a.json: not sent: IsADirectoryError" in capsys.readouterr().err


# --- name lookups ----------------------------------------------------------------------

SILENT_NAME = "registry.silent.invalid"  # its resolver never answers
KNOWN_NAME = "registry.known.invalid"  # resolved to loopback


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The resolver a host may have: SILENT_NAME's lookup blocks (until the test ends), and
    KNOWN_NAME is 127.0.0.1; the names looked up are kept, in order."""
    real, asked, released = socket.getaddrinfo, [], threading.Event()

    def getaddrinfo(host: str, port: object, *args: object, **kwargs: object) -> object:
        flags = kwargs.get("flags", 0)
        if host in (SILENT_NAME, KNOWN_NAME) and not flags & socket.AI_NUMERICHOST:
            asked.append(host)
            if host == SILENT_NAME:
                released.wait(30)
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            host = "127.0.0.1"
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield asked
    released.set()


def test_a_name_lookup_that_never_answers_is_bounded_by_the_connect_timeout(resolver: list[str]) -> None:
    config = Config(url=f"http://{SILENT_NAME}:8080", token_file="/nonexistent", connect_timeout=0.2,
                    max_time=20)
    with pytest.raises(TimeoutError, match=rf"name lookup of {SILENT_NAME} took longer than 0\.2s"):
        client.http_request(config, "POST", "/api/v1/reports", b"{}")
    assert resolver == [SILENT_NAME]


def test_a_name_is_looked_up_and_connected_to(resolver: list[str]) -> None:
    with ScriptedServer([CREATED]) as server:
        config = Config(url=server.url.replace("127.0.0.1", KNOWN_NAME), token_file="/nonexistent")
        response = client.http_request(config, "POST", "/api/v1/reports", b"{}")
    assert (response.status, server.seen, resolver) == (201, ["/api/v1/reports"], [KNOWN_NAME])


# --- one deadline per delivery, Retry-After, jitter ----------------------------------------

BUSY_FOR_AN_HOUR: Answer = (503, {"Retry-After": "3600"}, b'{"error": "busy"}')


def post(url: str, **values: object) -> object:
    settings = {"url": url, "token_file": "/nonexistent", "retries": 3, "retry_delay": 0.0} | values
    return client.post_with_retries(Config(**settings), "/api/v1/reports", b"{}")  # type: ignore[arg-type]


@pytest.mark.parametrize(("delay", "retry_after", "jitter", "wait"), [
    (1.0, None, 0.0, 0.5), (1.0, None, 1.0, 1.5), (4.0, None, 0.25, 3.0),  # backoff: 0.5 to 1.5 times
    (4.0, "30", 0.5, 32.0), (1.0, " 0 ", 0.0, 0.0),  # told: that long, and jitter on top
    (2.0, "Wed, 21 Oct 2026 07:28:00 GMT", 0.0, 1.0), (2.0, "-5", 0.0, 1.0),  # not seconds: the backoff
])
def test_the_wait_before_a_retry_is_retry_after_else_the_backoff_with_jitter(
        delay: float, retry_after: str | None, jitter: float, wait: float) -> None:
    assert client.retry_wait(delay, retry_after, jitter) == wait


def test_a_retry_after_past_the_deadline_ends_the_delivery_at_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The registry says come back in an hour: the reporter does not retry at +1, +2, +4 s
    regardless (nor wait the hour): it gives up now, and its caller falls back and spools."""
    with ScriptedServer([BUSY_FOR_AN_HOUR]) as server, pytest.raises(client.Unsent) as unsent:
        post(server.url, deadline=60.0)
    assert unsent.value.status == 503 and len(server.seen) == 1
    assert "no attempt after a wait of 3600.0 s: past the delivery's deadline (CRASHREG_DEADLINE, 60 s)" \
        in capsys.readouterr().err


def test_a_retry_after_within_the_deadline_is_waited_and_retried() -> None:
    with ScriptedServer([(503, {"Retry-After": "0"}, b""), CREATED]) as server:
        assert post(server.url, deadline=60.0).status == 201  # type: ignore[attr-defined]
    assert len(server.seen) == 2


def test_every_attempt_is_clipped_to_what_is_left_of_the_deadline() -> None:
    """A registry that accepts and never answers: MAX_TIME=5 would hold the crash kernel (or
    the dying process) 5 s an attempt, 4 attempts; the delivery's 0.3 s bound the first
    attempt itself, and no second one starts."""
    accepted: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(client.Unsent, match=r"took longer than 0\.[0-3]\d*s"):
            post(url, max_time=5.0, deadline=0.3)
        silent.settimeout(0)
        try:
            while True:
                accepted.append(silent.accept()[0])
        except BlockingIOError:
            pass
    for conn in accepted:
        conn.close()
    assert len(accepted) == 1


def test_the_core_handler_has_a_shorter_deadline_than_the_crash_kernel() -> None:
    defaults = Config()
    assert 0 < defaults.core_deadline < defaults.deadline
