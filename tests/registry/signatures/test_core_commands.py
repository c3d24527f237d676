"""The gdb commands an event gives for its cores, run by a real shell: what the crashed host
named (its executable, where it kept the core) is one word, never code."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from registry.signatures.userspace import ProcessFacts, core_commands

# A program anyone on a host can build and crash, named to run a command where pasted.
EVIL = "/opt/app$(touch${IFS}PWNED);x`touch${IFS}PWNED2`"


def process(executable: str | None) -> ProcessFacts:
    return ProcessFacts(executable=executable, build_id=None, version=None, pid=4242, tid=None, name="x",
                        args=None, started_at=None, uptime_s=None)


def shell(command: str, folder: Path) -> list[str]:
    """Run `command` with sh in `folder`, gdb and zstd as stubs writing their arguments; the
    arguments gdb got."""
    stubs = folder / "bin"
    stubs.mkdir(exist_ok=True)
    for tool in ("gdb", "zstd"):
        (stubs / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{folder}/{tool}.args"\n')
        (stubs / tool).chmod(0o755)
    done = subprocess.run(["sh", "-c", command], cwd=folder, capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{stubs}:{os.environ['PATH']}", "HOME": str(folder), "TOKEN": "t"})
    assert done.returncode == 0, done.stderr
    return (folder / "gdb.args").read_text().splitlines()


@pytest.mark.parametrize("target", ["/var/lib/app cores/core.$(touch PWNED3)", "/var/crash/core;id.zst"])
def test_names_from_the_host_are_one_word_each(tmp_path: Path, target: str) -> None:
    [commands] = core_commands("https://crashreg.example.net", 7, process(EVIL), "gpu-1",
                               [{"id": 3, "method": "core", "target": target}], {3: "identity"})
    opened = shell(commands["open"], tmp_path)
    assert opened[-2:] == [EVIL, "core.7-3"]
    on_host = commands["on_host"]
    assert on_host is not None and on_host.startswith("on gpu-1: ")
    on_host_gdb = shell(on_host.removeprefix("on gpu-1: ").split(" or ")[0], tmp_path)
    unpacked = target.endswith(".zst")
    assert on_host_gdb == [EVIL, "core;id" if unpacked else target]
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith("PWNED")]
    if unpacked:
        assert (tmp_path / "zstd.args").read_text().splitlines() == ["-dc", target]
