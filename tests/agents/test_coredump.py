"""Userspace cores read for real: programs crashed here (tests/support/cores.py), their cores
unwound, symbolized and labelled by agents/coredump, and reported by the built pyz to a live
registry on SQLite and PostgreSQL."""

from __future__ import annotations

import bz2
import ctypes
import gzip
import json
import lzma
import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agents.coredump import (
    CoreMemory,
    ProcMemory,
    analyse,
    close,
    core_file_report,
    file_opener,
    read_core_file,
    read_core_head,
)
from agents.coredump import report as core_report
from agents.coredump.filemode import program_path
from agents.reporter.elf import PT_NOTE
from registry.config import Settings
from registry.core.events import Event
from registry.fingerprint import analyse_stack
from registry.ingest import schemas
from registry.retention.symbols import build_ids_named
from tests.support import cores
from tests.support.agents import Registry, closed_port_url, run_reporter
from tests.support.cores import CPP_MODE, RUNS, Crash
from tests.support.http import serving
from tests.support.symbols import build_id_of

EXIT_SKIP = 10
JOURNAL = "storage::Journal<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > >"
# mode -> (labels, guilty function, its module, the frames from the guilty one that must follow)
EXPECTED = {
    "null": (["segfault"], "parse_record", "crashy", ["main"]),
    "strlen": (["segfault"], "count_name", "crashy", ["main"]),
    "library": (["segfault"], "crashy_copy", "libcrashy.so", ["main"]),
    "qsort": (["segfault"], "compare_records", "crashy", ["main"]),
    "thread": (["segfault"], "parse_record", "crashy", ["worker_loop"]),
    "abort": (["abort"], "check_invariant", "crashy", ["main"]),
    "return-to-null": (["return-to-null", "segfault"], "smash_return", "crashy", []),
    "misaligned-return": (["bad-return", "segfault"], "unbalanced", "crashy", ["main"]),
    "sse": (["misaligned-stack", "segfault"], "mix_vectors", "crashy", ["main"]),
    # the program's SIGSEGV handler aborts: the guilty frame is what the signal interrupted
    "handler": (["abort"], "load_config", "crashy", ["main"]),
    # strlen entered with the CFA 8 bytes off: the ABI holds across modules
    "misaligned-call": (["misaligned-stack", "segfault"], "measure_unaligned", "crashy", ["main"]),
    "null-O2": (["segfault"], "parse_record", "crashy-O2", ["main"]),
    "strlen-O2": (["segfault"], "main", "crashy-O2", []),  # count_name tail-calls strlen at -O2
    "library-O2": (["segfault"], "crashy_copy", "libcrashy.so", ["main"]),
    "qsort-O2": (["segfault"], "compare_records", "crashy-O2", ["main"]),
    "thread-O2": (["segfault"], "parse_record", "crashy-O2", ["worker_loop"]),
    "abort-O2": (["abort"], "check_invariant", "crashy-O2", ["main"]),
    # named as the engine keys them: the qualified name, without parameters (demangle.function_name)
    CPP_MODE: (["abort"], f"{JOURNAL}::replay", "crashy-cc",
               ["storage::(anonymous namespace)::recover", "main"]),
}


def report_of(core: Path, crash: Crash) -> dict:
    return core_file_report(str(core), "gpu-a017")


@pytest.mark.parametrize("mode", EXPECTED)
def test_the_crash_is_read_from_its_core(crash_cores: dict[str, Crash], mode: str) -> None:
    """Labels exact (no corruption label on an ordinary crash), the guilty function the
    program's own with its module, frames symbolized through libc and back."""
    crash = crash_cores[mode]
    labels, function, module, callers = EXPECTED[mode]
    report = report_of(crash.cores[0], crash)
    stack = report["stack"]
    assert report["source"] == "userspace" and stack["executable"] == str(crash.program)
    signature = analyse_stack(stack)
    assert signature is not None
    assert (signature.labels, signature.function, signature.module) == (labels, function, module)
    assert signature.frames == [f"{name} [{name_module}]" for name, name_module in
                                [(function, module)] + [(caller, crash.program.name) for caller in callers]]
    assert report["fingerprint"] == signature.fingerprint
    program_frames = [f for f in stack["frames"] if f.get("module") == str(crash.program)]
    assert program_frames and all(f["build_id"] == stack["build_id"] for f in program_frames)
    assert all(int(f["offset"], 16) < 0x100000 for f in program_frames)  # link-time, not runtime


