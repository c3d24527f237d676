"""Make registry/demo/cores/ingest-worker.tar.xz (real cores of the demo's program) and the
stacks the demo reads from them, registry/demo/cores/stacks.json.

    make demo-cores        (or: .venv/bin/python -m scripts.demo_cores [--output FILE])
    .venv/bin/python -m scripts.demo_cores --stacks-only     (the stacks again, from the archive)

Compiles registry/demo/cores/ingest_worker.cc once per release of the demo fleet, installs each
release in turn at one path (/tmp/crashreg-demo-cores/bin/ingest-worker: the cores name it, and
the registry tells a program's crashes by it), runs it in directories of its own there with
`ulimit -c unlimited` until it dumps core, each crash RUNS times, and packs the programs, the
cores and a manifest (what was run, by which compiler, on which kernel and C library) into one
reproducible, xz-compressed tar. Needs g++ and a core_pattern that writes plain files (the host's own
setting, read, never changed); it stops and says why otherwise. Then it reads every core of the
archive with the core handler's file mode (`--exe` the release's program) and stores the stack
each gives beside the archive: the registry never imports an agent, so the demo reads those.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import platform
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from agents.coredump import CrashFacts, core_file_analysis, userspace_report
from registry.demo.labelled_cores import ARCHIVE, CRASHES, MANIFEST, PROGRAM, RELEASES, STACKS

SOURCE = ARCHIVE.parent / "ingest_worker.cc"
WORK = Path("/tmp/crashreg-demo-cores")
INSTALLED = WORK / "bin" / PROGRAM
RUNS = 2
STACK_LIMIT = 256 << 10  # glibc sizes thread stacks by RLIMIT_STACK: small stacks, small cores


def problem() -> str | None:
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|") or "/" in pattern:
        return f"core_pattern is {pattern!r}: the cores would not land in the program's directory"
    return None if shutil.which("g++") else "g++ is not installed"


def limits() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_STACK, (STACK_LIMIT, STACK_LIMIT))


def compile_releases() -> dict[str, bytes]:
    """Every release compiled (at once: the compiler is most of the time), release -> program."""
    built = {release: WORK / release / PROGRAM for release in RELEASES}
    compiling = []
    for release, program in built.items():
        program.parent.mkdir(parents=True)
        compiling.append(subprocess.Popen(["g++", "-O1", "-fno-omit-frame-pointer", f'-DRELEASE="{release}"',
                                           "-o", str(program), str(SOURCE), "-pthread"]))
    if any(process.wait(timeout=300) for process in compiling):
        raise SystemExit("g++ failed")
    return {release: program.read_bytes() for release, program in built.items()}


def install(program: bytes) -> None:
    """The program at INSTALLED, the one path every release runs from."""
    INSTALLED.parent.mkdir(parents=True, exist_ok=True)
    INSTALLED.unlink(missing_ok=True)
    INSTALLED.write_bytes(program)
    INSTALLED.chmod(0o755)


def crash(mode: str, directory: Path) -> bytes:
    """Run the installed program in `directory` until it dumps core; the core."""
    directory.mkdir(parents=True)
    done = subprocess.run([str(INSTALLED), mode], cwd=directory, preexec_fn=limits, capture_output=True,
                          timeout=60, check=False)
    cores = sorted(directory.glob("core*"))
    if done.returncode >= 0 or not cores:
        raise SystemExit(f"{INSTALLED} {mode}: exit {done.returncode}, no core")
    return cores[0].read_bytes()


def first_line(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[0]


def read_stacks(archive: Path) -> dict[str, Any]:
    """What stacks.json holds: each core of `archive` read by file mode, its stack as
    `userspace_report` gives it without a crash's facts (labelled_cores.core_stack adds them)."""
    no_facts = CrashFacts(hostname="", crashed_at="")
    with tempfile.TemporaryDirectory(prefix="crashreg-demo-cores-") as directory, \
            tarfile.open(archive, "r:xz") as tar:
        tar.extractall(directory, filter="data")
        root = Path(directory)
        manifest = json.loads((root / MANIFEST).read_text())
        cores = [entry | {"stack": userspace_report(core_file_analysis(str(root / entry["core"]),
                                                                       str(root / entry["program"])),
                                                    no_facts, fingerprint=False)["stack"]}
                 for entry in manifest["cores"]]
    return {"made_by": "scripts/demo_cores.py, the core handler's file mode over each core",
            "archive": archive.name, "cores": cores}


def write_stacks(archive: Path, stacks: Path) -> None:
    stacks.write_text(json.dumps(read_stacks(archive), indent=1) + "\n")
    print(f"{stacks}: the stacks of {archive.name}'s cores")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ARCHIVE, help=f"default: {ARCHIVE}")
    parser.add_argument("--stacks", type=Path, help=f"default: {STACKS.name} beside the archive")
    parser.add_argument("--stacks-only", action="store_true",
                        help="read the archive's cores again, crash nothing")
    args = parser.parse_args(argv)
    output = args.output
    stacks = args.stacks or output.with_name(STACKS.name)
    if args.stacks_only:
        write_stacks(output, stacks)
        return 0
    why = problem()
    if why:
        print(f"cannot make the demo's cores: {why}", file=sys.stderr)
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    members: dict[str, bytes] = {}
    cores = []
    for release, program in compile_releases().items():
        install(program)
        members[f"{release}/{PROGRAM}"] = program
        for mode in CRASHES:
            for run in range(1, RUNS + 1):
                name = f"{release}/{mode}-{run}.core"
                members[name] = crash(mode, WORK / release / f"{mode}-{run}")
                cores.append({"core": name, "release": release, "crash": mode,
                              "program": f"{release}/{PROGRAM}"})
    manifest = {
        "made_by": "make demo-cores (scripts/demo_cores.py)",
        "source": "registry/demo/cores/ingest_worker.cc",
        "compiler": first_line(["g++", "--version"]),
        "c_library": " ".join(platform.libc_ver()),
        "kernel": os.uname().release,
        "ran_as": str(INSTALLED),
        "cores": cores,
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        entries = {MANIFEST: json.dumps(manifest, indent=1).encode()} | members
        for name, content in entries.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o755 if name.endswith(PROGRAM) else 0o644
            archive.addfile(info, io.BytesIO(content))
    output.write_bytes(lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    print(f"{output}: {len(cores)} cores, {output.stat().st_size} bytes")
    write_stacks(output, stacks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
