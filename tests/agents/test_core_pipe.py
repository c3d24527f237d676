"""Pipe mode (`crashreg-report.pyz core --pipe`) on this host, whose core_pattern must not change.

The kernel's side is played by a twin (tests/support/data/pipe/twin.c): a real program
crashes and dumps a real core (ulimit -c, core_pattern `core`), while its fork, the same
code on the same address space, is held at the same fault. The built pyz, run by the system
python3 as the kernel would run it, gets the core through a real pipe and the twin's pid as
%P, so it reads its head from stdin and the rest from /proc, as in a dying process. The
registry is live (SQLite and PostgreSQL); the crash lab (tests/lab/test_userspace.py) does
the same with the kernel's own core_pattern.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import signal
import stat
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.coredump import core_file_report, read_core_file
from agents.coredump.pipe import CORE_PATTERN
from registry.fingerprint import analyse_stack
from tests.support import DATA
from tests.support.agents import Registry, Site, closed_port_url, run_reporter
from tests.support.cores import compile_programs, core_pattern_problem

TWIN = DATA / "pipe" / "twin.c"
FEED_CHUNK = 1 << 16
READY_WAIT_S = 30.0
FIGURES = re.compile(r"read (\d+) bytes of the core and (\d+) of its memory before the answer")


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    problem = core_pattern_problem()
    if problem:
        pytest.skip(problem)
    root = tmp_path_factory.mktemp("pipe-programs")
    built = compile_programs(root)
    twin = root / "twin.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(twin), str(TWIN)], check=True, timeout=120)
    return built | {"twin": twin}


@dataclass(frozen=True)
class Twin:
    """A real core, and the held twin whose /proc stands for the dying process's."""

    program: Path
    core: Path
    pid: int
    signal: int

    def pipe_values(self) -> list[str]:
        """%P %I %s %t %c %u %g %d %h %E as the kernel would expand them."""
        return [
            str(self.pid),
            str(self.pid),
            str(self.signal),
            str(int(self.core.stat().st_mtime)),
            "0",
            str(os.getuid()),
            str(os.getgid()),
            "1",
            "gpu-a017",
            str(self.program).replace("/", "!"),
        ]


def _unlimited_cores() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


@pytest.fixture
def twin_crash(programs: dict[str, Path], tmp_path: Path) -> Iterator[Callable[[str], Twin]]:
    held: list[int] = []

    def crash(mode: str) -> Twin:
        directory = tmp_path / f"crash-{len(held)}-{mode}"
        directory.mkdir()
        ready = directory / "twin.pid"
        env = {
            "PATH": "/usr/bin:/bin",
            "LD_PRELOAD": str(programs["twin"]),
            "CRASHREG_TWIN_READY": str(ready),
        }
        # No pipes to the program: its twin would hold them open for good.
        done = subprocess.run(
            [str(programs["crashy"]), mode],
            cwd=directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_unlimited_cores,
            timeout=60,
            check=False,
        )
        [core] = sorted(directory.glob("core*"))
        deadline = time.monotonic() + READY_WAIT_S
        while not ready.exists():  # the twin reaches the fault on its own schedule
            assert time.monotonic() < deadline, f"the twin of {mode} never reached its fault"
            time.sleep(0.01)
        pid = int(ready.read_text())
        held.append(pid)
        assert done.returncode < 0, done
        return Twin(programs["crashy"], core, pid, -done.returncode)

    yield crash
    for pid in held:
        os.kill(pid, signal.SIGKILL)


@dataclass(frozen=True)
class Handled:
    returncode: int
    log: str
    fed: int  # bytes of the core that went into the pipe before the handler closed it

    def figures(self) -> tuple[int, int]:
        """(bytes of the core read, bytes of memory read) before the answer, as it logged them."""
        found = FIGURES.search(self.log)
        assert found, self.log
        return int(found.group(1)), int(found.group(2))


INTERPRETER = CORE_PATTERN[1:].split()[:2]  # python3 and its flags, as the core_pattern line has them


