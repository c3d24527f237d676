"""The crash lab: real Debian kernels crash in QEMU (TCG) and their crash kernel reports to crashreg.

Pieces, each a plain function or small class the scenarios in tests/lab combine:

- `build_module`: tests/lab/module (crashlab.ko) built against the kernel's headers;
- `crash_initramfs`, `first_initramfs`: the two initramfs images, made from the repository's
  files (agents/kdump/crashreg-kdump.sh unmodified, a real reporter.conf, the offline bundle)
  and the unpacked Debian binaries with the shared libraries ldd lists;
- `Disk`: the crashed host's /var, an ext4 image made with `mkfs.ext4 -d` and read back with
  debugfs (no loop mounts);
- `boot`: one QEMU run (first kernel, panic, kexec into the crash kernel, report, dump, exit)
  with host-side timestamps for every progress marker;
- `Registry`: real gunicorn on 127.0.0.1 (an ephemeral port) over a fresh PostgreSQL database.

The guest reaches the registry as 10.0.2.2, QEMU user networking's alias of the host's
127.0.0.1; nothing else is ever contacted.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.lab.packages import Kit, LabError, built_aside, cache_dir, run

REPO = Path(__file__).resolve().parents[2]
LAB = Path(__file__).resolve().parent
KDUMP_SH = REPO / "agents" / "kdump" / "crashreg-kdump.sh"
KDUMP_UPLOAD_SH = REPO / "agents" / "kdump" / "crashreg-kdump-upload.sh"  # sourced from beside it
GUEST_HOST_ALIAS = "10.0.2.2"  # QEMU user networking: the host's 127.0.0.1
MEMORY_MB = int(os.environ.get("CRASHREG_LAB_MEMORY_MB", "384"))
CRASHKERNEL = os.environ.get("CRASHREG_LAB_CRASHKERNEL", "128M")
BOOT_TIMEOUT_S = float(os.environ.get("CRASHREG_LAB_BOOT_TIMEOUT", "300"))
# Every lab kernel's parameters. RCU stall warnings off: under TCG on a loaded host the guest's
# CPU stops for seconds (kexec -p loading the crash kernel under preempt_disable() was caught),
# and a stall report is host noise that would precede the lab's crash in the log. The crypto
# self-tests off (cryptomgr.notests): they are 1.5 s of a TCG kernel's 5 s to /init, and the
# lab crashes kernels to test reporting, not the kernel's crypto.
# no_timer_check: TCG on a loaded host can miss the IO-APIC timer check ("IO-APIC + timer
# doesn't work!", a panic before init, seen under four parallel suites); virtual machines skip it.
KERNEL_PARAMETERS = ("console=ttyS0 panic=1 loglevel=7 rcupdate.rcu_cpu_stall_suppress=1 cryptomgr.notests=1 "
                     "no_timer_check")
# insmod order of the virtio drivers: the cloud kernel ships them as modules without modules.dep.
VIRTIO_MODULES = {
    "virtio_ring": "drivers/virtio",
    "virtio": "drivers/virtio",
    "virtio_pci_modern_dev": "drivers/virtio",
    "virtio_pci_legacy_dev": "drivers/virtio",
    "virtio_pci": "drivers/virtio",
    "failover": "net/core",
    "net_failover": "drivers/net",
    "virtio_net": "drivers/net",
    "virtio_blk": "drivers/block",
}
# Binaries from the unpacked packages (path in the package -> path in the initramfs).
CRASH_TOOLS = {"usr/bin/makedumpfile": "usr/sbin/makedumpfile", "sbin/vmcore-dmesg": "usr/sbin/vmcore-dmesg"}
FIRST_TOOLS = {"sbin/kexec": "sbin/kexec"}


# --- the test module ------------------------------------------------------------------


def build_module(kit: Kit) -> Path:
    """crashlab.ko for this kernel, built once per source and ABI."""
    source = LAB / "module"
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(source.iterdir()) if p.is_file()))
    out = cache_dir() / "module" / f"{kit.release}-{digest.hexdigest()[:12]}"

    def make(building: Path) -> None:
        shutil.copytree(source, building, dirs_exist_ok=True)
        run(["make", "-C", str(kit.headers), f"M={building}", "modules"])

    # Two makes in one directory leave a module without its .modinfo that the guest refuses.
    built_aside(out, make, "crashlab.ko")
    return out / "crashlab.ko"


# --- initramfs images -----------------------------------------------------------------


def _libraries(binary: Path, kit: Kit) -> list[Path]:
    """The shared libraries ldd resolves for a binary (the unpacked packages first, then the host)."""
    listing = run(["ldd", str(binary)], env=os.environ | {"LD_LIBRARY_PATH": kit.library_path()}).stdout
    missing = [line.split()[0] for line in listing.splitlines() if "not found" in line]
    if missing:
        raise LabError(f"{binary} needs {', '.join(missing)}: not on the host nor in the unpacked packages")
    return [Path(found) for found in re.findall(r"(/\S+) \(0x", listing)]


class Tree:
    """An initramfs under construction: a staging directory packed as a newc cpio."""

    def __init__(self, kit: Kit, busybox: bool = True) -> None:
        """With busybox: the base system every guest has (directories, busybox and its applets);
        without: an empty tree, for an archive appended to one that has them."""
        self.kit = kit
        self.root = Path(tempfile.mkdtemp(prefix="crashreg-lab-initramfs-"))
        if busybox:
            self.add_busybox()

    def add_busybox(self) -> None:
        for sub in (
            "bin",
            "sbin",
            "usr/bin",
            "usr/sbin",
            "lib",
            "lib64",
            "etc",
            "proc",
            "sys",
            "dev",
            "tmp",
            "run",
            "var",
            "mnt",
        ):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        busybox = self.kit.tool("bin/busybox")
        self.add(busybox, "bin/busybox")
        applets = run([str(busybox), "--list"]).stdout.split()
        for applet in applets:
            link = self.root / "bin" / applet
            if not link.exists():
                link.symlink_to("busybox")

    def add(self, source: Path, target: str, mode: int = 0o755) -> None:
        path = self.root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        path.chmod(mode)

    def write(self, target: str, text: str, mode: int = 0o644) -> None:
        path = self.root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)

    def add_binary(self, source: Path, target: str) -> None:
        """A dynamically linked binary with every library ldd lists, at the library's own path."""
        self.add(source, target)
        for library in _libraries(source, self.kit):
            relative = str(library)
            for root in self.kit.tool_roots:
                if relative.startswith(str(root)):
                    relative = relative[len(str(root)) :]
            self.add(library.resolve(), relative.lstrip("/"))

    def add_modules(self) -> None:
        for name, folder in VIRTIO_MODULES.items():
            self.add(self.kit.modules / folder / f"{name}.ko", f"lib/modules/{name}.ko", 0o644)

    def pack(self, out: Path, compress: bool) -> Path:
        files = subprocess.run(
            ["find", ".", "-mindepth", "1"], cwd=self.root, capture_output=True, check=True
        ).stdout
        archive = subprocess.run(
            ["cpio", "--quiet", "-o", "-H", "newc", "--owner", "0:0"],
            cwd=self.root,
            input=files,
            capture_output=True,
            check=True,
        ).stdout
        out.write_bytes(gzip.compress(archive, compresslevel=1) if compress else archive)
        shutil.rmtree(self.root)
        return out


