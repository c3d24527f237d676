"""A stack deeper than the engine's window of frames: the frames it does not read are named
from the registry's symbols too when the event is read (API and page), so an engineer sees
the whole stack of a stripped program by function and file:line; both databases."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from flask import Flask
from flask.testing import FlaskClient

from registry.config import Settings
from testkit.pages import login
from testkit.reports import crash_report
from tests.support.cli import crashreg_for
from tests.support.http import auth
from tests.support.reported_releases import settle
from tests.support.symbols import Pipeline, compile_program, function_start
from tests.support.userspace import stack

DEPTH = 40  # a recursion deeper than the engine reads (16 frames around the guilty one)
OUTSIDE = "outside the engine's window of frames"
BEFORE = "passed over to reach the guilty frame (before the engine's window of frames)"


def test_frames_outside_the_engines_window_are_named_from_the_registrys_symbols(
    app: Flask, live_server: str, make_token: Callable[..., str], tmp_path: Path, settings: Settings,
) -> None:
    program = compile_program(tmp_path / "deep", "deep", function="descend_record")
    uploaded = Pipeline(live_server, make_token("symbols"), tmp_path).upload(
        program.debug.read_bytes(), program.build_id)
    assert uploaded.status_code == 200, uploaded.text
    settle(app)
    start = function_start(program.unstripped, program.function)
    # as the core reader sends a stripped program's frames: module, build-id, offset, no name
    offsets = [hex(start + (4 if at == 0 else 9)) for at in range(DEPTH)]  # the pc, then return addresses
    module = {"module": "/opt/deep/deep", "build_id": program.build_id}
    frames = [module | {"offset": offset} for offset in offsets]
    threads = [{"tid": 4243, "frames": frames[1:4]}]  # another thread, in the same code
    report = crash_report(source="userspace", console_log=None,
                          stack=stack(executable="/opt/deep/deep", build_id=program.build_id, frames=frames,
                                      threads=threads))
    client, reader = app.test_client(), make_token("read")
    answer = client.post("/api/v1/reports", json=report, headers=auth(make_token("report")))
    assert answer.status_code == 201, answer.json
    assert answer.json["signature"]["title"].startswith(f"SIGSEGV (segfault) in {program.function} ")

    event_id = answer.json["event_id"]
    userspace = client.get(f"/api/v1/events/{event_id}", headers=auth(reader)).json["userspace"]
    read = userspace["frames"]
    # the other threads' frames are named too (they were module+offset, symbols held or not)
    [other] = userspace["threads"]
    assert [(f["index"], f["function"], Path(f["file"]).name) for f in other["frames"]] == [
        (index, program.function, "deep.c") for index in range(3)]
    sent = [frame for frame in read if frame["index"] is not None]
    assert [frame["index"] for frame in sent] == list(range(DEPTH))
    outside = [frame for frame in sent if frame["note"] == OUTSIDE]
    assert outside and sent[-1] in outside  # the engine read the innermost frames only
    for frame in sent:  # every frame sent, in the window or not, by the function and its line
        assert frame["function"] == program.function and Path(frame["file"]).name == "deep.c", frame
        assert frame["line"] > 0
    assert all(frame["decision"] is None for frame in outside)
    login(client, reader)
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    assert page.count(f"{Path(sent[-1]['file']).name}:{sent[-1]['line']}") >= len(outside)

    # `crashreg triage-bundle`, a command with no app, names them from the same symbols, marked
    # as outside the window (they were `?`, "not read", and unnamed)
    out = tmp_path / "bundle"
    written = crashreg_for(settings, "triage-bundle", answer.json["signature"]["id"], "--out", str(out))
    assert written.returncode == 0, written.stderr
    [bundled] = json.loads((out / "bundle.json").read_text())["events"]
    assert all(frame["function"] == program.function for frame in bundled["userspace"]["frames"])
    agents = (out / "AGENTS.md").read_text()
    outermost = rf"^\. #{DEPTH - 1} {program.function} \[deep\+0x[0-9a-f]+\] at .*deep\.c:\d+"
    assert re.search(outermost, agents, re.M), agents


def test_frames_the_engine_passed_over_before_its_window_say_so(
    client: FlaskClient, make_token: Callable[..., str],
) -> None:
    """A guilty frame deep under the runtime's machinery (a Rust panic's, an abort's): the
    engine keeps a window of frames around it, and the innermost ones it passed over to reach
    it say so, skipped in the bundle (they read "outside the window", "not read")."""
    runtime = [{"function": f"runtime_step_{n}", "module": "/usr/lib/x86_64-linux-gnu/libc.so.6"}
               for n in range(14)]
    program = [{"function": name, "module": "/opt/app/app"} for name in ("parse_record", "main")]
    report = crash_report(source="userspace", console_log=None,
                          stack=stack(executable="/opt/app/app", frames=runtime + program))
    answer = client.post("/api/v1/reports", json=report, headers=auth(make_token("report")))
    assert answer.status_code == 201, answer.json
    reader = make_token("read")
    read = client.get(f"/api/v1/events/{answer.json['event_id']}", headers=auth(reader)).json
    sent = read["userspace"]["frames"]
    assert sent[14]["decision"] == "guilty" and sent[14]["function"] == "parse_record"
    before = [frame for frame in sent if frame["note"] == BEFORE]
    assert [frame["index"] for frame in before] == [0, 1]
    assert all(frame["decision"] is None for frame in before)
    assert all(frame["decision"] == "skipped" for frame in sent[2:14])
    bundle = client.get(f"/api/v1/signatures/{answer.json['signature']['id']}/triage-bundle",
                        headers=auth(reader)).json
    assert re.search(r"^- #0 runtime_step_0 \[libc\.so\.6\]", bundle["agents_md"], re.M)
