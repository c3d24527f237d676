"""A lab guest with python3 that stays up: it boots, runs a script, and powers off.

The kdump guests of lab.py crash at once; this one does not (no crash kernel, no
panic_on_oops), so a script can run the reporter as a live host would: as the kernel's core
handler, or as a watcher of the kernel's log. Its initramfs is the busybox base of lab.Tree
with the virtio network (10.0.2.15, the registry at 10.0.2.2) and, appended as a second
newc archive (the kernel unpacks concatenated archives in order), the host's own Debian
python3: the binary, the libraries ldd lists for it and for the extension modules kept, and
the standard library without what a reporter never imports (tests, IDLE, Tk, ensurepip, ...),
compiled with unchecked-hash .pyc files so the guest never compiles the stdlib. That archive
is built once per python3 binary and cached under $CRASHREG_LAB_CACHE/python; a guest image
then costs one small cpio.

    image = python_initramfs(kit, out / "guest.img", script, {"lab/oops.log": path})
    booted = run_guest(kit, image, hostname="lab-guest", disk=disk, log=out / "guest.log")

The script runs as `sh /lab/run` from /init, root, its output on the serial console; the
reporter is at /usr/lib/crashreg/crashreg-report.pyz (as agents/README.md installs it) and
python3 at /usr/bin/python3. With a disk it is mounted at /var (its spool survives for the
host to read with lab.Disk). `LAB: run` and `LAB: script rc=N` bracket the script.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from agents import build_reporter
from tests.lab import lab
from tests.lab.packages import Kit, LabError, cache_dir, run

PYTHON = Path("/usr/bin/python3")  # Debian's (libc, libm, libz, libexpat): not a pyenv or venv one
PYZ = "usr/lib/crashreg/crashreg-report.pyz"
# Left out of the guest's standard library: what no reporter or lab script imports.
STDLIB_LEFT_OUT = frozenset(
    {
        "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
        "distutils", "unittest", "sqlite3", "dbm", "curses", "venv", "config-3.11-x86_64-linux-gnu",
        "turtle.py", "pydoc.py", "doctest.py", "__phello__", "__hello__.py", "site-packages",
        "dist-packages", "__pycache__",
    }
)  # fmt: skip
DYNLOAD_LEFT_OUT = ("_test", "_xx", "xx", "_ctypes_test", "_curses", "readline", "_dbm", "_gdbm",
                    "nis", "ossaudiodev", "audioop", "_sqlite3", "_tkinter")  # fmt: skip
MARKERS = (
    ("guest up", "LAB: guest up"),
    ("run", "LAB: run"),
    ("script", "LAB: script rc="),
    ("done", "LAB: done"),
)


def _stdlib_files(stdlib: Path) -> list[Path]:
    """The standard library's files minus STDLIB_LEFT_OUT and the left-out extension modules."""
    kept = []
    for path in sorted(stdlib.rglob("*")):
        relative = path.relative_to(stdlib)
        if STDLIB_LEFT_OUT & set(relative.parts) or not path.is_file():
            continue
        if relative.parts[0] == "lib-dynload" and path.name.startswith(DYNLOAD_LEFT_OUT):
            continue
        kept.append(path)
    return kept


def python_archive(kit: Kit) -> Path:
    """The cached newc archive holding python3, its libraries and the trimmed standard library."""
    binary = PYTHON.resolve()
    version = run([str(binary), "-c", "import sys; print(sys.version)"]).stdout.strip()
    where = "import os; print(os.path.dirname(os.__file__))"
    stdlib = Path(run([str(binary), "-I", "-c", where]).stdout.strip())
    key = hashlib.sha256(
        f"{version}|{binary.stat().st_size}|{binary.stat().st_mtime}|"
        f"{sorted(STDLIB_LEFT_OUT)}|{DYNLOAD_LEFT_OUT}".encode()
    ).hexdigest()[:16]
    out = cache_dir() / "python" / f"python-{key}.cpio"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tree = lab.Tree(kit, busybox=False)
    tree.add_binary(binary, f"usr/bin/{binary.name}")
    (tree.root / "usr/bin/python3").symlink_to(binary.name)
    target = str(stdlib).lstrip("/")
    for path in _stdlib_files(stdlib):
        relative = f"{target}/{path.relative_to(stdlib)}"
        if path.suffix == ".so":
            tree.add_binary(path.resolve(), relative)
        else:
            tree.add(path.resolve(), relative, 0o644)
    # Unchecked-hash .pyc files: valid whatever the guest's clock and the files' mtimes say.
    run([str(binary), "-I", "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
         "-s", str(tree.root), "-p", "/", str(tree.root / target)])  # fmt: skip
    staged = out.with_name(f".{out.name}.{tree.root.name}")
    tree.pack(staged, compress=False)
    staged.replace(out)
    return out


def python_initramfs(
    kit: Kit, out: Path, script: str, files: Mapping[str, Path | bytes] | None = None
) -> Path:
    """A guest image: busybox, the virtio network, python3, the reporter's pyz as built from
    this checkout, `script` as /lab/run, and `files` (path in the guest -> a host file, copied
    with its permission bits, or bytes, written 0644)."""
    tree = lab.Tree(kit)
    tree.add_modules()
    tree.add(lab.LAB / "guest" / "python-init.sh", "init")
    tree.add(lab.LAB / "guest" / "network.sh", "lib/lab/network.sh", 0o644)
    tree.write("lab/run", script, 0o755)
    with tempfile.TemporaryDirectory(prefix="crashreg-lab-pyz-") as work:
        tree.add(build_reporter.build(Path(work) / "crashreg-report.pyz"), PYZ)
    for target, content in (files or {}).items():
        if isinstance(content, Path):
            tree.add(content, target.lstrip("/"), content.stat().st_mode & 0o7777)
        else:
            path = tree.root / target.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    tree.pack(out, compress=False)
    with out.open("ab") as image, python_archive(kit).open("rb") as python:
        shutil.copyfileobj(python, image)
    return out


def run_guest(
    kit: Kit,
    initrd: Path,
    hostname: str = "lab-guest",
    disk: lab.Disk | None = None,
    memory_mb: int = lab.MEMORY_MB,
    cmdline: str = "",
    log: Path | None = None,
    timeout_s: float = lab.BOOT_TIMEOUT_S,
) -> lab.Boot:
    """Boot the guest, let its script run, and return the console once it powered off.

    `cmdline` adds kernel parameters (the script reads `lab.NAME=value` ones from
    /proc/cmdline); `timeout_s` bounds the whole run. Oopses do not panic this kernel
    (panic_on_oops stays 0); a panic still ends the run (panic=1 reboots, and QEMU exits on a
    reboot)."""
    parameters = f"{lab.KERNEL_PARAMETERS} lab.hostname={hostname} lab.disk={int(disk is not None)} {cmdline}"
    command = lab.qemu_command(kit.vmlinuz, initrd, parameters, disk.path if disk else None, memory_mb)
    booted = lab.run_qemu(command, MARKERS, log, timeout_s)
    if "LAB: done" not in booted.console:
        raise LabError(f"the guest {hostname} did not finish its script:\n{booted.console[-4000:]}")
    return booted


def script_status(booted: lab.Boot) -> int:
    """The exit status of the guest's script."""
    return int(booted.marker_line("script rc=").split("rc=")[1].split()[0])