def handle(conf: Path, twin: Twin, pyz: Path, core: Path | None = None) -> Handled:
    """Run the pyz as the kernel runs a core_pattern pipe: the core on stdin, through a pipe,
    with the umask the kernel gives a usermode helper (kernel/umh.c: 0022)."""
    process = subprocess.Popen(
        [*INTERPRETER, str(pyz), "--config", str(conf), "core", "--pipe", *twin.pipe_values()],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        bufsize=0,
        umask=0o022,
    )
    assert process.stdin is not None and process.stderr is not None
    fed = 0

    def feed() -> None:
        nonlocal fed
        with (core or twin.core).open("rb") as source:
            while chunk := source.read(FEED_CHUNK):
                try:
                    process.stdin.write(chunk)
                except BrokenPipeError:
                    return
                fed += len(chunk)
        process.stdin.close()

    feeder = threading.Thread(target=feed)
    feeder.start()
    log = process.stderr.read().decode()
    process.wait(timeout=120)
    feeder.join()
    return Handled(process.returncode, log, fed)


def sent_body(site: Site) -> dict:
    [path] = sorted((site.spool / "sent").glob("core-*.json"), key=lambda p: p.stat().st_mtime)[-1:]
    return json.loads(path.read_bytes())


def answer_of(registry: Registry, body: dict) -> dict:
    """The registry's answer to a report, from a replay (it returns the first answer)."""
    response = registry.post_report(json.dumps(body).encode())
    assert response.status_code == 200 and response.json()["duplicate"], response.text
    return response.json()


