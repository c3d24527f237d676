"""`crashreg import`, as a real process, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import crashreg
from tests.support.golden import golden
from tests.support.http import auth

GPF = golden("kinds/gpf")


def test_import_backfills_a_tree_idempotently(db_url, client, tmp_path: Path, make_token) -> None:
    tmp_path = tmp_path / "history"
    tmp_path.mkdir()
    (tmp_path / "gpu-a017").mkdir()
    (tmp_path / "gpu-a017" / "2025-03-01.log").write_text(GPF)
    (tmp_path / "gpu-a017" / "boot.log").write_text("[    0.000000] Linux version 6.8.0\n")
    (tmp_path / "gpu-b2").mkdir()
    (tmp_path / "gpu-b2" / "2025-04-02.log").write_text(GPF.replace("[  ", "[ 9"))
    stack = {"executable": "/usr/bin/trainer", "signal": "SIGSEGV",
             "frames": [{"function": "step", "module": "libtrain.so"}],
             "registers": {"rip": "0x0", "rsp": "0x7ffe0000"},
             "evidence": {"pc_perms": "", "slots": [{"offset": -8, "value": "0x0"}]}}
    (tmp_path / "core.json").write_text(json.dumps({
        "source": "userspace", "crashed_at": "2025-05-01T00:00:00Z",
        "host": {"hostname": "cpu-c9"}, "stack": stack}))
    (tmp_path / "broken.json").write_text(json.dumps({"source": "nowhere"}))
    (tmp_path / "gpu-b2" / "noise.log").write_text(GPF.replace("Call Trace", "Call\x00Trace"))

    first = crashreg(db_url, "import", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "imported: 3" in first.stdout and "no crash: 1" in first.stdout
    assert "rejected: 2" in first.stdout and "broken.json" in first.stderr
    assert "noise.log" in first.stderr and "NUL" in first.stderr  # not a database error
    second = crashreg(db_url, "import", str(tmp_path))
    assert second.stdout.splitlines()[-1] == "already imported: 3, no crash: 1, rejected: 2"

    reader = make_token("read")
    listed = client.get("/api/v1/signatures", headers=auth(reader)).json["signatures"]
    counts = {s["kind"]: s["event_count"] for s in listed}
    assert counts == {"gpf": 2, "userspace": 1}
    userspace = next(s for s in listed if s["kind"] == "userspace")
    assert userspace["labels"] == ["return-to-null", "segfault"]