# The system's libraries (not the tests' own libcrashy.so): where a core is read on another
# machine, these are the files that are not the ones the process mapped.
SYSTEM_LIBRARIES = ("/lib", "/usr/lib")
# What needs the C library's own CFI: a trampoline to unwind through a signal frame (handler),
# the CFA of a fault inside strlen (misaligned-call's label).
NEEDS_LIBC_CFI = {"handler", "misaligned-call"}


def test_a_program_deeper_than_the_contracts_bound_on_a_path_is_reported_by_its_file_name(
        crash_cores: dict[str, Crash], tmp_path: Path) -> None:
    """A program installed under a path of more than 1,024 bytes (the contract's bound on a
    path, a 400 refusing the whole report: a container's layered root, a build tree) is sent
    with each path's tail, which keeps the file name the registry reads: a valid report, keyed
    as the same program at a short path."""
    assert (core_report.MAX_PATH, core_report.MAX_NAME) == (schemas.MAX_PATH, schemas.MAX_FUNCTION)
    program = crash_cores["null"].program
    deep = tmp_path.joinpath(*["d" * 200] * 6)
    deep.mkdir(parents=True)
    for name in (program.name, "libcrashy.so"):
        shutil.copy(program.parent / name, deep / name)
    report = core_file_report(str(cores.crash(deep / program.name, "null", tmp_path / "run")), "app-3")
    assert len(str(deep).encode()) > schemas.MAX_PATH
    assert schemas.ReportSchema().validate(report) == {}
    executable = report["stack"]["executable"]
    assert executable.endswith(f"/{program.name}") and len(executable.encode()) == schemas.MAX_PATH
    short = core_file_report(str(crash_cores["null"].cores[0]), "app-3")
    assert analyse_stack(report["stack"]).fingerprint == analyse_stack(short["stack"]).fingerprint


def test_each_mapped_object_is_reported_with_its_build_id_on_the_mapping_it_is_loaded_from(
        crash_cores: dict[str, Crash]) -> None:
    """gdb reading the core needs the debug info of every object the process mapped, not only
    of those on its stack: the registry keeps the symbols of the build-ids a report names. Here
    libcrashy.so is mapped but on no stack (the crash is in the program). One per object, on
    the mapping of its first byte, not one per segment; a schema of its own, no warning."""
    crash = crash_cores["null"]
    report = report_of(crash.cores[0], crash)
    stack, library = report["stack"], crash.program.parent / "libcrashy.so"
    named = [(m["path"], m["build_id"]) for m in stack["mappings"] if "build_id" in m]
    by_path = dict(named)
    assert len(by_path) == len(named)
    libc = next(path for path in by_path if "/libc.so" in path)
    assert (by_path[str(crash.program)], by_path[str(library)], by_path[libc]) == (
        stack["build_id"], build_id_of(library), build_id_of(Path(libc)))
    assert all(frame.get("module") != str(library) for frame in stack["frames"])
    assert build_id_of(library) in build_ids_named(report)
    assert schemas.ReportSchema().validate(report) == {}
    assert schemas.report_warnings(schemas.ReportSchema(), report) == []


@pytest.mark.parametrize("mode", sorted(set(EXPECTED) - NEEDS_LIBC_CFI))
def test_a_core_read_without_its_libraries_gives_the_same_signature(crash_cores: dict[str, Crash],
                                                                    mode: str) -> None:
    """A core read where its shared libraries are not the ones it mapped (an uploaded core, a
    backfill on another host): their CFI and code are out of reach, so a scan up the stack from
    their frames finds the program's return addresses; the signature is the one read with them."""
    core = str(crash_cores[mode].cores[0])
    head = read_core_file(core)
    program = program_path(head)
    with_libraries = file_opener(None, program)

    def without_libraries(path: str, start: int):  # type: ignore[no-untyped-def]
        return None if path != program and path.startswith(SYSTEM_LIBRARIES) else with_libraries(path, start)

    signatures = []
    for opener in (with_libraries, without_libraries):
        memory = CoreMemory(core, head.segments)
        analysis = analyse(head, memory, opener)
        close(analysis)
        memory.close()
        signatures.append(analyse_stack(analysis.stack))
    assert signatures[1] is not None and signatures[1].fingerprint == signatures[0].fingerprint, (
        signatures[0].title, signatures[1].title)