def tool_output(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + done.stderr


def test_the_registrys_answers_full_filtered_skip_are_each_done_before_the_rest_is_read(
    registry: Registry, make_site: Callable[..., Site], twin_crash: Callable[[str], Twin], tmp_path: Path
) -> None:
    cores = tmp_path / "cores"
    site = make_site(extra={"CRASHREG_CORE_DIR": str(cores), "CRASHREG_CORE_COMPRESSION": "none"})

    # A new signature: full. The whole core is written, byte for byte, its zero pages as holes.
    first = twin_crash("null")
    handled = handle(site.conf, first, site.reporter)
    assert handled.returncode == 0, handled.log
    [full] = cores.glob("*.core")
    assert full.read_bytes() == first.core.read_bytes()
    # The process's memory is root's alone: the folder made for it and the core in it.
    assert (stat.S_IMODE(cores.stat().st_mode), stat.S_IMODE(full.stat().st_mode)) == (0o700, 0o600)
    assert {stat.S_IMODE(path.stat().st_mode) for path in site.spool.rglob("*") if path.is_file()} == {0o600}
    assert full.stat().st_blocks * 512 < full.stat().st_size
    answer = answer_of(registry, sent_body(site))
    assert answer["capture"]["action"] == "full"
    [capture] = registry.get(f"/api/v1/events/{answer['event_id']}")["captures"]
    assert (capture["method"], capture["status"], capture["target"]) == ("core", "completed", str(full))
    assert capture["downtime_s"] > 0
    # Recorded, the core goes on to the dump store (agents/reporter/upload.py), which counts its raw bytes.
    assert capture["uri"].startswith("file://") and capture["bytes"] == first.core.stat().st_size

    # Filtered: a bounded core from the head and /proc, that gdb and eu-stack read; the rest
    # of stdin is never read (the pipe breaks after the head and what the pipe buffers).
    registry.patch_signature(
        answer["signature"]["id"], {"capture_policy": {"mode": "filtered", "dump_level": 31}}
    )
    second = twin_crash("null")
    handled = handle(site.conf, second, site.reporter)
    [bounded] = cores.glob("*.filtered.core")
    assert bounded.stat().st_size < second.core.stat().st_size
    backtrace = tool_output(["gdb", "-q", "-batch", "-ex", "bt", str(second.program), str(bounded)])
    assert re.search(r"#0 .* parse_record \(field=0x0\)", backtrace) and " in main (" in backtrace, backtrace
    frames = tool_output(["eu-stack", "--core", str(bounded), "--executable", str(second.program)])
    assert re.search(r"#0 +0x\w+ parse_record\n#1 +0x\w+ main\n", frames), frames
    answer = answer_of(registry, sent_body(site))
    [capture] = registry.get(f"/api/v1/events/{answer['event_id']}")["captures"]
    assert (capture["method"], capture["status"]) == ("core_filtered", "completed")
    assert 0 < capture["bytes"] <= bounded.stat().st_size

    # Skip: the head is read, nothing else, nothing is written, no capture.
    registry.patch_signature(answer["signature"]["id"], {"capture_policy": {"mode": "skip"}})
    third = twin_crash("null")
    handled = handle(site.conf, third, site.reporter)
    head = read_core_file(str(third.core))
    notes_end = max(s.offset + s.filesz for s in head.segments if s.kind == 4)
    read, memory = handled.figures()
    assert read == notes_end and 0 < memory < 64 << 10, handled.log
    assert handled.fed < third.core.stat().st_size  # the handler closed the pipe unread
    assert sorted(p.name for p in cores.iterdir()) == sorted([full.name, bounded.name])
    answer = answer_of(registry, sent_body(site))
    assert answer["capture"]["action"] == "skip"
    event = registry.get(f"/api/v1/events/{answer['event_id']}")
    assert event["captures"] == [] and event["signature"]["event_count"] == 3


def test_the_pipe_report_is_the_file_mode_report_of_the_same_core(
    registry: Registry, make_site: Callable[..., Site], twin_crash: Callable[[str], Twin], tmp_path: Path
) -> None:
    """What the handler read from /proc is what the core holds: same frames, same signature."""
    site = make_site(extra={"CRASHREG_CORE_DIR": str(tmp_path / "cores")})
    for mode in ("abort", "thread"):
        twin = twin_crash(mode)
        assert handle(site.conf, twin, site.reporter).returncode == 0
        piped = sent_body(site)
        from_file = core_file_report(str(twin.core), "gpu-a017")
        assert piped["report_id"] == from_file["report_id"]
        assert piped["stack"]["frames"] == from_file["stack"]["frames"]
        assert piped["stack"]["registers"] == from_file["stack"]["registers"]
        # The red zone's slots may differ where the twin's own past left other garbage below
        # the crash path (its constructor ran other code after the fork); the labels may not.
        signature, expected = analyse_stack(piped["stack"]), analyse_stack(from_file["stack"])
        assert signature is not None and expected is not None
        assert (signature.fingerprint, signature.labels) == (expected.fingerprint, expected.labels)
        assert signature.function in {"check_invariant", "parse_record"}
        process = piped["stack"]["process"]
        assert process["uptime_s"] >= 0 and process["started_at"] <= piped["crashed_at"]


def test_a_process_gone_from_proc_is_reported_from_the_core_and_its_core_kept(
    registry: Registry, make_site: Callable[..., Site], twin_crash: Callable[[str], Twin], tmp_path: Path
) -> None:
    """The kernel did not wait for the handler (kernel.core_pipe_limit 0) and the process is
    gone from /proc: the crash is reported from the core's head (its signal, its pc's frame, a
    signature of its own) and a bounded core, which /proc would give, is the streamed core
    instead. Before, nothing was reported and nothing kept."""
    cores = tmp_path / "cores"
    site = make_site(extra={"CRASHREG_CORE_DIR": str(cores), "CRASHREG_CORE_COMPRESSION": "none"})
    live = twin_crash("null")
    gone = dataclasses.replace(live, pid=2**22 + 7)  # past the largest pid_max: no such process
    handled = handle(site.conf, gone, site.reporter)
    assert handled.returncode == 0, handled.log
    assert f"process {gone.pid} is gone from /proc" in handled.log
    body = sent_body(site)
    assert body["stack"]["signal"] == "SIGSEGV" and body["stack"]["frames"]
    from_file = core_file_report(str(live.core), "gpu-a017")
    assert body["stack"]["frames"][0]["offset"] == from_file["stack"]["frames"][0]["offset"]
    answer = answer_of(registry, body)
    assert answer["signature"] is not None and answer["capture"]["action"] == "full"
    [kept] = cores.glob("*.core")
    assert kept.read_bytes() == live.core.read_bytes()

    filtered = {"capture_policy": {"mode": "filtered", "dump_level": 31}}
    registry.patch_signature(answer["signature"]["id"], filtered)
    again = dataclasses.replace(twin_crash("null"), pid=2**22 + 8)
    assert handle(site.conf, again, site.reporter).returncode == 0
    assert answer_of(registry, sent_body(site))["capture"]["action"] == "filtered"
    assert len(list(cores.glob("*.core"))) == 2 and not list(cores.glob("*.filtered.core"))


def offline_conf(root: Path, **extra: str) -> Path:
    """A host whose registry is down, with an offline bundle deciding `full` for a new bug."""
    bundle = root / "policy-bundle.json"
    bundle.write_text(
        json.dumps(
            {
                "format": "crashreg-policy-bundle",
                "version": 1,
                "entries": [],
                "unknown": {"action": "full", "reason": "a new bug"},
            }
        )
    )
    values = {
        "CRASHREG_URL": closed_port_url(),
        "CRASHREG_RETRIES": "0",
        "CRASHREG_SPOOL_DIR": str(root / "spool"),
        "CRASHREG_BUNDLE_JSON": str(bundle),
        "CRASHREG_CORE_DIR": str(root / "cores"),
        "CRASHREG_TOKEN_FILE": str(root / "token"),
    } | extra
    conf = root / "reporter.conf"
    conf.write_text("".join(f'{key}="{value}"\n' for key, value in values.items()))
    return conf


def spooled_captures(root: Path) -> dict[str, dict]:
    return {
        c["capture"]["method"]: c
        for c in (json.loads(p.read_text()) for p in (root / "spool").glob("*.capture"))
    }


def test_a_full_core_over_its_cap_is_not_kept_and_the_bounded_core_is(
    twin_crash: Callable[[str], Twin], installed: Path, tmp_path: Path
) -> None:
    twin = twin_crash("null")
    data = twin.core.read_bytes()
    stored = sum(
        4096 for at in range(0, len(data), 4096) if data[at : at + 4096].strip(b"\0")
    )  # holes are free
    conf = offline_conf(tmp_path, CRASHREG_CORE_MAX_BYTES=str(stored - 1), CRASHREG_CORE_COMPRESSION="none")
    handled = handle(conf, twin, installed / "crashreg-report.pyz")
    assert "full by bundle" in handled.log, handled.log
    assert [p.name for p in (tmp_path / "cores").iterdir()] == [
        f"{spooled_report_id(tmp_path)}.filtered.core"
    ]
    captures = spooled_captures(tmp_path)
    assert captures["core"]["capture"]["status"] == "failed" and captures["core"]["capture"]["bytes"] is None
    assert captures["core_filtered"]["capture"]["status"] == "completed"
    assert (
        captures["core"]["report_id"] == captures["core_filtered"]["report_id"] == spooled_report_id(tmp_path)
    )


def test_the_directory_cap_makes_room_by_deleting_the_oldest_of_our_cores(
    twin_crash: Callable[[str], Twin], installed: Path, tmp_path: Path
) -> None:
    """CRASHREG_CORE_DIR_MAX_BYTES: the new core is kept, an older core of ours goes (logged),
    what is not ours stays."""
    cores = tmp_path / "cores"
    cores.mkdir()
    old = cores / "core-00c0ffee.core.gz"
    old.write_bytes(os.urandom(1 << 20))
    os.utime(old, (1_700_000_000, 1_700_000_000))
    (cores / "README").write_bytes(os.urandom(1 << 20))  # not a core of ours: neither counted nor deleted
    conf = offline_conf(tmp_path, CRASHREG_CORE_DIR_MAX_BYTES=str(1 << 20))
    handled = handle(conf, twin_crash("null"), installed / "crashreg-report.pyz")
    assert "full by bundle" in handled.log, handled.log
    assert "core-00c0ffee.core.gz (1048576 bytes, the oldest of the handler's cores) deleted" in handled.log
    assert sorted(p.name for p in cores.iterdir()) == ["README", f"{spooled_report_id(tmp_path)}.core.gz"]
    assert spooled_captures(tmp_path)["core"]["capture"]["status"] == "completed"
    # The registry is down: the removal waits in the spool with the report and its capture.
    [removal] = (tmp_path / "spool").glob("*.removed")
    assert json.loads(removal.read_bytes()) == {"capture_keys": ["core-00c0ffee-core"]}


def test_post_boot_delivers_a_spooled_removal_after_the_captures(
    registry: Registry, make_site: Callable[..., Site], twin_crash: Callable[[str], Twin], tmp_path: Path
) -> None:
    """Offline, a crash whose core pushes out an older one (recorded earlier): post-boot records
    the new report and capture, then the removal, which marks the older capture."""
    cores = tmp_path / "cores"
    online = make_site(extra={"CRASHREG_CORE_DIR": str(cores), "CRASHREG_CORE_COMPRESSION": "none"})
    assert handle(online.conf, twin_crash("null"), online.reporter).returncode == 0
    first = answer_of(registry, sent_body(online))
    [older] = cores.glob("*.core")
    room = str(older.stat().st_blocks * 512 + 4096)
    (tmp_path / "offline").mkdir()
    conf = offline_conf(tmp_path / "offline", CRASHREG_CORE_DIR=str(cores), CRASHREG_CORE_COMPRESSION="none",
                        CRASHREG_CORE_DIR_MAX_BYTES=room)
    assert "full by bundle" in handle(conf, twin_crash("null"), online.reporter).log
    spool = tmp_path / "offline" / "spool"
    assert [path.name for path in spool.glob("*.removed")] == [f"{older.stem}-core.removed"]
    delivering = make_site(extra={"CRASHREG_SPOOL_DIR": str(spool)})
    done = run_reporter(delivering, "post-boot")
    assert done.returncode == 0 and "removal recorded" in done.stderr, done.stderr
    assert list(spool.glob("*.removed")) == []
    [gone] = registry.get(f"/api/v1/events/{first['event_id']}")["captures"]
    assert gone["removed_at"] is not None


def spooled_report_id(root: Path) -> str:
    [path] = (root / "spool").glob("core-*.json")
    return path.stem


def test_the_free_space_floor_keeps_every_core_out(
    twin_crash: Callable[[str], Twin], installed: Path, tmp_path: Path
) -> None:
    conf = offline_conf(tmp_path, CRASHREG_CORE_KEEP_FREE=str(1 << 62))
    handled = handle(conf, twin_crash("null"), installed / "crashreg-report.pyz")
    assert handled.returncode == 0 and "to keep free" in handled.log, handled.log
    assert not (tmp_path / "cores").exists() or list((tmp_path / "cores").iterdir()) == []
    assert {m: c["capture"]["status"] for m, c in spooled_captures(tmp_path).items()} == {
        "core": "failed",
        "core_filtered": "failed",
    }


def test_a_chained_handler_gets_the_whole_original_stdin_whatever_the_action(
    twin_crash: Callable[[str], Twin], installed: Path, tmp_path: Path
) -> None:
    """systemd-coredump's place: its command line with our % values, every byte of the core,
    here after a `skip` (no bundle: the fallback action, set to skip) that reads nothing more."""
    chained = tmp_path / "chained"
    script = f"cat > {chained}.core; echo \"$@\" > {chained}.args"
    command = f"/bin/sh -c '{script}' chain %P %u %g %s %t 9223372036854775808 %h %%"
    conf = offline_conf(
        tmp_path,
        CRASHREG_CORE_CHAIN=command.replace('"', '\\"'),
        CRASHREG_FALLBACK_ACTION="skip",
        CRASHREG_BUNDLE_JSON=str(tmp_path / "no-bundle.json"),
    )
    twin = twin_crash("abort")
    handled = handle(conf, twin, installed / "crashreg-report.pyz")
    assert "skip by fallback" in handled.log, handled.log
    assert Path(f"{chained}.core").read_bytes() == twin.core.read_bytes()
    assert handled.fed == twin.core.stat().st_size
    values = twin.pipe_values()
    assert Path(f"{chained}.args").read_text().split() == [
        values[0],
        values[5],
        values[6],
        "6",
        values[3],
        "9223372036854775808",
        "gpu-a017",
        "%",
    ]
    assert not (tmp_path / "cores").exists()


def test_with_no_stdout_nor_stderr_as_the_kernel_starts_it_the_log_goes_to_the_log_device(
    twin_crash: Callable[[str], Twin], installed: Path, tmp_path: Path
) -> None:
    """The kernel gives a core_pattern handler stdin only; the log goes to CRASHREG_CORE_LOG
    (/dev/kmsg by default; a file here: the host's kernel log is not the tests')."""
    log = tmp_path / "kmsg"
    conf = offline_conf(tmp_path, CRASHREG_CORE_LOG=str(log))
    twin = twin_crash("null")

    def close_stdout_and_stderr() -> None:
        os.close(1)
        os.close(2)

    with twin.core.open("rb") as core:
        done = subprocess.run(
            [
                *INTERPRETER,
                str(installed / "crashreg-report.pyz"),
                "--config",
                str(conf),
                "core",
                "--pipe",
                *twin.pipe_values(),
            ],
            stdin=core,
            preexec_fn=close_stdout_and_stderr,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0
    assert FIGURES.search(log.read_text()) and "full by bundle" in log.read_text()
    [kept] = (tmp_path / "cores").glob("*.core.gz")
    assert gzip.decompress(kept.read_bytes()) == twin.core.read_bytes()


def test_offline_the_report_and_both_captures_wait_in_the_spool_and_post_boot_delivers_them(
    registry: Registry, make_site: Callable[..., Site], twin_crash: Callable[[str], Twin], tmp_path: Path
) -> None:
    offline = make_site(
        url=closed_port_url(),
        extra={
            "CRASHREG_CORE_DIR": str(tmp_path / "cores"),
            "CRASHREG_CORE_MAX_BYTES": "4096",
            "CRASHREG_RETRIES": "0",
        },
    )
    offline.bundle_json.write_text(
        json.dumps(
            {
                "format": "crashreg-policy-bundle",
                "version": 1,
                "entries": [],
                "unknown": {"action": "full", "reason": "a new bug"},
            }
        )
    )
    handled = handle(offline.conf, twin_crash("null"), offline.reporter)
    assert "full by bundle" in handled.log, handled.log
    [report] = offline.spooled()
    captures = sorted(path.name for path in offline.spool.glob("*.capture"))
    assert captures == [
        f"{report.stem}.core.capture",
        f"{report.stem}.core_filtered.capture",
    ]  # both over 4 KiB

    online = make_site(extra={"CRASHREG_SPOOL_DIR": str(offline.spool)})
    done = run_reporter(online, "post-boot")
    assert done.returncode == 0, done.stderr
    assert offline.spooled() == [] and list(offline.spool.glob("*.capture")) == []
    answer = answer_of(registry, json.loads((offline.spool / "sent" / report.name).read_bytes()))
    event = registry.get(f"/api/v1/events/{answer['event_id']}")
    assert sorted((c["method"], c["status"]) for c in event["captures"]) == [
        ("core", "failed"),
        ("core_filtered", "failed"),
    ]


def test_a_core_the_directory_cap_deletes_is_marked_removed_in_the_registry(
    registry: Registry, make_site: Callable[..., Site], twin_crash: Callable[[str], Twin], tmp_path: Path
) -> None:
    """Two crashes of one bug, each answered full, and room for one core: the second's handler
    deletes the first's core and tells the registry, which marks that capture removed (and
    frees its slot); the second capture stands."""
    cores = tmp_path / "cores"
    first_site = make_site(extra={"CRASHREG_CORE_DIR": str(cores), "CRASHREG_CORE_COMPRESSION": "none"})
    assert handle(first_site.conf, twin_crash("null"), first_site.reporter).returncode == 0
    first = answer_of(registry, sent_body(first_site))
    [kept] = cores.glob("*.core")
    room = str(kept.stat().st_blocks * 512 + 4096)  # one core, not two
    second_site = make_site(extra={"CRASHREG_CORE_DIR": str(cores), "CRASHREG_CORE_COMPRESSION": "none",
                                   "CRASHREG_CORE_DIR_MAX_BYTES": room})
    handled = handle(second_site.conf, twin_crash("null"), second_site.reporter)
    assert f"{kept.name} (" in handled.log and "removal of" in handled.log, handled.log
    second = answer_of(registry, sent_body(second_site))
    assert second["capture"]["action"] == "full" and not kept.exists()
    [gone] = registry.get(f"/api/v1/events/{first['event_id']}")["captures"]
    assert gone["status"] == "completed" and gone["removed_at"] is not None
    assert "CRASHREG_CORE_DIR_MAX_BYTES" in gone["removed_reason"]
    [stands] = registry.get(f"/api/v1/events/{second['event_id']}")["captures"]
    assert stands["removed_at"] is None and Path(stands["target"]).exists()


def test_a_process_name_with_a_newline_stays_on_the_handlers_one_line(
    twin_crash: Callable[[str], Twin], installed: Path, tmp_path: Path
) -> None:
    """A process names itself (prctl PR_SET_NAME) with a newline: the handler's one line per
    core is not split into two, the second of them the process's own words."""
    twin = twin_crash("null")
    raw = twin.core.read_bytes()
    comm = b"crashy".ljust(16, b"\0")  # NT_PRPSINFO's pr_fname, in the notes before any memory
    assert comm in raw
    renamed = tmp_path / "renamed.core"
    renamed.write_bytes(raw.replace(comm, b"cra\nshy\x1b[1m".ljust(16, b"\0"), 1))
    handled = handle(offline_conf(tmp_path), twin, installed / "crashreg-report.pyz", core=renamed)
    assert handled.returncode == 0, handled.log
    [line] = [line for line in handled.log.splitlines() if line.startswith("crashreg-report: core of pid")]
    assert f"core of pid {twin.pid} (cra\\x0ashy\\x1b[1m) " in line
    assert all(line.startswith("crashreg-report: ") for line in handled.log.splitlines()), handled.log


def elf_core_head(phoff: int, note_offset: int) -> bytes:
    """An ELF core's header and one PT_NOTE program header, with the offsets given."""
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header = ident + struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, phoff, 0, 0, 64, 56, 1, 64, 0, 0)
    note = struct.pack("<IIQQQQQQ", 4, 0, note_offset, 0, 0, 512, 0, 4)
    return header + b"\0" * (phoff - 64) + note if phoff < 4096 else header


@pytest.mark.parametrize(("phoff", "note_offset"), [(64, 1 << 40), (1 << 40, 120)],
                         ids=["note-offset", "program-header-offset"])
def test_a_core_whose_head_lies_past_any_cores_is_unreadable_not_a_memory_error(
    installed: Path, tmp_path: Path, phoff: int, note_offset: int
) -> None:
    """A corrupt offset (a terabyte into the core) was read up to in one call: MemoryError, a
    traceback and nothing said. Now: one line, as for any other core it cannot read."""
    core = tmp_path / "corrupt.core"
    core.write_bytes(elf_core_head(phoff, note_offset) + b"\0" * (1 << 16))
    values = [str(os.getpid()), str(os.getpid()), "11", "1700000000", "0", "0", "0", "1", "h", "!bin!x"]
    done = subprocess.run([*INTERPRETER, str(installed / "crashreg-report.pyz"), "--config",
                           str(offline_conf(tmp_path)), "core", "--pipe", *values],
                          stdin=core.open("rb"), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr
    assert "unreadable: NotElf: bytes " in done.stderr and "past any core's head" in done.stderr