def reporter_conf(url: str, compression: str = "-l") -> str:
    """The crash kernel's /etc/crashreg/reporter.conf, as agents/README.md documents it."""
    return "".join(
        f'{key}="{value}"\n'
        for key, value in {
            "CRASHREG_URL": url,
            "CRASHREG_TOKEN_FILE": "/etc/crashreg/token",
            "CRASHREG_CONNECT_TIMEOUT": "5",
            "CRASHREG_MAX_TIME": "30",
            "CRASHREG_RETRIES": "2",
            "CRASHREG_RETRY_DELAY": "1",
            "CRASHREG_SPOOL_DIR": "/var/spool/crashreg",
            "CRASHREG_BUNDLE": "/etc/crashreg/policy-bundle.txt",
            # lzo (-l), not the reporter's default zlib (-c): full dumps stay cheap under TCG.
            "CRASHREG_COMPRESSION": compression,
        }.items()
    )


def crash_initramfs(kit: Kit, out: Path, conf: str, token: str, bundle: str | None) -> Path:
    """The crash kernel's initramfs: busybox, curl, makedumpfile, vmcore-dmesg, the reporter."""
    tree = Tree(kit)
    tree.add_modules()
    for source, target in CRASH_TOOLS.items():
        tree.add_binary(kit.tool(source), target)
    tree.add_binary(Path(shutil.which("curl") or "/usr/bin/curl"), "usr/bin/curl")
    tree.add(KDUMP_SH, "usr/sbin/crashreg-kdump")
    tree.add(KDUMP_UPLOAD_SH, "usr/sbin/crashreg-kdump-upload.sh", 0o644)
    tree.add(LAB / "guest" / "crash-init.sh", "init")
    tree.add(LAB / "guest" / "network.sh", "lib/lab/network.sh", 0o644)
    tree.write("etc/crashreg/reporter.conf", conf, 0o600)
    tree.write("etc/crashreg/token", token + "\n", 0o600)
    if bundle is not None:
        tree.write("etc/crashreg/policy-bundle.txt", bundle)
    return tree.pack(out, compress=True)