def test_the_crashing_thread_is_the_one_that_faulted_not_the_main_one(crash_cores: dict[str, Crash]) -> None:
    for mode in ("thread", "thread-O2"):
        head = read_core_file(str(crash_cores[mode].cores[0]))
        assert len(head.threads) == 2 and head.process is not None
        crashing = head.crashing
        assert crashing is not None and crashing.tid != head.process.pid and crashing.signal == 11
        main_thread = next(t for t in head.threads if t.tid == head.process.pid)
        assert main_thread.signal == 11  # every thread's NT_PRSTATUS carries the signal: order decides
        process = report_of(crash_cores[mode].cores[0], crash_cores[mode])["stack"]["process"]
        assert process["tid"] == crashing.tid and process["pid"] == head.process.pid


def test_two_runs_of_a_crash_give_one_signature_and_every_bug_its_own(
        crash_cores: dict[str, Crash]) -> None:
    prints = {}
    for mode, crash in crash_cores.items():
        runs = {report_of(core, crash)["fingerprint"] for core in crash.cores}
        assert len(runs) == 1 and None not in runs, mode
        prints[mode] = runs.pop()
    # parse_record's NULL reached from a worker thread is null's bug: one guilty function,
    # signal and labels, one signature, whatever called it (the frames test reads worker_loop).
    for thread, null in (("thread", "null"), ("thread-O2", "null-O2")):
        assert prints.pop(thread) == prints[null]
    assert len(set(prints.values())) == len(prints)


def test_the_evidence_behind_each_corruption_label(crash_cores: dict[str, Crash]) -> None:
    ret_null = report_of(crash_cores["return-to-null"].cores[0], crash_cores["return-to-null"])["stack"]
    evidence = ret_null["evidence"]
    slots = {slot["offset"]: slot for slot in evidence["slots"]}
    assert ret_null["registers"]["rip"] == "0x0" and evidence["pc_perms"] == ""
    assert slots[-8]["value"] == "0x0"  # what `ret` popped
    assert any(s.get("function") == "smash_return" and s["call"] for s in slots.values() if s["offset"] < -8)

    bad = report_of(crash_cores["misaligned-return"].cores[0], crash_cores["misaligned-return"])["stack"]
    evidence = bad["evidence"]
    slots = {slot["offset"]: slot for slot in evidence["slots"]}
    assert evidence["pc_perms"] == "rw-p" and slots[-8]["value"] == bad["registers"]["rip"]
    assert evidence["si_code"] == 2 and evidence["si_addr"] == bad["registers"]["rip"]  # SEGV_ACCERR
    assert slots[0]["function"] == "main" and slots[0]["call"]  # the real return address, one slot up

    sse = report_of(crash_cores["sse"].cores[0], crash_cores["sse"])["stack"]["evidence"]
    assert sse["si_code"] == 0x80 and sse["pc_bytes"].startswith("0f290424")  # movaps %xmm0,(%rsp)

    for mode in ("null", "strlen", "library", "qsort", "thread"):
        ordinary = report_of(crash_cores[mode].cores[0], crash_cores[mode])["stack"]
        assert int(ordinary["evidence"]["cfa"], 16) and ordinary["evidence"]["pc_perms"] == "r-xp"
        assert ordinary["evidence"]["si_code"] == 1  # SEGV_MAPERR


def test_the_signal_trampoline_is_unwound_to_the_interrupted_instruction(
        crash_cores: dict[str, Crash]) -> None:
    """__restore_rt's CFI (DW_CFA_def_cfa_expression, DW_CFA_expression over the sigcontext)
    leads back to the faulting instruction, looked up at the pc itself, not pc - 1."""
    frames = report_of(crash_cores["handler"].cores[0], crash_cores["handler"])["stack"]["frames"]
    [trampoline] = [i for i, frame in enumerate(frames) if frame.get("signal_frame")]
    assert frames[trampoline - 1]["function"] == "on_fault"
    interrupted = frames[trampoline + 1]
    assert interrupted["function"] == "load_config" and frames[trampoline + 2]["function"] == "main"
    objdump = subprocess.run(["objdump", "-d", str(crash_cores["handler"].program)], capture_output=True,
                             text=True, check=False).stdout
    offset = int(interrupted["offset"], 16)
    if objdump:  # the interrupted pc is an instruction start that loads through the NULL pointer
        line = next(line for line in objdump.splitlines() if line.strip().startswith(f"{offset:x}:"))
        assert "(%rax)" in line or "(%rdx)" in line, line


