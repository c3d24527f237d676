"""How the Python reporters deliver: draining the spool with other drainers at work, name
lookups, the one deadline per delivery, Retry-After and jitter; against real HTTP servers on
loopback (tests/support/agents.py), never a mocked HTTP path."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from agents.kernellog.watch import Watcher
from agents.reporter.config import Config
from agents.reporter.spool import resend
from tests.support.agents import CREATED, ScriptedServer, closed_port_url

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