def first_initramfs(kit: Kit, out: Path, crash_image: Path, module: Path) -> Path:
    """The crashed kernel's initramfs: busybox, kexec, the crash kernel and its image, crashlab.ko."""
    tree = Tree(kit)
    for source, target in FIRST_TOOLS.items():
        tree.add_binary(kit.tool(source), target)
    tree.add(kit.vmlinuz, "boot/vmlinuz", 0o644)
    tree.add(crash_image, "boot/crash.img", 0o644)
    tree.add(module, "lib/crashlab.ko", 0o644)
    tree.add(LAB / "guest" / "first-init.sh", "init")
    return tree.pack(out, compress=False)


# --- the guest's disk -----------------------------------------------------------------


@dataclass
class Disk:
    """The crashed host's /var: ext4, written by the crash kernel, read here with debugfs."""

    path: Path

    @classmethod
    def create(cls, path: Path, size_mb: int = 3072) -> Disk:
        staging = Path(tempfile.mkdtemp(prefix="crashreg-lab-disk-"))
        (staging / "spool" / "crashreg").mkdir(parents=True)
        (staging / "crash").mkdir()
        run(["mkfs.ext4", "-q", "-F", "-d", str(staging), str(path), f"{size_mb}M"])
        shutil.rmtree(staging)
        return cls(path)

    def recover(self) -> Disk:
        """Replay the ext4 journal (e2fsck): a crash kernel that rebooted without unmounting
        left its last writes there, and debugfs reads only what is on the disk proper."""
        done = subprocess.run(["e2fsck", "-fy", str(self.path)], capture_output=True, text=True)
        if done.returncode not in (0, 1):  # 1: errors corrected (the journal replayed)
            raise LabError(f"e2fsck {self.path} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return self

    def debugfs(self, request: str) -> str:
        return run(["debugfs", "-R", request, str(self.path)]).stdout

    def listing(self, directory: str) -> dict[str, int]:
        """Names and sizes in a directory (`ls -p`: /inode/mode/uid/gid/name/size/)."""
        entries = {}
        for line in self.debugfs(f"ls -p {directory}").splitlines():
            parts = line.strip().split("/")  # "", inode, mode, uid, gid, name, size (empty: a directory), ""
            if len(parts) >= 7 and parts[5] not in (".", ".."):
                entries[parts[5]] = int(parts[6] or 0)
        return entries

    def read(self, path: str) -> bytes:
        with tempfile.NamedTemporaryFile() as out:
            self.debugfs(f"dump {path} {out.name}")
            return Path(out.name).read_bytes()

    def read_head(self, path: str, size: int) -> bytes:
        """The first bytes of a (large) file, without copying the rest out."""
        process = subprocess.Popen(
            ["debugfs", "-R", f"cat {path}", str(self.path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert process.stdout is not None
        head = process.stdout.read(size)
        process.kill()
        process.wait()
        return head

    def extract(self, path: str, target: Path) -> Path:
        self.debugfs(f"dump {path} {target}")
        return target

    def copy_tree(self, path: str, target: Path) -> Path:
        target.mkdir(parents=True, exist_ok=True)
        self.debugfs(f"rdump {path} {target}")
        return target / Path(path).name


# --- booting --------------------------------------------------------------------------


# A kernel message (`[    2.166895] tsc: ...`, with its newline) that the serial console printed
# inside a line of the guest's own output, which goes on after it.
INTERLEAVED_KERNEL_RECORD = re.compile(r"(?<=[^\n])\[\s*\d+\.\d{6}\] [^\n]*\n")


@dataclass
class Boot:
    """What one QEMU run showed: the serial console with host-side times of the markers."""

    console: str
    markers: dict[str, float]  # marker name -> seconds since QEMU started
    seconds: float
    boot_id: str | None
    returncode: int
    line_times: list[float] = field(default_factory=list)  # seconds since QEMU started, per console line

    def marker_line(self, prefix: str) -> str:
        """The guest's `LAB: <prefix>...` line, without a kernel message the serial console
        printed in the middle of it."""
        for line in INTERLEAVED_KERNEL_RECORD.sub("", self.console).splitlines():
            if line.startswith(f"LAB: {prefix}"):
                return line
        raise AssertionError(f"no 'LAB: {prefix}' line on the console:\n{self.console[-4000:]}")

    def timings(self) -> dict[str, float]:
        """boot (QEMU start to the first kernel's /init), panic (the crashed kernel's last
        console line) to the registry's answer in the crash kernel, and the dump."""
        m = self.markers
        figures = {"boot_s": m.get("first kernel up"), "total_s": self.seconds}
        if "panic" in m and "decided" in m:
            figures["panic_to_answer_s"] = m["decided"] - m["panic"]
        if "decided" in m and "collected" in m:
            figures["dump_s"] = m["collected"] - m["decided"]
        return {k: round(v, 2) for k, v in figures.items() if v is not None}


MARKERS = (
    ("first kernel up", "LAB: first kernel up"),
    ("crashing", "LAB: crashing"),
    ("crash kernel up", "LAB: crash kernel up"),
    ("decided", "LAB: decided"),
    ("collected", "LAB: collected"),
    ("done", "LAB: done"),
)


# A lab process (QEMU, the registry's gunicorn) gets SIGTERM when the test process that started
# it dies, killed included (setpriv --pdeathsig, util-linux): a killed run leaves none behind.
DIES_WITH_THE_TEST = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []


def qemu_command(kernel: Path, initrd: Path, cmdline: str, disk: Path | None, memory_mb: int) -> list[str]:
    """QEMU under TCG (nested KVM cannot run a guest here): one CPU, the disk (if any) on
    virtio-blk, user networking on virtio-net (the guest's 10.0.2.2 is the host's 127.0.0.1),
    the serial console on stdout, and a reboot ends QEMU."""
    drive = ["-drive", f"file={disk},format=raw,if=virtio,cache=unsafe"] if disk is not None else []
    return [
        "qemu-system-x86_64", "-accel", "tcg", "-m", str(memory_mb), "-smp", "1", "-cpu", "qemu64",
        "-kernel", str(kernel), "-initrd", str(initrd), "-append", cmdline, *drive,
        "-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
        "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
    ]  # fmt: skip


def boot(
    kit: Kit,
    initrd: Path,
    disk: Disk,
    kind: str,
    hostname: str,
    log: Path | None = None,
    started_qemu: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> Boot:
    """One crash: boot the first kernel, crash it with `kind`, let the crash kernel run, QEMU
    exits (or is killed through `started_qemu`'s process, as run_qemu says)."""
    cmdline = f"{KERNEL_PARAMETERS} crashkernel={CRASHKERNEL} lab.kind={kind} lab.hostname={hostname}"
    command = qemu_command(kit.vmlinuz, initrd, cmdline, disk.path, MEMORY_MB)
    booted = run_qemu(command, MARKERS, log, started_qemu=started_qemu)
    if "crashing" in booted.markers:  # the crashed kernel's last console line is the panic
        crashing = booted.markers["crashing"]
        handed_over = booted.markers.get("crash kernel up", float("inf"))
        booted.markers["panic"] = max(t for t in booted.line_times if crashing <= t < handed_over)
    return booted


def run_qemu(
    cmd: list[str],
    markers: tuple[tuple[str, str], ...],
    log: Path | None = None,
    timeout_s: float = BOOT_TIMEOUT_S,
    started_qemu: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> Boot:
    """Run QEMU to its exit, timing every console line and the first line holding each marker.
    `started_qemu` gets the process (a scenario that pulls the plug on the guest kills it)."""
    started = time.monotonic()
    found: dict[str, float] = {}
    lines: list[str] = []
    times: list[float] = []
    process = subprocess.Popen(
        [*DIES_WITH_THE_TEST, *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    if started_qemu is not None:
        started_qemu(process)
    assert process.stdout is not None
    deadline = started + timeout_s
    try:
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            now = time.monotonic() - started
            lines.append(line)
            times.append(now)
            for name, needle in markers:
                if name not in found and needle in line:
                    found[name] = now
            if time.monotonic() > deadline:
                raise LabError(f"the guest ran past {timeout_s}s:\n" + "\n".join(lines[-60:]))
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    console = "\n".join(lines) + "\n"
    if log is not None:
        log.write_text(console)
    return Boot(console, found, time.monotonic() - started, read_boot_id(console), process.returncode, times)


def read_boot_id(console: str) -> str | None:
    """The guest's boot_id from its `LAB: boot_id` line, without a kernel message the serial
    console printed inside it (a run read `...8ee5492803cf[` and found no such report)."""
    found = re.search(r"^LAB: boot_id (\S+)", INTERLEAVED_KERNEL_RECORD.sub("", console), re.M)
    return found.group(1) if found else None


# --- the registry under test ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Registry:
    """crashreg served by gunicorn on 127.0.0.1 over its own PostgreSQL database."""

    database_url: str
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def guest_url(self) -> str:
        return f"http://{GUEST_HOST_ALIAS}:{self.port}"

    def start(self, log: Path) -> Registry:
        from registry.auth.tokens import create_token
        from registry.db import Database
        from registry.migrate import upgrade

        upgrade(self.database_url)
        database = Database(self.database_url)
        try:
            for scope, kind in (
                ("report", "agent"),
                ("read", "human"),
                ("triage", "human"),
                ("admin", "human"),
                ("symbols", "agent"),
            ):
                with database.session() as session:
                    self.tokens[scope], _ = create_token(
                        session, f"lab-{scope}-{uuid.uuid4().hex[:6]}", scope, kind
                    )
        finally:
            database.dispose()
        self.port = free_port()
        env = (
            os.environ
            | {
                "CRASHREG_DATABASE_URL": self.database_url,
                "CRASHREG_BIND": f"127.0.0.1:{self.port}",
                "CRASHREG_WORKERS": "2",
                "CRASHREG_THREADS": "4",
                "CRASHREG_PUBLIC_URL": self.url,
            }
            | self.env
        )
        gunicorn = Path(sys.executable).with_name("gunicorn")
        self.process = subprocess.Popen(
            [*DIES_WITH_THE_TEST, str(gunicorn), "--config", str(REPO / "gunicorn.conf.py"),
             "registry.wsgi:app"],
            cwd=REPO,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LabError(f"gunicorn exited ({self.process.returncode}); see {log}")
            try:
                if requests.get(self.url + "/healthz", timeout=10).status_code == 200:
                    return self
            except requests.RequestException:  # not up yet, or still importing the app
                pass
            time.sleep(0.2)
        raise LabError(f"gunicorn did not answer /healthz within 120 s; see {log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def get(self, path: str, scope: str = "read", **params: Any) -> Any:
        response = requests.get(
            self.url + path,
            params=params,
            timeout=30,
            headers={"Authorization": f"Bearer {self.tokens[scope]}"},
        )
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text[:500]}"
        return response.json() if "json" in response.headers.get("Content-Type", "") else response.text