def test_the_head_is_read_from_a_pipe_without_reading_the_memory(crash_cores: dict[str, Crash]) -> None:
    """What a core_pattern pipe handler gets on stdin: notes first, consumed bytes counted."""
    core = crash_cores["thread"].cores[0]
    reader = subprocess.Popen(["cat", str(core)], stdout=subprocess.PIPE)
    assert reader.stdout is not None
    head, consumed = read_core_head(reader.stdout)
    rest = reader.stdout.read()
    reader.wait()
    from_file = read_core_file(str(core))
    assert (head.threads, head.files, head.auxv, head.siginfo) == (
        from_file.threads, from_file.files, from_file.auxv, from_file.siginfo)
    notes_end = max(s.offset + s.filesz for s in head.segments if s.kind == 4)
    assert consumed == notes_end and consumed + len(rest) == core.stat().st_size
    assert consumed < min(s.offset for s in head.loads if s.filesz)


def test_memory_readers_agree_with_the_process(crash_cores: dict[str, Crash]) -> None:
    """/proc/<pid>/mem (pipe mode) and a core's PT_LOADs (file mode), bounded by a budget."""
    buffer = ctypes.create_string_buffer(b"crashreg memory probe", 32)
    live = ProcMemory(os.getpid(), budget=64)
    try:
        assert live.read(ctypes.addressof(buffer), 21) == b"crashreg memory probe"
        assert live.read(0, 8) is None
        assert live.read(ctypes.addressof(buffer), 64) is None  # past the budget
    finally:
        live.close()
    core = str(crash_cores["null"].cores[0])
    head = read_core_file(core)
    memory = CoreMemory(core, head.segments)
    try:
        vdso = head.auxv[33]
        assert memory.read(vdso, 4) == b"\x7fELF"
        # A file-backed mapping is dumped only as far as its ELF header page: the rest (code,
        # read-only data) is unknown, not zeros.
        headers = next(s for s in head.loads if 0 < s.filesz < s.memsz)
        assert memory.read(headers.vaddr, 4) == b"\x7fELF"
        assert memory.read(headers.vaddr + headers.filesz, 8) is None
        text = next(s for s in head.loads if s.flags & 1 and s.filesz == 0 and s.memsz)
        assert memory.read(text.vaddr, 8) is None
    finally:
        memory.close()


def test_the_reporter_reports_a_core_to_the_registry(registry: Registry, make_site,
                                                     crash_cores: dict[str, Crash]) -> None:
    """The built pyz (system python3) in file mode: one event per crash, a rerun a replay,
    the second run of the same crash the same signature, labels re-derived by the registry."""
    site = make_site()
    crash = crash_cores["return-to-null"]
    first = run_reporter(site, "core", "--core", str(crash.cores[0]))
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["decided_by"] == "registry" and answer["action"] == "full" and not answer["duplicate"]
    event = registry.get(f"/api/v1/events/{answer['event_id']}")
    assert event["sources"] == ["userspace"]
    assert event["signature"]["labels"] == ["return-to-null", "segfault"]
    # the registry's name for the bug, to look it up by (the reporter's own fingerprint may differ)
    assert answer["signature"] == {key: event["signature"][key] for key in ("id", "fingerprint", "title")}
    assert f"({event['signature']['title']})" in first.stderr
    assert event["explanation"]["frames"][event["explanation"]["guilty"]]["function"] == "smash_return"

    rerun = run_reporter(site, "core", "--core", str(crash.cores[0]))
    assert json.loads(rerun.stdout)["event_id"] == answer["event_id"]  # the same report_id: a replay
    assert json.loads(rerun.stdout)["duplicate"]
    assert "(sent before: the registry's first answer)" in rerun.stderr
    # the core kept is the event's capture, where it lies, recorded once however often it is sent
    captures = registry.get(f"/api/v1/events/{answer['event_id']}")["captures"]
    assert [(c["method"], c["status"], c["target"]) for c in captures] == [
        ("core", "completed", str(crash.cores[0].resolve()))]
    second = run_reporter(site, "core", "--core", str(crash.cores[1]))
    other = registry.get(f"/api/v1/events/{json.loads(second.stdout)['event_id']}")
    assert other["id"] != event["id"] and other["signature"]["id"] == event["signature"]["id"]
    assert registry.get(f"/api/v1/signatures/{event['signature']['id']}")["event_count"] == RUNS

    offline = make_site(url=closed_port_url())
    spooled = run_reporter(offline, "core", "--core", str(crash_cores["abort"].cores[0]))
    assert spooled.returncode == 0 and json.loads(spooled.stdout)["decided_by"] == "fallback"
    assert "no answer from the registry and no policy bundle" in spooled.stderr
    [body] = offline.spooled()
    assert json.loads(body.read_bytes())["stack"]["signal"] == "SIGABRT"


def test_a_report_too_large_for_the_registry_arrives_without_its_other_threads(
        settings: Settings, registry: Registry, make_site, crash_cores: dict[str, Crash]) -> None:
    """A registry whose max_body_bytes a core's report passes refuses it with a 413: the
    reporter sends it again without its other threads' stacks (which no fingerprint reads),
    and the crash is registered as it would be in full, where it was spooled, then rejected at
    the post-boot resend, before. A spooled report (the registry was down) is resent so too."""
    first, second = crash_cores["thread"].cores[:2]
    offline = make_site(url=closed_port_url())  # the registry down: the report waits in the spool
    assert run_reporter(offline, "core", "--core", str(second)).returncode == 0
    [spooled] = offline.spooled()
    full = json.loads(spooled.read_bytes())
    slim = full | {"stack": {key: value for key, value in full["stack"].items() if key != "threads"}}
    sizes = [len(json.dumps(report, separators=(",", ":"))) for report in (slim, full)]
    assert sizes[1] > sizes[0] + 500, sizes  # the other threads' stacks
    small = replace(settings, max_body_bytes=sum(sizes) // 2)
    with serving(small) as (url, _):
        sent = run_reporter(make_site(url=url), "core", "--core", str(first))
        assert sent.returncode == 0, sent.stderr
        answer = json.loads(sent.stdout)
        assert answer["decided_by"] == "registry", sent.stderr
        assert "too large" in sent.stderr and "sending it without the other threads' stacks" in sent.stderr
        event = registry.get(f"/api/v1/events/{answer['event_id']}")
        assert event["signature"]["fingerprint"] == analyse_stack(full["stack"]).fingerprint

        offline.url = url
        offline.write()
        resent = run_reporter(offline, "post-boot")
        assert resent.returncode == 0, resent.stderr
        assert offline.spooled() == [] and not (offline.spool / "rejected").exists()
        kept = json.loads((offline.spool / "sent" / spooled.name).read_bytes())
        assert "threads" not in kept["stack"] and kept["stack"]["frames"]


def test_file_mode_takes_crash_and_start_times_from_systemd_coredump_and_its_options(
        registry: Registry, make_site, database, crash_cores: dict[str, Crash], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A core in systemd-coredump's store carries the crash time (user.coredump.timestamp, us);
    --started-at gives the process's start: the event has both and the uptime, as pipe mode's
    events do. --crashed-at overrides the store; a start after the crash is refused (exit 2)."""
    site = make_site()
    core = tmp_path / "core.crashy.0.1c2b3a4d5e6f708192a3b4c5d6e7f801.4242.1764699999000000"
    shutil.copyfile(crash_cores["null"].cores[0], core)
    os.setxattr(core, "user.coredump.timestamp", b"1764700000123456")  # 2025-12-02T18:26:40Z
    run = run_reporter(site, "core", "--core", str(core), "--started-at", "2025-12-02T17:26:40Z")
    assert run.returncode == 0, run.stderr
    first = json.loads(run.stdout)["event_id"]
    plain = tmp_path / "core"  # a copy (`coredumpctl dump -o`): no xattr, its mtime, no start
    shutil.copyfile(crash_cores["null"].cores[1], plain)
    os.utime(plain, (1764690000, 1764690000))
    second = json.loads(run_reporter(site, "core", "--core", str(plain)).stdout)["event_id"]
    given = run_reporter(site, "core", "--core", str(crash_cores["thread"].cores[0]), "--crashed-at",
                         "@1764700600", "--started-at", "2025-12-02T19:26:10+01:00")
    third = json.loads(given.stdout)["event_id"]
    with database.session() as session:
        events = {event_id: session.get(Event, event_id) for event_id in (first, second, third)}
        facts = {event_id: (naive(event.crashed_at), naive(event.process_started_at), event.process_uptime_s)
                 for event_id, event in events.items()}
    assert facts == {
        first: (datetime(2025, 12, 2, 18, 26, 40), datetime(2025, 12, 2, 17, 26, 40), 3600),
        second: (datetime(2025, 12, 2, 15, 40), None, None),
        third: (datetime(2025, 12, 2, 18, 36, 40), datetime(2025, 12, 2, 18, 26, 10), 630),
    }
    late = run_reporter(site, "core", "--core", str(core), "--started-at", "2025-12-02T19:00:00Z")
    assert late.returncode == 2 and "after it crashed" in late.stderr, late.stderr
    garbled = run_reporter(site, "core", "--core", str(core), "--crashed-at", "yesterday")
    assert garbled.returncode == 2 and "is not a time" in garbled.stderr


def naive(moment: datetime | None) -> datetime | None:
    """UTC, as SQLite and PostgreSQL both give it back."""
    return moment.replace(tzinfo=None) if moment else None


def test_an_unreadable_core_is_an_error_not_a_report(make_site, tmp_path: Path) -> None:
    site = make_site()
    not_a_core = tmp_path / "core"
    not_a_core.write_bytes(b"\x7fELF" + b"\0" * 60)
    run = run_reporter(site, "core", "--core", str(not_a_core))
    assert run.returncode == 1 and "cannot read the core" in run.stderr and site.spooled() == []


def test_a_core_cut_short_is_an_error_within_its_head_and_a_failed_capture_in_its_memory(
        registry: Registry, make_site, crash_cores: dict[str, Crash], tmp_path: Path) -> None:
    """A core file cut short (a disk that filled up, a copy interrupted): within its head (its
    notes) there is no crash to read, an error (exit 1) where a junk event was registered, its
    pc read from nowhere; within its memory the crash is reported from what is there, said on
    stderr, and the core recorded as a failed capture, not a completed one the budget counts."""
    site = make_site()
    intact = crash_cores["null"].cores[0]
    notes = next(segment for segment in read_core_file(str(intact)).segments if segment.kind == PT_NOTE)
    in_head = tmp_path / "in-head.core"
    in_head.write_bytes(intact.read_bytes()[:notes.offset + notes.filesz // 2])
    refused = run_reporter(site, "core", "--core", str(in_head))
    assert refused.returncode == 1 and "cut short" in refused.stderr, refused.stderr
    assert site.spooled() == []

    in_memory = tmp_path / "in-memory.core"
    size = intact.stat().st_size
    in_memory.write_bytes(intact.read_bytes()[:(notes.offset + notes.filesz + size) // 2])
    run = run_reporter(site, "core", "--core", str(in_memory))
    assert run.returncode == 0, run.stderr
    assert "was cut short" in run.stderr and "recorded as a failed capture" in run.stderr
    event = registry.get(f"/api/v1/events/{json.loads(run.stdout)['event_id']}")
    assert [(c["method"], c["status"]) for c in event["captures"]] == [("core", "failed")]


def test_a_core_read_without_its_programs_file_says_so(
        make_site, crash_cores: dict[str, Crash], tmp_path: Path) -> None:
    """A core read where the program's file is gone (a copy that ran, deleted since) has its
    frames through the program read from the core alone, fewer: the reporter says so and names
    --exe, where it was silent; given the file, it does not."""
    program = crash_cores["null"].program
    ran = tmp_path / "ran"
    ran.mkdir()
    for name in (program.name, "libcrashy.so"):
        shutil.copy(program.parent / name, ran / name)
    core = cores.crash(ran / program.name, "null", tmp_path / "run")
    (ran / program.name).unlink()
    site = make_site()
    gone = run_reporter(site, "core", "--core", str(core))
    assert gone.returncode == 0, gone.stderr
    assert f"the program's file {ran / program.name} is not here" in gone.stderr and "--exe" in gone.stderr
    given = run_reporter(site, "core", "--core", str(core), "--exe", str(program))
    assert given.returncode == 0 and "is not here" not in given.stderr, given.stderr


def compressed_copies(core: Path, folder: Path) -> dict[str, Path]:
    """The core as systemd-coredump's store keeps it (zstd, xz or lz4, as systemd was built) and
    as pipe mode may (gzip, xz), or bzip2, made with the standard library and the programs
    themselves."""
    copies = {"xz": folder / "core.xz", "gzip": folder / "core.gz", "bzip2": folder / "core.bz2"}
    for name, opener in (("xz", lzma.open), ("gzip", gzip.open), ("bzip2", bz2.open)):
        with core.open("rb") as plain, opener(copies[name], "wb") as packed:
            shutil.copyfileobj(plain, packed)
    copies |= {"zstd": folder / "core.zst", "lz4": folder / "core.lz4"}
    subprocess.run(["zstd", "-q", str(core), "-o", str(copies["zstd"])], check=True)
    subprocess.run(["lz4", "-q", str(core), str(copies["lz4"])], check=True)
    return copies


@pytest.mark.skipif(not (shutil.which("zstd") and shutil.which("lz4")), reason="zstd and lz4 programs")
def test_a_compressed_core_reads_as_the_plain_one(crash_cores: dict[str, Crash], tmp_path: Path) -> None:
    core = crash_cores["library"].cores[0]
    plain = report_of(core, crash_cores["library"])
    copies = compressed_copies(core, tmp_path)
    decompressed = set(Path(tempfile.gettempdir()).glob("crashreg-core-*"))
    # A core in systemd-coredump's store: compressed, its crash time in the extended attribute.
    os.setxattr(copies["zstd"], "user.coredump.timestamp", b"1764700000123456")
    for name, copy in copies.items():
        report = core_file_report(str(copy), "gpu-a017")
        for field in ("report_id", "fingerprint", "stack"):
            assert report[field] == plain[field], (name, field)
    assert core_file_report(str(copies["zstd"]), "gpu-a017")["crashed_at"].startswith("2025-12-02T18:26:40")
    assert set(Path(tempfile.gettempdir()).glob("crashreg-core-*")) == decompressed  # removed after


@pytest.mark.skipif(not (shutil.which("zstd") and shutil.which("lz4")), reason="zstd and lz4 programs")
def test_a_compressed_core_without_its_program_is_an_error_naming_it(
        make_site, crash_cores: dict[str, Crash], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    site = make_site()
    core = compressed_copies(crash_cores["null"].cores[0], tmp_path)["zstd"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # a host without zstd
    run = run_reporter(site, "core", "--core", str(core))
    assert run.returncode == 1 and "needs the zstd program" in run.stderr, run.stderr
    assert site.spooled() == []


@pytest.mark.skipif(not (shutil.which("zstd") and shutil.which("lz4")), reason="zstd and lz4 programs")
@pytest.mark.parametrize(("compression", "suffix"), [("zstd", ".zst"), ("gzip", ".gz"), ("bzip2", ".bz2")])
def test_a_compressed_core_is_stored_as_it_is_and_fetched_unpacked(
        registry: Registry, make_site, crash_cores: dict[str, Crash], tmp_path: Path,
        compression: str, suffix: str) -> None:  # type: ignore[no-untyped-def]
    """A core systemd-coredump compressed goes to the dump store as it is, under its compression's
    name, and the event's commands give gdb the plain core: fetched and unpacked, or unpacked
    where its host keeps it."""
    plain = crash_cores["abort"].cores[0]
    kept = compressed_copies(plain, tmp_path)[compression]
    run = run_reporter(make_site(), "core", "--core", str(kept))
    assert run.returncode == 0, run.stderr
    event_id = json.loads(run.stdout)["event_id"]
    [commands] = registry.get(f"/api/v1/events/{event_id}")["core_commands"]
    assert kept.exists()  # the host's own file, not a copy of ours: left where it was
    file = commands["file"]
    assert f"-o {file}{suffix} " in commands["fetch"]
    assert f"{compression} -dc {file}{suffix} > {file}" in commands["fetch"]
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # the command exactly as given; curl reaches the registry's public name (crashreg.test) here
    served = urlsplit(registry.url)
    (tmp_path / ".curlrc").write_text(f"connect-to = crashreg.test:80:{served.hostname}:{served.port}\n")
    fetched = subprocess.run(["bash", "-c", commands["fetch"]], cwd=workspace, capture_output=True, text=True,
                             env={"PATH": os.environ["PATH"], "TOKEN": registry.read_token,
                                  "CURL_HOME": str(tmp_path)}, timeout=60)
    assert fetched.returncode == 0, fetched.stderr
    assert [p.name for p in workspace.iterdir()] == [file]
    assert (workspace / file).read_bytes() == plain.read_bytes()
    assert f"{compression} -dc {kept.resolve()} > core && gdb " in commands["on_host"]
